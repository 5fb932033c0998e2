"""A dashboard over a repository made by tests/test_tui.py's `make_repo` (one finished task, one
waiting for approval of its implement step), for the web face's fast specs: Starlette's
TestClient speaks to the ASGI app itself, as the browser would (Host, Origin, cookies)."""

from __future__ import annotations

import contextlib
import http.client
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from browser_support import serving_for
from starlette.testclient import TestClient
from test_tui import make_repo

from supervisor.lifecycle.detached import Detached
from supervisor.web.app import create_app
from supervisor.web.board import Board, key_of
from supervisor.web.dashboard import Dashboard
from supervisor.web.guard import Bound
from supervisor.web.sessions import Sessions

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from starlette.types import ASGIApp

ORIGIN = "http://127.0.0.1:8765"


@dataclass
class Served:
    root: Path
    waiting: int
    dashboard: Dashboard
    client: TestClient
    resumed: list[int] = field(default_factory=list)
    """The tasks whose `resume` the dashboard started (a stand-in: the browser spec starts the
    real one)."""

    @property
    def key(self) -> str:
        return key_of(self.root.resolve())

    def sign_in(self) -> str:
        """Signs the client in with the printed token; its session's CSRF token."""
        answer = self.client.get(f"/?token={self.dashboard.sessions.login_token}")
        assert answer.status_code == 200
        return self.csrf()

    def csrf(self) -> str:
        [session] = self.dashboard.sessions._open.values()
        return session.csrf

    def post(self, path: str, data: dict[str, str], origin: str | None = ORIGIN) -> object:
        headers = {"origin": origin} if origin else {}
        return self.client.post(path, data=data, headers=headers, follow_redirects=False)


def served(
    tmp_path: Path,
    *,
    tls: bool = False,
    personal: Callable[[str], str | None] | None = None,
    change: Callable[[Path, int], None] | None = None,
) -> Served:
    root, waiting = make_repo(tmp_path / "repo")
    if change is not None:
        change(root, waiting)
    bound = Bound("127.0.0.1", 8765, tls)
    dashboard = Dashboard(bound, Sessions(personal=personal), Board(fixed=[root]))
    scheme = "https" if tls else "http"
    client = TestClient(create_app(dashboard), base_url=f"{scheme}://127.0.0.1:8765")
    s = Served(root, waiting, dashboard, client)

    def resume(wf_id: int, repo: Path) -> Detached:
        assert repo == root.resolve()
        s.resumed.append(wf_id)
        return Detached(wf_id, subprocess.Popen(["true"]), root / ".supervisor" / "resume.log")

    dashboard.resume = resume
    return s


@contextlib.contextmanager
def live(dashboard_for: Callable[[int], Dashboard]) -> Iterator[tuple[Dashboard, str]]:
    """The dashboard served by uvicorn on a free loopback port, told its port before it serves
    (as supervisor/web/serve.py binds first); yields it and its origin."""
    made: list[Dashboard] = []

    def app_for(port: int) -> ASGIApp:
        made.append(dashboard_for(port))
        return create_app(made[0])

    with serving_for(app_for) as origin:
        yield made[0], origin


def cookie_for(origin: str, token: str) -> str:
    """Signs in with `token` over real HTTP; the session's cookie, as a Cookie header has it."""
    answer = request(origin, "GET", f"/?token={token}")
    assert answer.status == 303, answer.status
    return answer.getheader("set-cookie", "").split(";")[0]


def request(
    origin: str, method: str, path: str, headers: dict[str, str] | None = None
) -> http.client.HTTPResponse:
    """One request over a new connection; the answer is left unread (a stream stays open)."""
    host, port = origin.removeprefix("http://").rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    conn.request(method, path, headers=headers or {})
    return conn.getresponse()


def sse(answer: http.client.HTTPResponse) -> Iterator[dict[str, str]]:
    """The server-sent events of a stream, one dict (id, event, data) each, comments skipped."""
    found: dict[str, str] = {}
    while line := answer.fp.readline():
        text = line.decode().rstrip("\r\n")
        if not text:
            if found:
                yield found
            found = {}
        elif not text.startswith(":"):
            name, _, value = text.partition(":")
            found[name] = value.removeprefix(" ")
