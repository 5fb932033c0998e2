"""A test gate's floor: how many tests it ran on the task's base commit, counted once per task.

Why: a passing test gate proves only that nothing failed; with its tests deleted, skipped or no
longer collected it passes too (issue 24: "Ran 0 tests … OK", vitest's "no tests" with
`passWithNoTests`). So the first time a counted gate (supervisor/gates/test_counts.py) passes a
candidate, the same command runs once on the base commit, and the number of tests it ran is
recorded as a `gate_baseline` event: the fact every later run of that gate in the task is
compared with. A run with fewer tests fails with both counts. When a test engineer's tests pass
a counted gate, the floor rises to that run's count (another `gate_baseline` event).

Where a count cannot be read (a runner this module does not know, `go test` without -v), the
gate's result says so instead of passing silently.
"""

from __future__ import annotations

import hashlib
import threading
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel

from supervisor.core.errors import CommandTimeoutError, SandboxError
from supervisor.gates import test_counts
from supervisor.gates.run import GateResult, run_gate
from supervisor.state.store import EventSpec

if TYPE_CHECKING:
    from supervisor.gates.asking import Asking
    from supervisor.state.store import Workflow

EVENT = "gate_baseline"
_LOCK = threading.Lock()
_MEASURING: dict[tuple[int, str, str], threading.Lock] = {}
"""One base run per (workflow, gate, command) even when parallel components reach the gate
together; a monorepo's projects (a command each) measure side by side."""


class Baseline(BaseModel):
    """What a counted gate ran on the base commit (or what a test engineer raised it to)."""

    gate: str
    command: str
    tests: int | None
    runners: list[str] = []
    commit: str
    source: Literal["base", "test_engineer"] = "base"
    note: str = ""

    def describe(self) -> str:
        return "an unknown number of" if self.tests is None else str(self.tests)


class Verdict(BaseModel):
    """A passing gate run judged against its floor: `problem` set fails it."""

    tests: int | None
    base_tests: int | None
    problem: str = ""
    note: str = ""

    def payload(self) -> dict[str, object]:
        data: dict[str, object] = {"tests": self.tests, "base_tests": self.base_tests}
        if self.problem:
            data["count_problem"] = self.problem
        if self.note:
            data["count_note"] = self.note
        return data


def recorded(c: Asking, wf: Workflow, gate: str, command: str) -> Baseline | None:
    """The latest floor recorded for this gate and command in the task, if any."""
    for event in reversed(c.store.events(wf.id)):
        if event.type == EVENT and event.payload.get("gate") == gate:
            found = Baseline.model_validate(event.payload)
            if found.command == command:
                return found
    return None


def baseline(
    c: Asking,
    wf: Workflow,
    name: str,
    gate: str,
    command: str,
    image: str | None,
    result: GateResult,
    commit: str,
) -> Baseline:
    """The gate's floor: recorded earlier, taken from `result` when `commit` is the base's
    tree, or measured now by one run on the base commit (and recorded)."""
    with _LOCK:
        # per command: a monorepo's projects (one command each) measure side by side
        lock = _MEASURING.setdefault((wf.id, gate, command), threading.Lock())
    with lock:
        found = recorded(c, wf, gate, command)
        if found is not None:
            return found
        if c.ws.tree_hash(commit) == c.ws.tree_hash(wf.base_sha):
            measured = _from(gate, command, wf.base_sha, result.output)
        else:
            measured = _measure(c, wf, name, gate, command, image)
        payload = measured.model_dump(mode="json")
        c.store.add_event(wf.id, EventSpec(EVENT, step=name, status="recorded", payload=payload))
        return measured


