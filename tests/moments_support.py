"""The task, scripted workers and strikes of the machine-fault specs at each moment
(tests/test_machine_fault_moments.py): a plan of three components (two at a time), their
merges, a test gate, the commit, on the stand-in sandbox; a strike that comes once, where its
moment is (a scripted worker, the sandbox's run of a gate or a container, a named point of
supervisor/core/faults.py).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from cli_support import supervisor
from test_machine_faults import _mount

from supervisor.core.process import run as run_process
from supervisor.guard.trust import trust
from supervisor.lifecycle.demo import make_demo_repo
from supervisor.lifecycle.opening import reading
from supervisor.sandbox.docker import RunResult, RunSpec
from supervisor.sandbox.standin import StandinSandbox, WorkerCall, answer, record

if TYPE_CHECKING:
    from collections.abc import Callable

TASK = "Write the three answer files"
WORKFLOW = """workflow:
  initial_step: plan
  steps:
    plan: {role: planner, next: implement}
    implement: {role: implementer, for_each: component, next: test, max_retries: 1}
    test: {gate: test, next: commit, on_fail: implement}
    commit: {action: commit}
"""
CONFIG = """clis:
  claude:
    base_url: http://127.0.0.1:9
limits:
  max_parallel_components: 2
gates:
  test: "{gate}"
"""
GATE = (  # the project's tests: they write a scratch file into their worktree, then check
    # (GATE_PAUSE: they take that long first, for a signal to come while they run)
    "sleep ${GATE_PAUSE:-0} && dd if=/dev/zero of=scratch bs=64k count=64 2>&1 && rm scratch && "
    "grep -H . c.txt && grep -q 'the c part' c.txt && test -f a.txt && test -f b.txt"
)
CHECK = "dd if=/dev/zero of=scratch bs=64k count=64 2>&1 && rm scratch"
"""Each component's own gate, in COMPONENT_GATES: a scratch file, no more."""
COMPONENT_GATES = WORKFLOW.replace("for_each: component,", "for_each: component, gates: [check],")
LIE = "OSError: [Errno 28] No space left on device: '/workspace/scratch'"
"""What component c's code prints in the lying spec, on a disk with room."""
PARTS = ("a", "b", "c")
PLAN = {
    "status": "COMPLETE",
    "summary": "three parts",
    "phases": [
        {
            "id": "p1",
            "description": "all",
            "components": [
                {"id": p, "description": f"the {p} part", "files": [f"{p}.txt"]} for p in PARTS
            ],
        }
    ],
    "dependencies": [],
    "estimated_components": len(PARTS),
}
WAIT_S = 30.0
"""The longest component a waits for b to start (a bound: it goes on as soon as b runs)."""


class Task:
    """The repository, its scripted workers and the one strike: `moment` names where it comes,
    `fault` what it does there (`strike`)."""

    def __init__(self, root: Path, moment: str, fault: Callable[[], None]) -> None:
        self.repo = make_demo_repo(root / "repo")
        self.moment = moment
        self.fault = fault
        self.struck = False
        self.bought: list[str] = []
        self.lock = threading.Lock()
        self.b_started = threading.Event()
        self.points: dict[str, int] = {}
        self.records = False
        """Whether each answer is recorded as the credential proxy would (the sandbox then
        requires a record, as the Docker sandbox does)."""

    def configure(self, workflow: str = WORKFLOW) -> None:
        state = self.repo / ".supervisor"
        state.mkdir(exist_ok=True)
        (state / "config.yaml").write_text(CONFIG.format(gate=GATE) + f'  check: "{CHECK}"\n')
        (state / "workflow.yaml").write_text(workflow)
        trust(self.repo)  # the base URL is this test's own (nothing listens there)

    def strike(self, here: str) -> None:
        """The fault, the first time the task comes to its moment."""
        with self.lock:
            if here != self.moment or self.struck:
                return
            self.struck = True
        self.fault()

    def worker(self, call: WorkerCall) -> str:
        if call.role == "planner":
            self.strike("planning")
            reply, bought = answer(PLAN), "planner"
        else:
            marked = [p for p in PARTS if f"one component of the plan: '{p}'" in call.prompt]
            part = marked[0] if marked else "c"  # a fix-up of them all: c's is the fix
            if part == "b":
                self.b_started.set()
            if part == "a" and self.moment == "fan-out":
                self.b_started.wait(WAIT_S)  # both running when the signal comes
                self.strike("fan-out")
            lies = self.moment == "lie" and part not in self.bought
            call.write(f"{part}.txt", f"{LIE}\n" if part == "c" and lies else f"the {part} part\n")
            reply, bought = _implemented(f"{part}.txt"), part if marked else "fix-up"
        if self.records:  # as the proxy: a write that fails ends nothing, the record is short
            with contextlib.suppress(OSError):
                record(call, json.loads(reply.splitlines()[-1])["result"])
        with self.lock:
            self.bought.append(bought)
        return reply

    def reached(self, point: str) -> None:
        """supervisor/core/faults.py's named points: the strike instead of a SIGKILL; at the last
        merge (c's, a real merge commit), when no component runs beside it."""
        self.points[point] = self.points.get(point, 0) + 1
        if point != "merging" or self.points[point] == len(PARTS):
            self.strike(point)

    def finished_tree(self) -> dict[str, str]:
        """What the task branch changed since the base, file by file (an undisturbed run's:
        each part's file with its line)."""
        with reading(self.repo) as store:
            wf = store.workflow(1)
        git = ["git", "-C", str(self.repo)]
        names = run_process([*git, "diff", "--name-only", wf.base_sha, wf.task_branch]).stdout
        return {
            n: run_process([*git, "show", f"{wf.task_branch}:{n}"]).stdout for n in names.split()
        }


