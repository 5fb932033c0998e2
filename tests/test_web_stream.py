"""Live pages: a workflow's events arrive over server-sent events with the log's sequence number
as their id, so a browser that reconnects with `Last-Event-ID` loses none and sees none twice;
the board's stream sends its rows again when they change. Served by real uvicorn on loopback."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from test_tui import make_repo
from web_support import cookie_for, live, request, sse

from supervisor.state.store import EventSpec, Store
from supervisor.web.board import Board, key_of
from supervisor.web.dashboard import Dashboard
from supervisor.web.guard import Bound
from supervisor.web.sessions import Sessions

if TYPE_CHECKING:
    from collections.abc import Iterator
    from contextlib import AbstractContextManager
    from pathlib import Path


def _served(root: Path) -> AbstractContextManager[tuple[Dashboard, str]]:
    return live(
        lambda port: Dashboard(Bound("127.0.0.1", port, False), Sessions(), Board(fixed=[root]))
    )


def _add(root: Path, wf_id: int, count: int, start: int) -> None:
    with Store(root / ".supervisor" / "state.db") as store:
        for n in range(start, start + count):
            store.add_event(
                wf_id,
                EventSpec("comment", step="implement", payload={"n": n, "text": f"<b>{n}</b>"}),
            )


def _events(stream: Iterator[dict[str, str]], count: int) -> list[dict[str, str]]:
    got = []
    for message in stream:
        if message.get("event") == "event":
            got.append(message)
            if len(got) == count:
                return got
    raise AssertionError(f"the stream ended after {len(got)} of {count} events")


def test_a_reconnecting_browser_gets_every_later_event_once(tmp_path: Path) -> None:
    root, wf_id = make_repo(tmp_path / "repo")
    with Store(root / ".supervisor" / "state.db") as store:
        before = [e.id for e in store.events(wf_id)]
    _add(root, wf_id, 5, 0)
    with _served(root) as (dashboard, origin):
        cookie = cookie_for(origin, dashboard.sessions.login_token)
        path = f"/r/{key_of(root.resolve())}/w/{wf_id}/stream?after={before[-1]}"
        first = request(origin, "GET", path, {"cookie": cookie})
        assert first.getheader("content-type", "").startswith("text/event-stream")
        seen = _events(sse(first), 3)
        first.close()  # the laptop sleeps
        _add(root, wf_id, 4, 5)  # the task goes on meanwhile
        again = request(origin, "GET", path, {"cookie": cookie, "last-event-id": seen[-1]["id"]})
        seen += _events(sse(again), 6)
        again.close()
    with Store(root / ".supervisor" / "state.db") as store:
        written = [e.id for e in store.events(wf_id) if e.id > before[-1]]
    assert [int(m["id"]) for m in seen] == written  # all of them, in order, none twice
    shown = [json.loads(m["data"]) for m in seen]
    assert [row["id"] for row in shown] == written
    assert shown[0]["cells"][2] == "comment"
    assert '"<b>0</b>"' in shown[0]["cells"][-1]  # data, set as text by the page's script


def test_the_status_follows_the_workflow(tmp_path: Path) -> None:
    root, wf_id = make_repo(tmp_path / "repo")
    with _served(root) as (dashboard, origin):
        cookie = cookie_for(origin, dashboard.sessions.login_token)
        answer = request(
            origin,
            "GET",
            f"/r/{key_of(root.resolve())}/w/{wf_id}/stream?after=999",
            {"cookie": cookie},
        )
        stream = sse(answer)
        first = next(m for m in stream if m.get("event") == "status")
        assert json.loads(first["data"])["status"] == "awaiting_approval"
        with Store(root / ".supervisor" / "state.db") as store:
            store.set_status(wf_id, "failed")
        _add(root, wf_id, 1, 0)
        later = next(m for m in stream if m.get("event") == "status")
        assert json.loads(later["data"])["status"] == "failed"
        answer.close()


def test_the_board_stream_sends_a_new_task_as_it_appears(tmp_path: Path) -> None:
    root, _ = make_repo(tmp_path / "repo")
    with _served(root) as (dashboard, origin):
        cookie = cookie_for(origin, dashboard.sessions.login_token)
        answer = request(origin, "GET", "/stream/board", {"cookie": cookie})
        stream = sse(answer)
        rows = json.loads(next(stream)["data"])
        assert [r["id"] for r in rows] == [2, 1]
        with Store(root / ".supervisor" / "state.db") as store:
            store.create_workflow(
                description="<script>x</script> a third",
                cli="codex",
                base_branch="main",
                base_sha="0" * 40,
                branch_for_id=lambda i: f"ai/{i}-third",
                definition={},
                first_step="plan",
            )
        rows = json.loads(next(stream)["data"])
        assert rows[0]["id"] == 3
        assert (
            rows[0]["task"] == "<script>x</script> a third"
        )  # JSON text: the script sets it as text
        answer.close()


def test_a_stream_needs_a_session_and_the_bound_host(tmp_path: Path) -> None:
    root, wf_id = make_repo(tmp_path / "repo")
    with _served(root) as (dashboard, origin):
        path = f"/r/{key_of(root.resolve())}/w/{wf_id}/stream"
        assert request(origin, "GET", path).status == 403
        cookie = cookie_for(origin, dashboard.sessions.login_token)
        rebound = request(origin, "GET", path, {"cookie": cookie, "host": "evil.example"})
        assert rebound.status == 403
