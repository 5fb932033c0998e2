"""The base's tests as the specification, as fast specs on real git (issue 49): which changes to a
candidate count as changes to the base's tests, the tree the base oracle runs on (the candidate's
code, the base's tests), the policy's `tests_changed` and `test_tamper_signals` conditions, the
engine's stop for a worker's SPEC_CONFLICT, and what the worker is told of the person's decision.
The runs on real parts are tests/test_attacks_test_integrity.py (unittest), test_real_projects
(pytest), test_attacks_gates_ts (vitest) and test_monorepo_go_e2e (go test)."""

from __future__ import annotations

import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from supervisor.core.config import FailoverSettings, StepDef, WorkflowDef
from supervisor.core.errors import SpecConflictError
from supervisor.gates import base_tests
from supervisor.policy import approval_policy, risk
from supervisor.policy.approval_policy import Facts, evaluate
from supervisor.state.records import Workflow
from supervisor.state.store import EventSpec
from supervisor.workflow.decide import Facts as DecideFacts
from supervisor.workflow.decide import decide
from supervisor.workflow.resuming import spec_decision
from supervisor.workflow.steps.base import Outcome
from supervisor.workspace import treedata

BASE_FILES = {
    "calc.py": "def add(a, b):\n    raise NotImplementedError\n",
    "test_calc.py": "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n",
    "tests/fixtures/expected.txt": "5\n",
    "conftest.py": "",
    "README.md": "# calc\n",
}


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


def commit(repo: Path, files: dict[str, str | None], message: str) -> str:
    for path, text in files.items():
        target = repo / path
        if text is None:
            target.unlink()
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", message)
    return git(repo, "rev-parse", "HEAD")


@pytest.fixture
def repo(tmp_path: Path) -> tuple[Path, str]:
    path = tmp_path / "repo"
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    return path, commit(path, dict(BASE_FILES), "base")


def files_at(repo: Path, rev: str) -> dict[str, str]:
    listed = git(repo, "ls-tree", "-r", "--name-only", rev).splitlines()
    show = ["git", "-C", str(repo), "show"]
    return {
        p: subprocess.run([*show, f"{rev}:{p}"], capture_output=True, text=True).stdout
        for p in listed
    }


def test_code_and_new_tests_change_nothing_of_the_specification(repo: tuple[Path, str]) -> None:
    path, base = repo
    head = commit(
        path,
        {"calc.py": "def add(a, b):\n    return a + b\n", "test_more.py": "def test_x(): pass\n"},
        "fix",
    )

    assert not base_tests.changes(path / ".git", base, head)


def test_a_modified_deleted_or_fixture_test_path_is_a_change_of_the_specification(
    repo: tuple[Path, str],
) -> None:
    path, base = repo
    head = commit(
        path,
        {
            "test_calc.py": BASE_FILES["test_calc.py"].replace("== 5", "== -1"),
            "tests/fixtures/expected.txt": "-1\n",
            "conftest.py": None,
        },
        "cheat",
    )

    found = base_tests.changes(path / ".git", base, head)

    assert found.describe() == [
        "conftest.py (deleted)",
        "test_calc.py (modified)",
        "tests/fixtures/expected.txt (modified)",
    ]
    assert sorted(found.modified) == ["test_calc.py", "tests/fixtures/expected.txt"]


def test_the_oracle_tree_holds_the_candidates_code_and_exactly_the_bases_tests(
    repo: tuple[Path, str],
) -> None:
    path, base = repo
    fixed = "def add(a, b):\n    return a - b\n"
    head = commit(
        path,
        {
            "calc.py": fixed,
            "test_calc.py": BASE_FILES["test_calc.py"].replace("== 5", "== -1"),
            "test_patch.py": "import unittest\nunittest.TestCase.assertEqual = print\n",
            "conftest.py": None,
        },
        "cheat",
    )

    oracle = base_tests.restored(path / ".git", base, head)

    assert git(path, "rev-parse", f"{oracle}^") == head  # a child of the candidate, off-branch
    assert files_at(path, oracle) == {**BASE_FILES, "calc.py": fixed}
    assert git(path, "rev-parse", "main") == head  # no branch moved


