"""The base oracle: a candidate that changed the base's tests is also judged by the base's tests.

Why: the test gate runs the tests as the worker left them, so a worker can pass it by rewriting
them. When a candidate changed a test file that existed when the task started
(supervisor/gates/base_tests.py), the same gate command runs once more, in the same no-network
sandbox and image, on the candidate's code with the base's tests put back. The candidate's own
run passing and this one failing means the candidate changed what the tests specify: that is a
person's decision, never a worker's, so the verdict (`SpecChange`) goes into the workflow's state
and the approval policy's `tests_changed` condition stops the run before its commit
(supervisor/policy/risk.py). A candidate that changed no pre-existing test runs nothing extra.

The run is remembered by its tree like every gate run (gates/reuse.py): the same
candidate judged again (a component's gate, then the task's) runs it once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from supervisor.core.errors import CommandTimeoutError, SandboxError
from supervisor.core.plural import counted
from supervisor.gates import base_tests, failure_summary
from supervisor.gates import baseline as gate_baseline
from supervisor.gates import reuse as gate_reuse
from supervisor.gates.base_tests import SpecChange
from supervisor.gates.run import GateResult
from supervisor.state.store import EventSpec
from supervisor.workspace.treedata import CommitFiles

if TYPE_CHECKING:
    from supervisor.gates.asking import Asking
    from supervisor.state.store import Workflow

CONTEXT_KEY = "spec_change"
EVENT = "base_oracle"
SIGNAL_BYTES = 4_000_000
"""Test file text read for tamper signals per candidate (both sides together); the base's tests
run on the candidate whatever this leaves unread, so a flood of changes only loses signals."""


def lines_for(context: dict[str, Any], tree: str) -> list[str]:
    """What the candidate whose tree is `tree` did to the base's tests, as its last counted gate
    judged it: for its reviewer's prompt. Empty for any other tree."""
    spec = context.get(CONTEXT_KEY)
    if not spec or spec.get("tree") != tree:
        return []
    return SpecChange.model_validate(spec).lines()


def check(
    c: Asking,
    wf: Workflow,
    name: str,
    gate: str,
    command: str,
    image: str | None,
    commit: str,
    tree: str,
    floor: gate_baseline.Baseline,
    context: dict[str, Any],
    directory: str = "",
) -> tuple[SpecChange | None, dict[str, Any]]:
    """(the verdict, context to remember) for a candidate whose own counted gate run
    passed; no verdict when it changed no test of the base (then nothing runs). `context`: the
    workflow's, with what the candidate's own run adds to it."""
    git_dir = c.ws.git_dir
    found = base_tests.changes(git_dir, wf.base_sha, commit)
    if not found:
        return None, {}
    earlier = context.get(CONTEXT_KEY)
    if earlier and (earlier["tree"], earlier["gate"], earlier["command"]) == (tree, gate, command):
        return SpecChange.model_validate(earlier), {}  # this very tree judged: once is enough
    oracle = base_tests.restored(git_dir, wf.base_sha, commit)
    c.reporter.step(
        wf.id, name, f"gate `{command}` on the candidate's code with the base's tests (no network)"
    )
    result, remembered = _run(c, wf, name, gate, command, image, oracle, context, directory)
    problem = ""
    if result.passed and floor.source == "base":  # a raised floor counts tests the oracle drops
        problem = gate_baseline.judge(floor, result).problem
    passed = result.passed and not problem
    spec = SpecChange(
        tree=tree,
        gate=gate,
        command=command,
        changed=found.describe(),
        signals=signals(c, wf.base_sha, commit, found.modified),
        base_tests="passed" if passed else "failed",
        failing="" if passed else (problem or failure_summary.summarize(result.output)),
        oracle=oracle,
        diff=base_tests.diff(git_dir, wf.base_sha, commit, sorted(found.changed)),
    )
    payload = {
        **spec.model_dump(exclude={"diff"}),
        "exit_code": result.exit_code,
        "output_tail": result.output[-4000:],
    }
    # Logged at once, as the base count is (gate_baseline): a fan-out keeps only its
    # components' step runs, and the verdict is a fact of the run, not progress.
    c.store.add_event(wf.id, EventSpec(EVENT, step=name, status=spec.base_tests, payload=payload))
    return spec, remembered


def signals(c: Asking, base: str, head: str, paths: list[str]) -> list[str]:
    """The tamper signals of every modified test file, bounded (the parsers load only here)."""
    from supervisor.gates import test_tamper

    before = CommitFiles(c.ws.git_dir, base).read_many(paths)
    after = CommitFiles(c.ws.git_dir, head).read_many(paths)
    found: list[str] = []
    budget = SIGNAL_BYTES  # the parsers take seconds a megabyte on hostile text
    for i, path in enumerate(sorted(p for p in paths if p in before and p in after)):
        budget -= len(before[path]) + len(after[path])
        if budget < 0 or len(found) >= base_tests.MAX_SIGNALS:
            more = counted(len(paths) - i, "more changed test file")
            found.append(f"{more} not read for signals")
            break
        found += test_tamper.signals(path, before[path], after[path])
    return found[: base_tests.MAX_SIGNALS + 1]


def _run(
    c: Asking,
    wf: Workflow,
    name: str,
    gate: str,
    command: str,
    image: str | None,
    commit: str,
    context: dict[str, Any],
    directory: str,
) -> tuple[GateResult, dict[str, Any]]:
    """The gate's run on `commit`: remembered from an earlier run on its tree, or run now."""
    tree = c.ws.tree_hash(commit)
    image_id = gate_reuse.image_id(c.sandbox, image)
    key = gate_reuse.key_of(tree, command, image_id, context.get("test_pins") or {}, directory)
    earlier = gate_reuse.find(context, key)
    if earlier is not None:
        return earlier.result(name), {}
    label = f"{name.replace('/', '-')}-base-tests"
    try:
        result = gate_baseline.run_aside(c, wf, name, command, commit, image, label, show=True)
    except (CommandTimeoutError, SandboxError) as e:  # no verdict of the base's tests: a person
        said = e.message.splitlines()[0] if e.message else type(e).__name__
        output = f"the base's tests did not finish: {said}"
        return GateResult(name, command, False, -1, output, 0.0), {}
    run = gate_reuse.GateRun.of(key, gate, tree, commit, image_id, result)
    return result, {"gate_runs": gate_reuse.remembered(context, run)}
