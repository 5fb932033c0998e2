"""A supervisor process for the randomized kill spec (tests/test_kill_random.py) to SIGKILL.

`python tests/kill_driver.py <repo> <log> start|resume` runs the task (or resumes workflow 1) on
the stand-in sandbox with scripted workers that always give the same answers, so every run,
however often it is interrupted, must end at the same tree. Each worker invocation appends its
step's name to <log> (flushed to disk before the answer goes back), which is how the spec counts
the invocations a kill cost.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from supervisor import tasks
from supervisor.errors import SupervisorError
from supervisor.sandbox.standin import StandinSandbox, WorkerCall, answer

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


def worker(log: Path) -> StandinSandbox:
    def run(call: WorkerCall) -> str:
        if call.role == "planner":
            reply = answer(PLAN)
        elif call.role == "reviewer":
            reply = answer({"status": "APPROVED", "summary": "fine", "issues": []})
        else:
            part = "a" if "'a'" in call.prompt else "b"
            call.write(f"{part}.txt", f"the {part} part\n")
            reply = answer(
                {
                    "status": "SUCCESS",
                    "summary": f"wrote {part}.txt",
                    "files_created": [f"{part}.txt"],
                    "files_modified": [],
                    "tests_written": [],
                    "blockers": [],
                }
            )
        with log.open("a") as handle:
            handle.write(call.step + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        return reply

    return StandinSandbox(run)


def main() -> int:
    repo, log, what = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
    sandbox = worker(log)
    tasks.open_sandbox = lambda project, clis: sandbox  # type: ignore[assignment]
    try:
        wf = tasks.start_task(TASK, repo) if what == "start" else tasks.resume(1, repo)
    except SupervisorError as e:
        print(f"{type(e).__name__}: {e.message}", file=sys.stderr)
        return 1
    print(wf.status)
    return 0 if wf.status == "completed" else 1


if __name__ == "__main__":
    sys.exit(main())
