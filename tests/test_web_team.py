"""The dashboard in team mode: the board is every task of the shared PostgreSQL state, each person
signs in with a personal token (stored hashed, revocable), and an approval made in the browser
is recorded under that person's email. Real PostgreSQL (tests/pg_support.py)."""

from __future__ import annotations

import subprocess
from typing import TYPE_CHECKING
from urllib.parse import unquote_plus

import pytest
from starlette.testclient import TestClient
from test_tui import make_repo
from web_support import ORIGIN

from supervisor.lifecycle.detached import Detached
from supervisor.lifecycle.web_tokens import create_token, revoke_token, tokens
from supervisor.state.store import Store
from supervisor.web.app import create_app
from supervisor.web.board import key_of
from supervisor.web.serve import Options, dashboard_for

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.xdist_group("postgres")


def test_each_person_signs_in_with_their_token_and_approves_as_themselves(
    shared_state: str, tmp_path: Path
) -> None:
    root, waiting = make_repo(tmp_path / "repo")
    assert not (root / ".supervisor" / "state.db").exists()  # the state is the shared one
    dashboard = dashboard_for(Options(repo=root), 8765)
    assert dashboard.team
    resumed: list[int] = []

    def resume(wf_id: int, repo: Path) -> Detached:
        resumed.append(wf_id)
        return Detached(wf_id, subprocess.Popen(["true"]), tmp_path / "resume.log")

    dashboard.resume = resume
    client = TestClient(create_app(dashboard), base_url=ORIGIN)
    alice = create_token(root, "alice@example.com")
    refused = client.post("/login", data={"token": "svw_" + "x" * 43}, headers={"origin": ORIGIN})
    assert refused.status_code == 403

    signed = client.post("/login", data={"token": alice}, headers={"origin": ORIGIN})
    assert signed.status_code == 200
    assert "alice@example.com" in signed.text  # who the header says is signed in
    assert "check passwords in login" in signed.text  # the shared state's tasks on the board
    session = dashboard.sessions.of(client.cookies.get("supervisor_session"))
    assert session is not None and session.who == "alice@example.com"

    decided = client.post(
        f"/r/{key_of(root.resolve())}/w/{waiting}/decide",
        data={"csrf": session.csrf, "action": "approve"},
        headers={"origin": ORIGIN},
        follow_redirects=False,
    )
    assert "Approved" in unquote_plus(decided.headers["location"])
    with Store(root / ".supervisor" / "state.db") as store:
        [event] = store.events(waiting, of_type="approval_decided")
    assert event.payload["approvers"] == ["alice@example.com"]
    assert resumed == [waiting]

    [made] = tokens(root)
    revoke_token(root, made.id)
    client.cookies.clear()
    again = client.post("/login", data={"token": alice}, headers={"origin": ORIGIN})
    assert again.status_code == 403
