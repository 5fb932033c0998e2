"""What the task branch may receive, on real git: gate records by tree, the commit message, the
ways a task lands on its base branch, and what counts as a missing gate command."""

from __future__ import annotations

import subprocess
from typing import TYPE_CHECKING

import pytest

from supervisor.core.config import WorkflowDef
from supervisor.core.errors import MergeConflictError
from supervisor.gates import problems as gate_problems
from supervisor.gates.run import GateResult
from supervisor.workflow import history
from supervisor.workspace.worktrees import Workspace

if TYPE_CHECKING:
    from pathlib import Path


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@localhost", *args],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


def commit(repo: Path, path: str, text: str, message: str) -> str:
    (repo / path).write_text(text)
    git(repo, "add", path)
    git(repo, "commit", "-qm", message)
    return git(repo, "rev-parse", "HEAD")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    git(tmp_path, "init", "-q", "-b", "main")
    commit(tmp_path, "a.txt", "one\n", "start")
    return tmp_path


DEFINITION = WorkflowDef.model_validate(
    {
        "initial_step": "implement",
        "steps": {
            "implement": {"role": "implementer", "next": "test"},
            "test": {"gate": "test", "next": "lint", "on_fail": "implement"},
            "lint": {"gate": "lint", "next": "commit", "on_fail": "implement"},
            "commit": {"action": "commit"},
        },
    }
)


def test_a_tree_needs_every_gate_of_the_workflow_recorded_for_that_exact_tree() -> None:
    ctx: dict[str, object] = {}
    ctx["gates_passed"] = history.record_gate_pass(ctx, "test", "tree-a")
    assert history.missing_gates(ctx, DEFINITION, "tree-a") == ["lint"]
    ctx["gates_passed"] = history.record_gate_pass(ctx, "lint", "tree-a")
    assert history.missing_gates(ctx, DEFINITION, "tree-a") == []
    assert history.missing_gates(ctx, DEFINITION, "tree-b") == ["test", "lint"]


def test_the_commit_message_lists_the_plan_items_gates_and_reviewers() -> None:
    ctx = {
        "plan": {"phases": [{"components": [{"id": "calc", "description": "fix multiply"}]}]},
        "gates_passed": {"t1": ["test", "lint"]},
        "reviewed": {"t1": ["reviewer"]},
    }
    message = history.commit_message("Fix multiply\nmore", 4, ctx, "t1")
    assert message.splitlines()[0] == "Fix multiply"
    assert "- calc: fix multiply" in message
    assert "Gates passed: test, lint" in message
    assert "Reviewed by: reviewer" in message
    assert "Supervisor-Workflow: 4" in message


def test_commit_tree_puts_only_the_tree_on_the_tip_never_the_attempts(repo: Path) -> None:
    tip = git(repo, "rev-parse", "HEAD")
    git(repo, "switch", "-qc", "work")
    commit(repo, "a.txt", "broken\n", "attempt 1 (failed its gate)")
    fixed = commit(repo, "a.txt", "two\n", "attempt 2")
    tree = git(repo, "rev-parse", f"{fixed}^{{tree}}")
    new = history.commit_tree(repo, tree, tip, "the task\n")
    assert git(repo, "rev-list", f"{tip}..{new}").split() == [new]
    assert git(repo, "show", f"{new}:a.txt") == "two"


def test_squash_and_rebase_land_on_a_base_branch_that_moved(repo: Path) -> None:
    start = git(repo, "rev-parse", "HEAD")
    git(repo, "switch", "-qc", "task")
    commit(repo, "b.txt", "b1\n", "task one")
    tip = commit(repo, "c.txt", "c1\n", "task two")
    git(repo, "switch", "-q", "main")
    moved = commit(repo, "d.txt", "d\n", "meanwhile on main")

    squashed = history.squashed(repo, moved, tip, "squashed\n")
    assert git(repo, "rev-list", "--parents", "-1", squashed).split()[1:] == [moved]
    assert sorted(git(repo, "ls-tree", "--name-only", squashed).split()) == [
        "a.txt",
        "b.txt",
        "c.txt",
        "d.txt",
    ]
    rebased = history.rebased(repo, moved, start, tip)
    assert git(repo, "log", "--format=%s", f"{moved}..{rebased}").splitlines() == [
        "task two",
        "task one",
    ]
    history.land(Workspace(repo), "main", rebased, moved)
    assert git(repo, "rev-parse", "main") == rebased
    assert (repo / "c.txt").read_text() == "c1\n"  # the checkout moved with it


def test_a_conflicting_squash_changes_nothing(repo: Path) -> None:
    git(repo, "switch", "-qc", "task")
    tip = commit(repo, "a.txt", "task\n", "task")
    git(repo, "switch", "-q", "main")
    moved = commit(repo, "a.txt", "main\n", "main")
    with pytest.raises(MergeConflictError, match=r"a\.txt"):
        history.squashed(repo, moved, tip, "x\n")
    assert git(repo, "rev-parse", "main") == moved


def test_single_component_tasks_squash_by_default_larger_ones_merge() -> None:
    one = {"plan": {"phases": [{"components": [{"id": "a"}]}]}}
    two = {"plan": {"phases": [{"components": [{"id": "a"}, {"id": "b"}]}]}}
    assert history.default_mode(one) == "squash"
    assert history.default_mode({}) == "squash"
    assert history.default_mode(two) == "merge"


@pytest.mark.parametrize(
    ("exit_code", "output", "missing"),
    [
        (2, "make: *** No rule to make target 'test'.  Stop.\n", "test"),
        (127, "sh: 1: pytest: not found\n", "pytest"),
        (127, "", "the command (exit 127)"),
        (1, "FAILED test_calc.py::test_multiply - assert 9 == 20\n", None),
        (2, "error: the name 'target' was not found in scope\n", None),
    ],
)
def test_only_a_command_that_does_not_exist_counts_as_a_missing_gate(
    exit_code: int, output: str, missing: str | None
) -> None:
    result = GateResult("test", "make test", False, exit_code, output, 0.1)
    assert gate_problems.missing_command(result) == missing