UNDISTURBED = {f"{p}.txt": f"the {p} part\n" for p in PARTS}


def _implemented(path: str) -> str:
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


class Sandbox(StandinSandbox):
    """The stand-in sandbox, whose runs are where the strikes at gating and at a container's
    creation come."""

    task: Task | None = None

    @property
    def records_model_exchanges(self) -> bool:
        return self.task is not None and self.task.records

    def run(self, spec: RunSpec) -> RunResult:
        if self.task is not None:
            self.task.strike("gating" if spec.argv[:2] == ["sh", "-c"] else "creating")
        return super().run(spec)


def started(t: Task) -> subprocess.CompletedProcess[str]:
    """`start-task` on the fixed pipeline (no analyzer: the plan's the first step)."""
    return supervisor("start-task", TASK, "--yes", "--depth", "planned", "--repo", str(t.repo))


def status(repo: Path, *args: str) -> str:
    return " ".join(supervisor("status", *args, "--repo", str(repo)).stdout.split())


def resumed(t: Task) -> None:
    """`resume` completes the task at the undisturbed run's tree."""
    done = supervisor("resume", "1", "--repo", str(t.repo))
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    with reading(t.repo) as store:
        assert store.workflow(1).status == "completed"
    assert t.finished_tree() == UNDISTURBED


def sigterm() -> None:
    os.kill(os.getpid(), signal.SIGTERM)


GATES_SEEN: list[int] = []


def sigterm_while_the_gate_runs() -> None:
    """The signal once the gate's process runs (the stand-in's container): a thread watches
    this process's children for it, then signals."""

    def watch() -> None:
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            for pid in _children():
                with contextlib.suppress(OSError):
                    if b"scratch" in Path(f"/proc/{pid}/cmdline").read_bytes():
                        GATES_SEEN.append(pid)
                        sigterm()
                        return
            time.sleep(0.01)

    threading.Thread(target=watch, daemon=True).start()


def ended(pid: int) -> bool:
    """Gone, or killed and not yet reaped (a zombie: subprocess reaps it later)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rpartition(")")[2].split()[0] in ("Z", "X")


def _children() -> set[int]:
    found: set[int] = set()
    for thread in Path("/proc/self/task").iterdir():
        with contextlib.suppress(OSError):
            found |= {int(p) for p in (thread / "children").read_text().split()}
    return found


def on_tmpfs(folder: Path, options: str) -> None:
    """`folder` (which may hold files) moved onto a tmpfs of its own."""
    aside = folder.with_name(folder.name + ".aside")
    if folder.exists():
        folder.rename(aside)
    _mount(folder, options)
    if aside.exists():
        shutil.copytree(aside, folder, dirs_exist_ok=True, symlinks=True)
        shutil.rmtree(aside)


# moment: (the folder on a small tmpfs, its options, how it fills, what is named full)
