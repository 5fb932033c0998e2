"""The dashboard's ASGI application: its routes, and the sign-in every one of them needs.

Starlette, served by uvicorn (supervisor/web/serve.py). Nothing here decides: a decision is
`supervisor.lifecycle.task_state.decide`, the call `supervisor approve|reject` makes, with the
signed-in person as its approver; reading is the TUI's reading (supervisor/views/monitor.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from supervisor.web import pages, stream
from supervisor.web.dashboard import Dashboard, dashboard_of, signed_in, with_session
from supervisor.web.guard import Guard
from supervisor.web.render import highlight_css, page
from supervisor.web.sessions import COOKIE, csrf_matches

if TYPE_CHECKING:
    from starlette.requests import Request

STATIC = Path(__file__).parent / "static"


def create_app(dashboard: Dashboard) -> Starlette:
    app = Starlette(
        routes=[
            Route("/", pages.board, methods=["GET"]),
            Route("/login", login_form, methods=["GET"]),
            Route("/login", login, methods=["POST"]),
            Route("/logout", logout, methods=["POST"]),
            Route("/r/{key}/w/{wf_id:int}", pages.workflow, methods=["GET"]),
            Route("/r/{key}/w/{wf_id:int}/decide", pages.decide, methods=["POST"]),
            Route("/r/{key}/w/{wf_id:int}/resume", pages.resume, methods=["POST"]),
            Route("/r/{key}/w/{wf_id:int}/sync", pages.sync, methods=["POST"]),
            Route("/r/{key}/w/{wf_id:int}/stream", stream.events, methods=["GET"]),
            Route("/stream/board", stream.board, methods=["GET"]),
            Route("/static/highlight.css", css, methods=["GET"]),
            Mount("/static", StaticFiles(directory=STATIC), name="static"),
        ],
        middleware=[Middleware(Guard, bound=dashboard.bound)],
    )
    app.state.dashboard = dashboard
    return app


async def login_form(request: Request) -> Response:
    return HTMLResponse(page("login.html", session=None, said=None))


async def login(request: Request) -> Response:
    form = await request.form(max_files=0, max_fields=4, max_part_size=4096)
    session = dashboard_of(request).sessions.sign_in(str(form.get("token") or ""))
    if session is None:
        said = "That token is not valid (a printed one works once; a personal one may be revoked)."
        return HTMLResponse(page("login.html", session=None, said=said), status_code=403)
    return with_session(RedirectResponse("/", status_code=303), request, session)


async def logout(request: Request) -> Response:
    session = signed_in(request)
    if session is not None:
        form = await request.form(max_files=0, max_fields=4, max_part_size=4096)
        if not csrf_matches(session, str(form.get("csrf") or "")):
            return PlainTextResponse("Refused: the form's CSRF token is missing or wrong.", 403)
        dashboard_of(request).sessions.sign_out(session.id)
    response = RedirectResponse("/login", status_code=303)
    response.delete_cookie(COOKIE, path="/")
    return response


async def css(request: Request) -> Response:
    return Response(highlight_css(), media_type="text/css")
