"""The approval policy and budgets in the real engine (real git, real SQLite, the real claude
adapter's parsing; workers scripted by the stand-in sandbox), and the real CLI's `approve`,
`reject` and `status` on the state it leaves."""

from __future__ import annotations

import subprocess
import threading
import time
from typing import TYPE_CHECKING

import pytest
import test_engine_fast
from cli_support import supervisor
from test_engine_fast import Project, reviews, writes

from supervisor.core.errors import ApprovalRequired, StateError
from supervisor.guard.trust import trust
from supervisor.lifecycle import tasks
from supervisor.policy.budgets import BudgetExceeded
from supervisor.sandbox.standin import answer
from supervisor.views.monitor import to_approve

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

project = test_engine_fast.project  # the stand-in project fixture
warm_packer = test_engine_fast.warm_packer

IMPLEMENT_REVIEW_COMMIT = """implement
  steps:
    implement: {role: implementer, next: review}
    review: {role: reviewer, next: commit, on_reject: implement}
    commit: {action: commit}
"""


def cli(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return supervisor(*args, "--repo", str(repo))


def auth_change(project: Callable[..., Project], policy: str | None = None) -> Project:
    p = project(
        IMPLEMENT_REVIEW_COMMIT,
        None,
        ("ROLE: implementer", writes({"auth/login.py": "def login(user):\n    return False\n"})),
        ("ROLE: reviewer", reviews("APPROVED")),
    )
    if policy is not None:
        (p.root / ".supervisor" / "approval_policy.yaml").write_text(policy)
        trust(p.root)  # a repository policy counts once trusted
    return p


def test_a_candidate_touching_auth_waits_for_approval_with_its_level_and_reasons(
    project: Callable[..., Project],
) -> None:
    p = auth_change(project)

    with pytest.raises(
        ApprovalRequired,
        match=r"waits for approval of step 'review' \(risk high: sensitive paths: auth",
    ):
        p.start()

    wf = p.workflow()
    assert wf.status == "awaiting_approval"
    assert wf.current_step == "commit"  # nothing committed yet
    [assessed] = p.events("risk_assessed")
    assert assessed.status == "high"
    assert assessed.payload["action"] == "require_approval"
    assert assessed.payload["reasons"] == ["sensitive paths: auth (auth/login.py)"]
    shown = cli(p.root, "status", "1")
    assert "risk: high (needs one approval)" in shown.stdout
    assert "why: sensitive paths: auth (auth/login.py)" in shown.stdout

    screen = to_approve(p.root / ".supervisor" / "state.db", p.root, 1)  # the TUI's screen
    assert screen.about[:2] == [
        "risk: high (needs one approval)",
        "  why: sensitive paths: auth (auth/login.py)",
    ]

    approved = cli(p.root, "approve", "1", "--as", "lead@example.com")
    assert approved.returncode == 0, approved.stderr
    assert "risk: high" in approved.stdout
    assert "Approved." in approved.stdout
    [decided] = p.events("approval_decided")
    assert decided.payload["approvers"] == ["lead@example.com"]
    assert p.resume().status == "completed"
    assert p.on_branch("auth/login.py").startswith("def login")


def test_a_low_risk_candidate_is_committed_without_stopping_and_its_level_recorded(
    project: Callable[..., Project],
) -> None:
    p = project(
        IMPLEMENT_REVIEW_COMMIT,
        None,
        ("ROLE: implementer", writes({"answer.txt": "right\n"})),
        ("ROLE: reviewer", reviews("APPROVED")),
    )
    assert p.start().status == "completed"
    [assessed] = p.events("risk_assessed")
    assert (assessed.status, assessed.payload["action"]) == ("low", "auto_approve")
    assert p.events("approval_requested") == []


def test_a_review_that_approves_while_listing_a_security_concern_waits_for_a_person(
    project: Callable[..., Project],
) -> None:
    """The review is the step right before the commit: its event is not committed when the
    policy judges, and the policy still sees it."""
    said = {
        "status": "APPROVED",
        "summary": "fine",
        "issues": [],
        "security_concerns": ["the token is logged at debug level"],
    }
    p = project(
        IMPLEMENT_REVIEW_COMMIT,
        None,
        ("ROLE: implementer", writes({"answer.txt": "right\n"})),
        ("ROLE: reviewer", lambda call: answer(said)),
    )
    with pytest.raises(ApprovalRequired, match="risk high: reviewer security concerns"):
        p.start()
    [assessed] = p.events("risk_assessed")
    assert (assessed.status, assessed.payload["action"]) == ("high", "require_approval")
    assert assessed.payload["reasons"] == [
        "reviewer security concerns: reviewer: the token is logged at debug level"
    ]
    assert p.workflow().current_step == "commit"
    assert "answer.txt" not in p.git("ls-tree", "--name-only", p.workflow().task_branch)


def test_a_step_marked_human_approval_still_waits_whatever_the_policy_would_allow(
    project: Callable[..., Project],
) -> None:
    p = project(
        IMPLEMENT_REVIEW_COMMIT.replace("next: commit,", "next: commit, human_approval: true,"),
        None,
        ("ROLE: implementer", writes({"answer.txt": "right\n"})),
        ("ROLE: reviewer", reviews("APPROVED")),
    )
    (p.root / ".supervisor" / "approval_policy.yaml").write_text(
        "levels:\n  low: {action: notify_and_timeout, timeout_minutes: 0.001}\n"
    )
    trust(p.root)  # a repository policy counts once trusted
    with pytest.raises(ApprovalRequired):
        p.start()
    [assessed] = p.events("risk_assessed")
    assert (assessed.status, assessed.payload["action"]) == ("low", "require_approval")
    assert "step 'review' is marked human_approval" in assessed.payload["reasons"]


MULTI = """levels:
  high:
    when_any: [{sensitive: [auth]}]
    action: require_multi_approval
    approvers: 2
    approvers_from: [ana@example.com, ben@example.com]
"""


def test_a_multi_approval_needs_two_distinct_named_approvers_and_records_each(
    project: Callable[..., Project],
) -> None:
    p = auth_change(project, MULTI)
    with pytest.raises(ApprovalRequired):
        p.start()

    first = cli(p.root, "approve", "1", "--as", "ana@example.com")
    assert first.returncode == 0, first.stderr
    assert "Approval 1 of 2 recorded" in first.stdout
    assert p.workflow().status == "awaiting_approval"

    again = cli(p.root, "approve", "1", "--as", "ana@example.com")
    assert again.returncode != 0
    assert "ana@example.com already approved this" in again.stderr
    stranger = cli(p.root, "approve", "1", "--as", "eve@example.com")
    assert "eve@example.com is not one of the approvers" in stranger.stderr
    with pytest.raises(ApprovalRequired):
        p.resume()  # one approval of two does not let it go on

    second = cli(p.root, "approve", "1", "--as", "ben@example.com")
    assert second.returncode == 0, second.stderr
    votes = [e.payload["approver"] for e in p.events("approval_vote")]
    assert votes == ["ana@example.com", "ben@example.com"]
    assert p.resume().status == "completed"


def test_notify_and_timeout_goes_on_by_itself_when_nobody_rejects(
    project: Callable[..., Project],
) -> None:
    p = auth_change(
        project,
        "levels:\n  high:\n    action: notify_and_timeout\n    timeout_minutes: 0.01\n"
        "    when_any: [{sensitive: [auth]}]\n",
    )
    wf = p.start()

    assert wf.status == "completed"
    [decided] = p.events("approval_decided")
    assert (decided.status, decided.payload["approver"]) == ("approved", "timeout")


def test_a_rejection_within_the_timeout_sends_the_work_back_instead(
    project: Callable[..., Project],
) -> None:
    p = project(
        IMPLEMENT_REVIEW_COMMIT,
        None,
        ("ROLE: implementer", writes({"auth/login.py": "def login(user):\n    return False\n"})),
        ("ROLE: reviewer", reviews("APPROVED")),
        ("ROLE: reviewer", reviews("APPROVED")),
    )
    policy = p.root / ".supervisor" / "approval_policy.yaml"

    def timeout_after(minutes: float) -> None:
        policy.write_text(
            "levels:\n  high:\n    action: notify_and_timeout\n"
            f"    timeout_minutes: {minutes}\n    when_any: [{{sensitive: [auth]}}]\n"
        )
        trust(p.root)  # a repository policy counts once trusted

    # The first round waits ten minutes: the person decides within it however busy the machine
    # is (with 3 s, a loaded machine let the timeout approve first). Before rejecting, they
    # shorten the timeout, so that the second round goes on by itself at once.
    timeout_after(10)
    rejected = threading.Event()

    def reject_while_waiting() -> None:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and not rejected.is_set():
            found = tasks.workflows(p.root)
            if found and found[0].status == "awaiting_approval":
                timeout_after(0.01)
                tasks.decide(1, p.root, approve=False, reason="log the login attempts")
                rejected.set()
            time.sleep(0.1)

    person = threading.Thread(target=reject_while_waiting)
    person.start()
    wf = p.start()
    person.join()

    assert rejected.is_set()
    assert wf.status == "completed"
    decided = [(e.status, e.payload.get("approver")) for e in p.events("approval_decided")]
    assert decided[0][0] == "rejected"
    assert decided[1] == ("approved", "timeout")  # the second round went on by itself
    assert "log the login attempts" in p.script.prompts("reviewer")[1]


def test_a_bad_policy_file_stops_start_task_before_anything_is_created(
    project: Callable[..., Project],
) -> None:
    p = auth_change(project, "levels:\n  urgent: {action: require_approval}\n")

    started = cli(p.root, "start-task", "anything", "--yes")

    assert started.returncode == 2
    assert "unknown level 'urgent'" in started.stderr
    assert "The levels are critical, high, medium, low" in started.stderr
    with tasks.reading(p.root) as store:
        assert store.workflows() == []


# -- budgets -------------------------------------------------------------------------------


def budgeted(project: Callable[..., Project], budget: str) -> Project:
    p = project(
        IMPLEMENT_REVIEW_COMMIT,
        None,
        ("ROLE: implementer", writes({"answer.txt": "right\n"})),
        ("ROLE: reviewer", reviews("APPROVED")),
    )
    with (p.root / ".supervisor" / "config.yaml").open("a") as config:
        config.write(budget)
    return p


def test_a_task_past_its_token_budget_pauses_until_approve_extend_raises_it(
    project: Callable[..., Project],
) -> None:
    # Each stand-in run reports 120 tokens and $0.001: the budget is spent after two steps.
    p = budgeted(project, "budgets:\n  task: {tokens: 200, usd: 0.5}\n")

    with pytest.raises(BudgetExceeded, match=r"spent \$0\.002 of \$0\.50, 240 of 200 tokens"):
        p.start()

    wf = p.workflow()
    assert (wf.status, wf.current_step) == ("budget_exceeded", "commit")
    [paused] = p.events("budget_exceeded")
    assert paused.payload["over"] == ["tokens"]
    review_argv = p.sandbox.runs[-1].argv
    assert review_argv[review_argv.index("--max-budget-usd") + 1] == "0.50"
    shown = cli(p.root, "status", "1")
    assert "task budget: $0.002 of $0.50, 240 of 200 tokens" in shown.stdout
    assert "--extend" in shown.stdout

    with pytest.raises(BudgetExceeded):
        p.resume()  # no extension: still paused
    refused = cli(p.root, "reject", "1", "--reason", "no")
    assert "waits on its budget" in refused.stderr
    extended = cli(p.root, "approve", "1", "--extend-tokens", "1000")
    assert extended.returncode == 0, extended.stderr

    assert p.resume().status == "completed"
    assert p.on_branch("answer.txt") == "right\n"
    metrics = cli(p.root, "metrics")
    assert "workflow 1 (completed): task budget: $0.002 of $0.50, 240 of 1200 tokens" in (
        metrics.stdout
    )


def test_a_step_budget_in_dollars_pauses_a_step_that_keeps_retrying(
    project: Callable[..., Project],
) -> None:
    p = project(
        IMPLEMENT_REVIEW_COMMIT,
        None,
        ("ROLE: implementer", writes({"answer.txt": "wrong\n"})),
        ("ROLE: reviewer", reviews("CHANGES_REQUESTED", "still wrong")),
        ("ROLE: implementer", writes({"answer.txt": "right\n"})),
        ("ROLE: reviewer", reviews("APPROVED")),
    )
    with (p.root / ".supervisor" / "config.yaml").open("a") as config:
        config.write("budgets:\n  step: {usd: 0.001}\n")

    with pytest.raises(BudgetExceeded, match="step 'implement' spent"):
        p.start()
    assert p.workflow().current_step == "implement"

    tasks.decide(1, p.root, approve=True, extend_usd=1.0)
    # The extension is the paused step's: the reviewer, at its own limit, pauses next.
    with pytest.raises(BudgetExceeded, match="step 'review' spent"):
        p.resume()
    tasks.decide(1, p.root, approve=True, extend_usd=1.0)
    assert p.resume().status == "completed"


def test_extend_refuses_a_workflow_that_is_not_paused_on_its_budget(
    project: Callable[..., Project],
) -> None:
    p = auth_change(project)
    with pytest.raises(ApprovalRequired):
        p.start()
    with pytest.raises(StateError, match="not paused on its budget"):
        tasks.decide(1, p.root, approve=True, extend_usd=2.0)
    assert p.workflow().status == "awaiting_approval"

    rejected = cli(p.root, "reject", "1", "--reason", "no tokens in auth", "--as", "a@b.c")
    assert rejected.returncode == 0, rejected.stderr
    assert "risk: high (needs one approval)" in rejected.stdout
    [decided] = p.events("approval_decided")
    assert (decided.status, decided.payload["approver"]) == ("rejected", "a@b.c")
