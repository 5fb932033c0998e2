"""What one server holds (where it listens, who is signed in, what it shows), and what each
request reads of it: the signed-in session and the repository its address names."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from supervisor.lifecycle.detached import Detached
from supervisor.lifecycle.detached import resume as detached_resume
from supervisor.lifecycle.detached import sync as detached_sync
from supervisor.web.board import Board, Repository
from supervisor.web.guard import Bound
from supervisor.web.sessions import COOKIE, Session, Sessions

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from starlette.requests import Request
    from starlette.responses import Response


@dataclass
class Dashboard:
    bound: Bound
    sessions: Sessions
    board: Board = field(default_factory=Board)
    team: bool = False
    """A shared database (state.url): personal tokens, and approvals under their emails."""
    resume: Callable[[int, Path], Detached] = field(default=detached_resume)
    """How a decided task goes on: `supervisor resume <id>`, detached (the TUI's way)."""
    sync: Callable[[int, Path], Detached] = field(default=detached_sync)
    """How a task takes its pull request's comments: `supervisor pr sync <id>`, detached."""


def dashboard_of(request: Request) -> Dashboard:
    found: Dashboard = request.app.state.dashboard
    return found


def signed_in(request: Request) -> Session | None:
    return dashboard_of(request).sessions.of(request.cookies.get(COOKIE))


def repository_of(request: Request) -> Repository | None:
    """The repository the address names by its key (never by its path)."""
    return dashboard_of(request).board.repository(request.path_params["key"])


def with_session(response: Response, request: Request, session: Session) -> Response:
    """The session cookie: HttpOnly (no script reads it), SameSite=Strict (no other site's page
    sends it), Secure over TLS."""
    response.set_cookie(
        COOKIE,
        session.id,
        httponly=True,
        samesite="strict",
        secure=dashboard_of(request).bound.tls,
        path="/",
    )
    return response
