"""The approval panel decides through the command line's code (task_state.decide) with the
signed-in person as the approver, then starts the task's resume; a policy that needs two people
counts each signed-in person once."""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import unquote_plus

from web_support import Served, served

from supervisor.lifecycle.web_tokens import create_token, identify
from supervisor.state.store import Store

if TYPE_CHECKING:
    from pathlib import Path


def _db(s: Served) -> Path:
    return s.root / ".supervisor" / "state.db"


def _decide(s: Served, csrf: str, **form: str) -> str:
    answer = s.post(f"/r/{s.key}/w/{s.waiting}/decide", {"csrf": csrf, **form})
    assert answer.status_code == 303, answer.text  # type: ignore[attr-defined]
    return unquote_plus(answer.headers["location"])  # type: ignore[attr-defined]


def test_approving_in_the_browser_is_the_approve_command_then_a_resume(tmp_path: Path) -> None:
    s = served(tmp_path)
    csrf = s.sign_in()
    said = _decide(s, csrf, action="approve")
    assert "Approved; `supervisor resume 2` runs" in said
    assert s.resumed == [s.waiting]
    with Store(_db(s)) as store:
        approval = store.latest_approval(s.waiting)
        [decided] = store.events(s.waiting, of_type="approval_decided")
    assert approval is not None and approval.status == "approved"
    assert decided.payload["approvers"]  # git's user for the local dashboard's one person
    page = s.client.get(f"/r/{s.key}/w/{s.waiting}").text
    assert "Decided: approved" in page
    assert 'id="approve"' not in page  # not offered twice


def test_a_rejection_needs_a_reason_which_the_next_attempt_reads(tmp_path: Path) -> None:
    s = served(tmp_path)
    csrf = s.sign_in()
    bare = s.post(f"/r/{s.key}/w/{s.waiting}/decide", {"csrf": csrf, "action": "reject"})
    assert bare.status_code == 400  # type: ignore[attr-defined]
    assert s.resumed == []
    said = _decide(s, csrf, action="reject", reason="hash the password with argon2")
    assert "Rejected" in said
    with Store(_db(s)) as store:
        approval = store.latest_approval(s.waiting)
    assert approval is not None
    assert (approval.status, approval.reason) == ("rejected", "hash the password with argon2")
    assert s.resumed == [s.waiting]


def test_two_people_are_needed_and_one_person_counts_once(tmp_path: Path) -> None:
    def two_needed(root: Path, wf_id: int) -> None:
        with Store(root / ".supervisor" / "state.db") as store:
            wf = store.workflow(wf_id)
            risk = {
                "step": "implement",
                "action": "require_multi_approval",
                "approvers": 2,
                "level": "critical",
            }
            store.update_workflow(
                wf_id,
                status=wf.status,
                current_step=wf.current_step,
                context={**wf.context, "risk": risk},
            )

    s = served(tmp_path, change=two_needed, personal=lambda t: identify(tmp_path / "repo", t))
    alice = create_token(s.root, "alice@example.com")
    bob = create_token(s.root, "bob@example.com")

    def as_person(token: str) -> str:
        s.client.cookies.clear()
        s.client.post("/login", data={"token": token}, headers={"origin": "http://127.0.0.1:8765"})
        session = s.dashboard.sessions.of(s.client.cookies.get("supervisor_session"))
        assert session is not None
        return session.csrf

    said = _decide(s, as_person(alice), action="approve")
    assert "needs more approvers" in said
    assert s.resumed == []
    again = _decide(s, as_person(alice), action="approve")
    assert "alice@example.com already approved this" in again
    assert s.resumed == []
    _decide(s, as_person(bob), action="approve")
    with Store(_db(s)) as store:
        [decided] = store.events(s.waiting, of_type="approval_decided")
    assert sorted(decided.payload["approvers"]) == ["alice@example.com", "bob@example.com"]
    assert s.resumed == [s.waiting]


def test_a_budget_is_raised_from_the_panel_and_the_task_resumed(tmp_path: Path) -> None:
    def over_budget(root: Path, wf_id: int) -> None:
        with Store(root / ".supervisor" / "state.db") as store:
            wf = store.workflow(wf_id)
            store.update_workflow(
                wf_id, status="budget_exceeded", current_step="implement", context=wf.context
            )

    s = served(tmp_path, change=over_budget)
    csrf = s.sign_in()
    page = s.client.get(f"/r/{s.key}/w/{s.waiting}").text
    assert 'id="extend"' in page and 'id="approve"' not in page
    refused = s.post(
        f"/r/{s.key}/w/{s.waiting}/decide", {"csrf": csrf, "action": "extend", "usd": "-5"}
    )
    assert refused.status_code == 400  # type: ignore[attr-defined]
    said = _decide(s, csrf, action="extend", usd="2.50")
    assert "Budget raised" in said
    with Store(_db(s)) as store:
        [raised] = store.events(s.waiting, of_type="budget_extended")
    assert raised.payload["usd"] == 2.5
    assert s.resumed == [s.waiting]


def test_an_unknown_repository_or_workflow_is_not_found(tmp_path: Path) -> None:
    s = served(tmp_path)
    csrf = s.sign_in()
    assert s.client.get("/r/000000000000/w/2").status_code == 404
    assert s.client.get(f"/r/{s.key}/w/99").status_code == 404
    gone = s.post("/r/000000000000/w/2/decide", {"csrf": csrf, "action": "approve"})
    assert gone.status_code == 404  # type: ignore[attr-defined]


def test_a_budget_stop_after_an_earlier_approval_still_offers_the_raise(tmp_path: Path) -> None:
    """The approval decided earlier (a step before) is history: the budget it now waits on is a
    new decision, offered as one (the panel once read the old approval as this stop's)."""

    def approved_then_over_budget(root: Path, wf_id: int) -> None:
        with Store(root / ".supervisor" / "state.db") as store:
            approval = store.latest_approval(wf_id)
            assert approval is not None
            store.decide_approval(approval.id, "approved", None, approver="lead@example.com")
            wf = store.workflow(wf_id)
            store.update_workflow(wf_id, status="budget_exceeded", current_step="implement",
                                  context=wf.context)  # fmt: skip

    s = served(tmp_path, change=approved_then_over_budget)
    s.sign_in()
    page = s.client.get(f"/r/{s.key}/w/{s.waiting}").text
    assert 'id="extend"' in page
    assert "Decided:" not in page
