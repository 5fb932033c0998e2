"""Counts said as a person says them (issue 59): `1 commit`, `3 commits`, never `1 commit(s)`;
and a limit counted the same way as what it limits (`failed 3 times (limit 2)` compared three
attempts with two retries). Pure functions and the decisions that print them: no process."""

from __future__ import annotations

from test_decide import moved

from supervisor.core.errors import StepFailedError
from supervisor.core.plural import counted, plural
from supervisor.policy.approval_policy import Facts, FileChange, evaluate, parse
from supervisor.policy.approvals import plan_lines
from supervisor.workflow.steps.base import Outcome


def test_a_count_agrees_with_its_noun() -> None:
    assert [counted(n, "commit") for n in (0, 1, 2)] == ["0 commits", "1 commit", "2 commits"]
    assert counted(1, "thing is", "things are") == "1 thing is"
    assert counted(4, "thing is", "things are") == "4 things are"
    assert plural(1, "approver") == "approver" and plural(2, "approver") == "approvers"


def test_a_step_out_of_retries_counts_its_attempts_against_a_limit_of_attempts() -> None:
    """max_retries 2 is 3 attempts: the first and 2 retries; all three failed."""
    move = moved(
        "test", Outcome("failed", feedback="still failing"), {"attempts": {"implement": 2}}
    )
    assert isinstance(move.error, StepFailedError)
    assert "failed 3 times, its limit of 3 attempts (the first and 2 retries)" in (
        move.error.message
    )
    assert "(limit 2)" not in move.error.message


def test_the_approval_policy_counts_in_words() -> None:
    policy = parse(
        {"levels": {"high": {"action": "require_approval", "when_any": [
            {"files_over": 0}, {"lines_over": 0}, {"deleted_files_over": 0}]}}}
    )  # fmt: skip
    gone = Facts(files=[FileChange("old.py", 0, 1, status="D")])
    assert evaluate(policy, gone).reasons == [
        "1 file changed (over 0)",
        "1 line changed (over 0)",
        "1 file deleted: old.py",
    ]


def test_a_plan_waiting_for_approval_counts_its_components() -> None:
    assert plan_lines({"status": "COMPLETE", "estimated_components": 1})[0] == (
        "plan: COMPLETE, 1 component"
    )
    assert plan_lines({"status": "COMPLETE", "estimated_components": 3})[0] == (
        "plan: COMPLETE, 3 components"
    )
