"""A dashboard over a repository made by tests/test_tui.py's `make_repo` (one finished task, one
waiting for approval of its implement step), for the web face's fast specs: Starlette's
TestClient speaks to the ASGI app itself, as the browser would (Host, Origin, cookies)."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from starlette.testclient import TestClient
from test_tui import make_repo

from supervisor.lifecycle.detached import Detached
from supervisor.web.app import Dashboard, create_app
from supervisor.web.board import Board, key_of
from supervisor.web.guard import Bound
from supervisor.web.sessions import Sessions

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

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