def test_a_candidate_that_changed_no_test_gets_its_own_tree_back(repo: tuple[Path, str]) -> None:
    path, base = repo
    head = commit(path, {"calc.py": "def add(a, b):\n    return a + b\n"}, "fix")

    oracle = base_tests.restored(path / ".git", base, head)

    assert treedata.list_tree(path / ".git", f"{oracle}^{{tree}}") == treedata.list_tree(
        path / ".git", f"{head}^{{tree}}"
    )


def test_a_file_in_the_way_of_the_bases_tests_gives_way_to_them(repo: tuple[Path, str]) -> None:
    """A worker that turned `tests/` into a file (or a test file into a directory) cannot make
    the oracle's tree unbuildable: the base's tests win the path."""
    path, base = repo
    commit(path, {"tests/fixtures/expected.txt": None}, "remove the folder")
    (path / "tests" / "fixtures").rmdir()
    (path / "tests").rmdir()
    head = commit(path, {"tests": "not a folder\n"}, "a file named tests")

    oracle = base_tests.restored(path / ".git", base, head)

    assert files_at(path, oracle) == BASE_FILES


@pytest.fixture
def policy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> approval_policy.Policy:
    monkeypatch.setenv("SUPERVISOR_USER_DIR", str(tmp_path / "user"))
    return approval_policy.load(None)


def test_base_tests_failing_on_the_candidate_need_a_person_in_the_shipped_policy(
    policy: approval_policy.Policy,
) -> None:
    decision = evaluate(policy, Facts(spec_changes=["test_calc.py (modified)"]))

    assert (decision.level, decision.action) == ("high", "require_approval")
    assert decision.reasons == [
        "existing tests changed and the base's tests fail on this code: test_calc.py (modified)"
    ]
    said = approval_policy.stop_conditions(policy)
    assert "it changes existing tests that its code no longer passes" in said


def test_tamper_signals_alone_raise_the_risk_without_a_stop(
    policy: approval_policy.Policy,
) -> None:
    decision = evaluate(policy, Facts(tamper_signals=["test_calc.py: test_add removed"]))

    assert (decision.level, decision.action) == ("medium", "auto_approve")


def test_only_a_verdict_on_the_very_tree_counts(repo: tuple[Path, str]) -> None:
    verdict = {
        "tree": "t1",
        "base_tests": "failed",
        "changed": ["test_calc.py (modified)"],
        "signals": ["test_calc.py: test_add: 1 assertion, now 0"],
    }
    judged, other = Facts(), Facts()

    assert risk.spec_facts(judged, verdict, "t1")
    assert not risk.spec_facts(other, verdict, "t2")

    assert judged.spec_changes == ["test_calc.py (modified)"]
    assert judged.tamper_signals == ["test_calc.py: test_add: 1 assertion, now 0"]
    assert other.spec_changes == [] and other.tamper_signals == []


def test_a_changed_test_no_gate_judged_is_a_change_of_the_specification_all_the_same(
    repo: tuple[Path, str],
) -> None:
    path, base = repo
    head = commit(path, {"test_calc.py": "def test_add():\n    pass\n"}, "unjudged")
    facts = Facts()

    risk.unjudged_spec(facts, path / ".git", base, head)

    assert facts.spec_changes == ["test_calc.py (modified) (the base's tests were not run on it)"]


def test_verdicts_of_a_fan_outs_components_join_into_one_about_the_merged_tree() -> None:
    passed = {
        "tree": "a",
        "gate": "test",
        "command": "make test",
        "changed": ["a_test.py (modified)"],
        "base_tests": "passed",
        "oracle": "o1",
    }
    failed = {**passed, "tree": "b", "changed": ["b_test.py (modified)"], "base_tests": "failed"}
    failed |= {"failing": "1 failed: test_b", "oracle": "o2"}

    joined = base_tests.joined([passed, None, failed], "merged")

    assert joined is not None
    assert joined["tree"] == "merged" and joined["base_tests"] == "failed"
    assert joined["changed"] == ["a_test.py (modified)", "b_test.py (modified)"]
    assert (joined["failing"], joined["oracle"]) == ("1 failed: test_b", "o2")
    assert base_tests.joined([None, None], "merged") is None


