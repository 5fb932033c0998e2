"""Live pages without polling from the browser: server-sent events.

A workflow's stream sends each event of its append-only log with the log's sequence number as
the SSE id, so a browser that lost the connection (a sleeping laptop, a dropped Wi-Fi) asks
again with `Last-Event-ID` and gets exactly the events after it: none lost, none twice. The
server reads the log where it is written (the repository's SQLite, or the shared PostgreSQL)
every POLL seconds, which costs one indexed query; the board's stream sends the board's rows
whenever they change.
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any

import anyio
from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.concurrency import run_in_threadpool
from starlette.responses import PlainTextResponse, Response

from supervisor.core.errors import SupervisorError
from supervisor.views import listings
from supervisor.web.dashboard import dashboard_of, repository_of, signed_in
from supervisor.web.render import cells

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from starlette.requests import Request

    from supervisor.state.records import Event
    from supervisor.web.board import BoardRow, Repository

POLL = 0.1
"""Seconds between two reads of a workflow's log: an event is on the screen within ~0.2 s."""
BOARD_POLL = 1.0
BATCH = 500
"""Events read at once: a browser far behind catches up in batches, not in one answer."""
PING = 15
"""Seconds between keep-alive comments, so that proxies do not close an idle stream."""


def board_tag(rows: list[BoardRow]) -> str:
    """A short name for the board's rows as drawn: the stream's first message is skipped when
    the page already shows them (rebuilding 100 rows just after the first paint cost a layout)."""
    text = json.dumps([r.json() for r in rows])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def after_of(request: Request) -> int:
    """Where a stream starts: after the `Last-Event-ID` a reconnecting browser sends, else after
    the last event the page was drawn with."""
    for given in (request.headers.get("last-event-id"), request.query_params.get("after")):
        if given and given.isdigit() and len(given) < 19:
            return int(given)
    return 0


def event_row(e: Event) -> dict[str, Any]:
    return {"id": e.id, "cells": cells(listings.events([e]))[0]}


def _new(
    repo: Repository, wf_id: int, after: int, with_status: bool
) -> tuple[list[Event], dict[str, str] | None]:
    from supervisor.lifecycle import task_state
    from supervisor.views.monitor import decision, status_shown

    with task_state.reading(repo.root) as state:
        found = state.events(wf_id, after_id=after, limit=BATCH)
        if not (found or with_status):
            return found, None
        wf = state.workflow(wf_id)
        approval = state.latest_approval(wf_id)
    supervised = True
    if wf.status == "running":
        supervised = task_state.supervisors(repo.root, [wf]).get(wf.id, 0) is not None
    return found, {
        "status": status_shown(wf, decision(wf, approval), supervised),
        "step": wf.current_step or "-",
    }


async def events(request: Request) -> Response:
    if signed_in(request) is None:
        return PlainTextResponse("Refused: sign in first.", status_code=403)
    repo = await run_in_threadpool(repository_of, request)
    if repo is None:
        return PlainTextResponse("No such repository on this dashboard.", status_code=404)
    wf_id = int(request.path_params["wf_id"])
    start = after_of(request)

    async def sent() -> AsyncIterator[ServerSentEvent]:
        after, polls, said = start, 0, None
        while True:
            try:
                found, state = await run_in_threadpool(_new, repo, wf_id, after, polls % 10 == 0)
            except SupervisorError as trouble:
                yield ServerSentEvent(json.dumps({"error": trouble.message}), event="trouble")
                return
            for e in found:
                yield ServerSentEvent(json.dumps(event_row(e)), id=str(e.id), event="event")
            after = found[-1].id if found else after
            if state is not None and state != said:
                said = state
                yield ServerSentEvent(json.dumps(state), event="status")
            polls += 1
            if len(found) < BATCH:
                await anyio.sleep(POLL)

    return EventSourceResponse(sent(), ping=PING)


async def board(request: Request) -> Response:
    if signed_in(request) is None:
        return PlainTextResponse("Refused: sign in first.", status_code=403)
    shown = dashboard_of(request).board
    repo = request.query_params.get("repo") or None
    status = request.query_params.get("status") or None
    needs = request.query_params.get("needs") == "me"

    seen = request.query_params.get("seen")

    async def sent() -> AsyncIterator[ServerSentEvent]:
        said = None
        while True:
            rows = await run_in_threadpool(shown.rows, repo, status, needs)
            now = json.dumps([r.json() for r in rows])
            if now != said and (said is not None or board_tag(rows) != seen):
                yield ServerSentEvent(now, event="board")
            said = now
            await anyio.sleep(BOARD_POLL)

    return EventSourceResponse(sent(), ping=PING)