def raise_floor(
    c: Asking, wf: Workflow, name: str, floor: Baseline, result: GateResult, commit: str
) -> None:
    """A test engineer's accepted tests become the floor: record this run's count if higher."""
    count = test_counts.count_tests(result.output)
    if count is None or (floor.tests is not None and count.ran <= floor.tests):
        return
    raised = floor.model_copy(
        update={
            "tests": count.ran,
            "runners": list(count.runners),
            "commit": commit,
            "source": "test_engineer",
            "note": "",
        }
    )
    payload = raised.model_dump(mode="json")
    c.store.add_event(wf.id, EventSpec(EVENT, step=name, status="raised", payload=payload))


def judge(floor: Baseline, result: GateResult) -> Verdict:
    """A passing run against the floor: fewer tests (0 included) or no readable count where
    the base had one fails; a floor that could not be read is said, not hidden."""
    count = test_counts.count_tests(result.output)
    ran = None if count is None else count.ran
    if floor.tests is None:
        note = (
            f"The '{floor.gate}' gate's test count is not compared: {floor.note or 'unknown'}"
            + (f" (this run: {count.describe()})" if count else "")
        )
        return Verdict(tests=ran, base_tests=None, note=note)
    if count is None:
        problem = (
            f"The '{floor.gate}' gate (`{floor.command}`) exited 0 but printed no test summary, "
            f"where the task's base commit ran {floor.tests} tests "
            f"({', '.join(floor.runners)}): the test runner did not run, or its output changed."
        )
        return Verdict(tests=None, base_tests=floor.tests, problem=problem)
    if count.ran < floor.tests:
        since = "the task's base commit" if floor.source == "base" else "the accepted tests"
        problem = (
            f"The '{floor.gate}' gate (`{floor.command}`) ran {count.ran} tests where {since} "
            f"ran {floor.tests}: tests were deleted, skipped or are no longer collected. Keep "
            "every test running (add tests freely) and make the code pass them."
        )
        return Verdict(tests=count.ran, base_tests=floor.tests, problem=problem)
    return Verdict(tests=count.ran, base_tests=floor.tests)


def run_aside(
    c: Asking,
    wf: Workflow,
    name: str,
    command: str,
    commit: str,
    image: str | None,
    label: str,
    show: bool = False,
) -> GateResult:
    """The gate's command on `commit` in a throwaway worktree of its own, outside the step's
    own run (the base's count, the base's tests on a candidate): no step row, nothing kept.
    `show`: its output goes to the person watching."""
    worktree = c.ws.add_worktree(f"wf{wf.id}-{label}", commit)
    try:
        return run_gate(
            c.sandbox,
            name,
            command,
            worktree,
            c.settings.limits,
            c.labels(wf.id, name),
            on_output=c.reporter.output if show else None,
            image=image,
        )
    finally:
        c.ws.remove_worktree(worktree)


def _from(gate: str, command: str, commit: str, output: str) -> Baseline:
    count = test_counts.count_tests(output)
    if count is None:
        known = ", ".join(test_counts.PARSERS)
        note = (
            f"the base commit's run of `{command}` printed no test summary this supervisor "
            f"reads ({known}), so the number of tests is not checked in this task"
        )
        return Baseline(gate=gate, command=command, tests=None, commit=commit, note=note)
    return Baseline(
        gate=gate, command=command, tests=count.ran, runners=list(count.runners), commit=commit
    )


def _measure(
    c: Asking, wf: Workflow, name: str, gate: str, command: str, image: str | None
) -> Baseline:
    """Run the gate once on the base commit, in the candidate's image, to count its tests."""
    c.reporter.step(wf.id, name, f"gate `{command}` on the task's base commit, to count its tests")
    which = hashlib.sha256(command.encode()).hexdigest()[:8]
    try:
        result = run_aside(c, wf, name, command, wf.base_sha, image, f"{gate}-baseline-{which}")
    except (CommandTimeoutError, SandboxError) as e:
        note = f"the run on the base commit did not finish ({e.message.splitlines()[0]})"
        return Baseline(gate=gate, command=command, tests=None, commit=wf.base_sha, note=note)
    return _from(gate, command, wf.base_sha, result.output)