FLOW = WorkflowDef(
    initial_step="implement",
    steps={
        "implement": StepDef(role="implementer", next="test", max_retries=2),
        "test": StepDef(gate="test", next="commit", on_fail="implement"),
        "commit": StepDef(action="commit"),
    },
)


def test_a_workers_spec_conflict_waits_for_a_person_and_spends_no_retry() -> None:
    stamp = datetime.now(UTC)
    wf = Workflow(
        1, "t", "running", "implement", "claude", "main", "a" * 40, "ai/1-t",
        FLOW.model_dump(), {}, None, stamp, stamp,
    )  # fmt: skip
    conflict = SpecConflictError(
        "contradicts", "decide", step="implement/calc", reason="5 vs 6", tests=["test_add"]
    )

    def judge(judged: dict[str, Any], own: list[EventSpec]) -> tuple[bool, EventSpec]:
        raise AssertionError("nothing is committed: the policy is not asked")

    facts = DecideFacts(0.0, 6, 3, "default", FailoverSettings(), [], judge)
    move = decide(
        wf, FLOW, "implement", FLOW.steps["implement"], Outcome("failed", escalate=conflict), facts
    )

    assert (move.next_step, move.status, move.request_approval) == (
        "implement",
        "awaiting_approval",
        True,
    )
    assert move.error is None
    assert move.state.attempts == {} and move.state.approval_step == "implement"
    assert move.state.spec_conflict == {
        "step": "implement/calc",
        "reason": "5 vs 6",
        "tests": ["test_add"],
    }
    asked = [e for e in move.events if e.type == "approval_requested"]
    assert asked and asked[0].payload == move.state.spec_conflict


def test_the_worker_is_told_what_the_person_decided() -> None:
    conflict = {"step": "implement", "reason": "5 vs 6", "tests": ["test_calc.py::test_add"]}

    approved = spec_decision(conflict, "approved", None)
    rejected = spec_decision(conflict, "rejected", "the test is right: 2 + 3 is 5")

    assert "approved changing them" in approved and "test_calc.py::test_add" in approved
    assert "the test is right: 2 + 3 is 5" in rejected and "without changing them" in rejected


LIB_RS = """pub fn add(a: i32, b: i32) -> i32 {
    unimplemented!()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adds() {
        assert_eq!(add(2, 3), 5);
    }
}
"""
FIXED_RS = LIB_RS.replace("unimplemented!()", "a + b")
BENT_RS = (
    LIB_RS.replace("unimplemented!()", "a - b")
    .replace("== 5", "== -1")
    .replace("add(2, 3), 5", "add(2, 3), -1")
)
MORE_RS = FIXED_RS.replace(
    "    }\n}\n",
    "    }\n\n    #[test]\n    fn adds_zero() {\n        assert_eq!(add(0, 4), 4);\n    }\n}\n",
)


@pytest.fixture
def crate(tmp_path: Path) -> tuple[Path, str]:
    path = tmp_path / "crate"
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    return path, commit(path, {"src/lib.rs": LIB_RS, "Cargo.toml": "[package]\n"}, "base")


def test_a_bent_rust_unit_test_module_is_a_change_of_the_specification(
    crate: tuple[Path, str],
) -> None:
    path, base = crate
    head = commit(path, {"src/lib.rs": BENT_RS}, "bend")

    found = base_tests.changes(path / ".git", base, head)
    oracle = base_tests.restored(path / ".git", base, head)

    assert found.describe() == ["src/lib.rs (test module modified)"]
    spliced = files_at(path, oracle)["src/lib.rs"]
    assert "a - b" in spliced  # the candidate's code
    assert "assert_eq!(add(2, 3), 5);" in spliced and "-1" not in spliced  # the base's test


def test_a_fix_and_a_new_unit_test_beside_the_old_ones_change_nothing(
    crate: tuple[Path, str],
) -> None:
    path, base = crate
    head = commit(path, {"src/lib.rs": MORE_RS}, "fix, and one more test")

    assert not base_tests.changes(path / ".git", base, head)
