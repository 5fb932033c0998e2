"""A gate never runs twice on the same tree within a task (issue 30, item 5).

The real engine, SQLite and git with the stand-in sandbox (gates run as host subprocesses, see
tests/test_engine_fast.py): every real run of the gate appends a line to a counter file outside
the repository, so the specs count runs, not events (a `test` gate also runs once on the task's
base commit, for its test count's floor). A second gate step on an identical tree
takes the first run's result (`gate_reused`); a changed tree, command, image or set of pinned
tests runs it again, and a worker cannot reach the remembered runs: they live in the task's
state, keyed by the tree's git id, never in its worktree.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from test_engine_fast import Project, project, reviews, warm_packer, writes

from supervisor.gates import reuse as gate_reuse
from supervisor.workflow.state import WorkflowState

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

__all__ = ["project", "warm_packer"]  # the fixtures, shared with the engine's fast specs

TWO_GATES = """implement
  steps:
    implement: {role: implementer, next: test, max_retries: 3}
    test: {gate: test, next: review, on_fail: implement}
    review: {role: reviewer, next: final, on_reject: implement}
    final: {gate: test, next: commit, on_fail: implement}
    commit: {action: commit}
"""


def counted_gate(tmp_path: Path) -> tuple[dict[str, str], Path]:
    runs = tmp_path / "gate-runs.txt"
    return {"test": f"echo ran >> {runs}; grep -q right answer.txt"}, runs


def test_the_same_gate_on_the_same_tree_runs_once_and_is_reused_after(
    project: Callable[..., Project], tmp_path: Path
) -> None:
    gates, runs = counted_gate(tmp_path)
    p = project(
        TWO_GATES,
        gates,
        ("ROLE: implementer", writes({"answer.txt": "right\n"})),
        ("ROLE: reviewer", reviews("APPROVED")),
    )

    wf = p.start()

    assert wf.status == "completed"
    # Once on the base commit (the test count's floor, once per task), once by `test`; `final`
    # reused it.
    assert len(p.events("gate_baseline")) == 1
    assert runs.read_text().splitlines() == ["ran", "ran"]
    assert [(e.step, e.status) for e in p.events("gate")] == [
        ("test", "passed"),
        ("final", "passed"),
    ]
    (reused,) = p.events("gate_reused")
    assert reused.step == "final" and reused.status == "passed"
    assert reused.payload["command"] == gates["test"]
    assert reused.payload["ran_on"] == p.events("gate")[0].payload["commit"]
    stored = WorkflowState.load(p.workflow().context).gate_runs
    assert [(r.gate, r.exit_code) for r in stored] == [("test", 0)]


def test_a_changed_tree_runs_the_gate_again_and_its_failure_is_not_reused(
    project: Callable[..., Project], tmp_path: Path
) -> None:
    """The attack: after a pass, the worker breaks the code and hopes for the pass it had. The
    tree differs, so the gate runs, fails, and the work goes back."""
    gates, runs = counted_gate(tmp_path)
    p = project(
        TWO_GATES,
        gates,
        ("ROLE: implementer", writes({"answer.txt": "right\n"})),
        ("ROLE: reviewer", reviews("CHANGES_REQUESTED", "say it twice")),
        ("say it twice", writes({"answer.txt": "wrong now\n"})),
        ("is wrong", writes({"answer.txt": "right, right\n"})),
        ("ROLE: reviewer", reviews("APPROVED")),
    )
    p.script.replies[3]["when"] = "FEEDBACK FROM THE PREVIOUS ATTEMPT"

    wf = p.start()

    assert wf.status == "completed"
    assert p.on_branch("answer.txt") == "right, right\n"
    gates_seen = [(e.step, e.status) for e in p.events("gate")]
    assert gates_seen == [
        ("test", "passed"),
        ("test", "failed"),
        ("test", "passed"),
        ("final", "passed"),
    ]
    assert len(p.events("gate_baseline")) == 1
    assert len(runs.read_text().splitlines()) == 1 + 3  # the base, then every new tree
    assert [e.step for e in p.events("gate_reused")] == ["final"]


def test_the_key_is_the_tree_the_command_the_image_and_the_pinned_tests() -> None:
    base = gate_reuse.key_of("t1", "make test", "sha256:i1", {"test_a.py": 2})
    others = [
        gate_reuse.key_of("t2", "make test", "sha256:i1", {"test_a.py": 2}),
        gate_reuse.key_of("t1", "make check", "sha256:i1", {"test_a.py": 2}),
        gate_reuse.key_of("t1", "make test", "sha256:i2", {"test_a.py": 2}),
        gate_reuse.key_of("t1", "make test", "sha256:i1", {"test_a.py": 3}),
    ]
    assert len({base, *others}) == 5
    assert base == gate_reuse.key_of("t1", "make test", "sha256:i1", {"test_a.py": 2})


def test_only_passing_runs_with_a_whole_output_are_remembered_and_the_newest_are_kept() -> None:
    def run(key: str, exit_code: int = 0, output: str = "ok") -> gate_reuse.GateRun:
        return gate_reuse.GateRun(key, "test", "make test", "t", "c", "i", exit_code, output, 1.0)

    context: dict[str, Any] = {}
    assert gate_reuse.remembered(context, run("failed", exit_code=1)) == []
    too_long = "x" * (gate_reuse.OUTPUT_KEPT + 1)
    assert gate_reuse.remembered(context, run("long", output=too_long)) == []
    for i in range(gate_reuse.KEPT + 2):
        context["gate_runs"] = gate_reuse.remembered(context, run(f"k{i}"))
    kept = [r["key"] for r in context["gate_runs"]]
    assert kept == [f"k{i}" for i in range(2, gate_reuse.KEPT + 2)]
    assert gate_reuse.find(context, "k5") == run("k5")
    assert gate_reuse.find(context, "k0") is None
