"""The workflow page's "Sync with the pull request": shown for a task that has a pull request,
a same-origin POST with the session's CSRF token that starts `supervisor pr sync <id>` detached
(supervisor/lifecycle/pr_sync.py decides everything), and the forge's text escaped on the
page."""

from __future__ import annotations

import subprocess
from typing import TYPE_CHECKING
from urllib.parse import unquote_plus

import pytest
from web_support import Served, served

from supervisor.core.errors import StateError
from supervisor.lifecycle import detached
from supervisor.lifecycle.detached import Detached
from supervisor.state.store import EventSpec, Store

if TYPE_CHECKING:
    from pathlib import Path

DONE = 1
HOSTILE_URL = "https://github.example/acme/widgets/pull/1<script>alert(1)</script>"


def with_pull_request(root: Path, waiting: int) -> None:
    with Store(root / ".supervisor" / "state.db") as store:
        payload = {"number": 1, "url": HOSTILE_URL, "sha": "a" * 40, "remote": "origin"}
        store.add_event(DONE, EventSpec("pull_request", status="opened", payload=payload))


def syncing(s: Served) -> list[int]:
    started: list[int] = []

    def sync(wf_id: int, repo: Path) -> Detached:
        assert repo == s.root.resolve()
        started.append(wf_id)
        return Detached(wf_id, subprocess.Popen(["true"]), s.root / ".supervisor" / "sync.log")

    s.dashboard.sync = sync
    return started


def test_a_task_with_a_pull_request_offers_a_sync_that_needs_the_csrf_token(
    tmp_path: Path,
) -> None:
    s = served(tmp_path, change=with_pull_request)
    started = syncing(s)
    csrf = s.sign_in()

    page = s.client.get(f"/r/{s.key}/w/{DONE}").text
    assert 'id="sync"' in page and "Sync with the pull request" in page
    assert "<script>alert(1)</script>" not in page and "&lt;script&gt;" in page
    assert 'id="sync"' not in s.client.get(f"/r/{s.key}/w/{s.waiting}").text  # none opened

    forged = s.post(f"/r/{s.key}/w/{DONE}/sync", {"csrf": "not-the-token"})
    assert forged.status_code == 403  # type: ignore[attr-defined]
    elsewhere = s.post(f"/r/{s.key}/w/{DONE}/sync", {"csrf": csrf}, origin="http://evil.example")
    assert elsewhere.status_code == 403  # type: ignore[attr-defined]
    assert started == []

    answer = s.post(f"/r/{s.key}/w/{DONE}/sync", {"csrf": csrf})
    assert answer.status_code == 303  # type: ignore[attr-defined]
    said = unquote_plus(answer.headers["location"])  # type: ignore[attr-defined]
    assert f"`supervisor pr sync {DONE}` runs" in said
    assert started == [DONE]


def test_the_detached_sync_refuses_a_task_without_a_pull_request_before_it_starts(
    tmp_path: Path,
) -> None:
    s = served(tmp_path)
    with pytest.raises(StateError, match="no pull request"):
        detached.sync(DONE, s.root)
    assert not (s.root / ".supervisor" / f"pr-sync-{DONE}.log").exists()
