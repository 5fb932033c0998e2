"""A supervisor process for the randomized kill spec (tests/test_kill_random.py) to SIGKILL.

`python tests/kill_driver.py <repo> <log> start|resume` runs the task (or resumes workflow 1) on
the stand-in sandbox with scripted workers that always give the same answers, so every run,
however often it is interrupted, must end at the same tree. With SUPERVISOR_KILL_PLAN=expanded,
component b (b.txt and c.txt) reports itself too large and is split into a sub-plan (b.1 writes
b.txt, b.2 c.txt): the kill may then land inside the nested sub-plan. Each worker invocation
appends its step's name to <log> (flushed to disk before the answer goes back), which is how the
spec counts the invocations a kill cost.

It starts as the `supervisor` command does (supervisor/cli/entry.py: the cyclic collector's
threshold raised before the package is imported). The spec forks each run from a process that
has already loaded the package (tests/kill_fork.py), so its dozen runs per seed set do not pay
the same imports each time; run as a script, it pays them itself.
"""

from __future__ import annotations

import gc
import os
import sys
from pathlib import Path

from supervisor.cli.entry import GC_THRESHOLD

gc.set_threshold(GC_THRESHOLD, *gc.get_threshold()[1:])

from supervisor.core.errors import SupervisorError  # noqa: E402
from supervisor.lifecycle import tasks  # noqa: E402 (after the collector's threshold, as the entry)
from supervisor.sandbox.standin import StandinSandbox, WorkerCall, answer  # noqa: E402

TASK = "Write the two answer files"
PLAN = {
    "status": "COMPLETE",
    "summary": "two parts",
    "phases": [
        {
            "id": "p1",
            "description": "all",
            "components": [
                {"id": "a", "description": "the a part", "files": ["a.txt"]},
                {"id": "b", "description": "the b part", "files": ["b.txt"]},
            ],
        }
    ],
    "dependencies": [],
    "estimated_components": 2,
}


EXPANDED = os.environ.get("SUPERVISOR_KILL_PLAN") == "expanded"
SUB_PLAN = {
    **PLAN,
    "phases": [
        {
            "id": "p1",
            "description": "b in two",
            "components": [
                {"id": "one", "description": "b.txt", "files": ["b.txt"]},
                {"id": "two", "description": "c.txt", "files": ["c.txt"]},
            ],
        }
    ],
}
TOO_LARGE = {"status": "TOO_LARGE", "summary": "b", "reason": "b.txt and c.txt are two jobs"}


EXPANDED_PLAN = {
    **PLAN,
    "phases": [
        {
            "id": "p1",
            "description": "all",
            "components": [
                {"id": "a", "description": "the a part", "files": ["a.txt"]},
                {"id": "b", "description": "the b part", "files": ["b.txt", "c.txt"]},
            ],
        }
    ],
}


def plan() -> dict[str, object]:
    return EXPANDED_PLAN if EXPANDED else PLAN


def implement(call: WorkerCall) -> str:
    if EXPANDED and "one component of the plan: 'b'" in call.prompt:
        return answer(TOO_LARGE)
    part, path = "a", "a.txt"
    for marker, part_path in (("'b'", "b.txt"), ("'b.1'", "b.txt"), ("'b.2'", "c.txt")):
        if f"one component of the plan: {marker}" in call.prompt:
            part, path = marker.strip("'"), part_path
    call.write(path, f"the {part} part\n")
    return answer(
        {
            "status": "SUCCESS",
            "summary": f"wrote {path}",
            "files_created": [path],
            "files_modified": [],
            "tests_written": [],
            "blockers": [],
        }
    )


def worker(log: Path) -> StandinSandbox:
    def run(call: WorkerCall) -> str:
        if call.role == "planner":
            reply = answer(SUB_PLAN if "SUB-PLAN OF COMPONENT 'b'" in call.prompt else plan())
        elif call.role == "reviewer":
            reply = answer({"status": "APPROVED", "summary": "fine", "issues": []})
        else:
            reply = implement(call)
        with log.open("a") as handle:
            handle.write(call.step + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        return reply

    return StandinSandbox(run)


def main() -> int:
    repo, log, what = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
    sandbox = worker(log)
    tasks.open_sandbox = lambda project, clis, **_: sandbox  # type: ignore[assignment]
    try:
        wf = tasks.start_task(TASK, repo) if what == "start" else tasks.resume(1, repo)
    except SupervisorError as e:
        print(f"{type(e).__name__}: {e.message}", file=sys.stderr)
        return 1
    print(wf.status)
    return 0 if wf.status == "completed" else 1


if __name__ == "__main__":
    sys.exit(main())
