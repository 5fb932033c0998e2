"""`supervisor web` in a real browser (Debian's Chromium, driven by Playwright): the dashboard
started as a person starts it, a task of the real pipeline (the real CLI in the real sandbox
against the scripted model API) waiting for approval of its plan, and the attacks a page or a
worker can try, refused.

The implementer's first answer waits for a file the spec writes (tests/e2e_support.py
`implementer(after=...)`), so the task is `running` for as long as the spec looks at it: what the
spec sees depends on what it observed, not on how fast a loaded machine is.
Screenshots of the board and the approval page land in tmp_path; with
SUPERVISOR_DOCS_SCREENSHOTS=1 they replace docs/images/web-*.png (docs/web.md shows them).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from browser_support import CHROMIUM_FLAGS, chromium_path, serving
from e2e_support import (
    GOOD_CALC,
    PLAN_APPROVAL,
    fenced,
    implementer,
    new_repo,
    planner,
    require_sandbox,
    reviewer,
    write_workflow,
)
from playwright.sync_api import expect
from starlette.applications import Starlette
from starlette.responses import HTMLResponse
from starlette.routing import Route

from supervisor.core.errors import ApprovalRequired
from supervisor.lifecycle import tasks
from supervisor.state.store import Store
from supervisor.web.board import key_of

if TYPE_CHECKING:
    from collections.abc import Iterator

    from playwright.sync_api import Browser, Page

pytestmark = pytest.mark.docker

DOCS = Path(__file__).resolve().parent.parent / "docs" / "images"
HOSTILE = "<script>window.pwned = 1</script><img src=x onerror='window.pwned = 2'>"
REVIEW = "LGTM\n" + fenced({"status": "APPROVED", "summary": f"{HOSTILE} fine", "issues": []})
LONG = 240_000  # ms: a real step on a loaded 2-core machine


@pytest.fixture
def dashboard(tmp_path: Path, serve: Any, api_keys: None) -> Iterator[tuple[Path, str, Path]]:
    """A demo repository whose task waits for approval of its plan, and `supervisor web` serving
    it; yields the repository, the printed address and the implementer's release file."""
    require_sandbox()
    release = tmp_path / "release"
    server = serve(planner(), implementer(GOOD_CALC, after=release), reviewer(REVIEW))
    repo = new_repo(tmp_path, server.url)
    write_workflow(repo, PLAN_APPROVAL)
    with pytest.raises(ApprovalRequired):
        tasks.start_task("Implement add and multiply", repo)
    web = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "supervisor",
            "web",
            "--repo",
            str(repo),
            "--port",
            "0",
            "--no-open",
        ],
        stdout=subprocess.PIPE,
        text=True,
        cwd=repo,
    )
    try:
        assert web.stdout is not None
        url = web.stdout.readline().strip()  # the first line: where to sign in
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+/\?token=[\w-]{20,}", url), url
        yield repo, url, release
    finally:
        release.touch()  # a resume still waiting ends
        web.send_signal(signal.SIGTERM)
        web.wait(timeout=30)


def _origin(url: str) -> str:
    return url.split("/?", 1)[0]


def _approval(repo: Path) -> str:
    with Store(repo / ".supervisor" / "state.db") as store:
        approval = store.latest_approval(1)
    assert approval is not None
    return approval.status


def _shot(page: Page, tmp_path: Path, name: str) -> None:
    page.screenshot(path=tmp_path / name, full_page=True)
    if os.environ.get("SUPERVISOR_DOCS_SCREENSHOTS") == "1":
        DOCS.mkdir(exist_ok=True)
        shutil.copy(tmp_path / name, DOCS / name)


def test_a_task_approved_in_the_browser_runs_to_the_end_live_and_attacks_are_refused(
    dashboard: tuple[Path, str, Path], page: Page, browser: Browser, tmp_path: Path
) -> None:
    repo, url, release = dashboard
    origin, key = _origin(url), key_of(repo.resolve())
    workflow = f"{origin}/r/{key}/w/1"

    # No token, no dashboard.
    page.goto(origin + "/")
    assert page.url == origin + "/login"
    assert "Implement add" not in page.content()

    # The printed address signs in once; the token leaves the address bar.
    page.goto(url)
    assert page.url == origin + "/"
    row = page.locator('tr[data-key$="-1"]')
    expect(row.locator(".status")).to_have_text("awaiting_approval")
    _shot(page, tmp_path, "web-board.png")
    page.goto(url)
    assert page.url == origin + "/"  # still signed in by the cookie; the token itself is spent
    [cookie] = page.context.cookies()
    assert (cookie["httpOnly"], cookie["sameSite"]) == (True, "Strict")

    # A hostile page the person opens posts the approval form: another origin, no cookie.
    attack = Starlette(routes=[Route("/", lambda _: HTMLResponse(_forged(workflow)))])
    with serving(attack) as evil:
        page.goto(evil + "/")
        expect(page.locator("body")).to_contain_text("Refused")
    assert _approval(repo) == "pending"

    # The dashboard's own page without the CSRF token (what injected script would try).
    page.goto(workflow)
    status = page.evaluate(
        "url => fetch(url, {method: 'POST', headers: {'content-type': "
        "'application/x-www-form-urlencoded'}, body: 'action=approve'}).then(r => r.status)",
        workflow + "/decide",
    )
    assert status == 403
    assert _approval(repo) == "pending"

    # The approval panel: approve, and the dashboard starts `supervisor resume 1`.
    expect(page.locator("#approval")).to_be_visible()
    _shot(page, tmp_path, "web-approval.png")
    page.click("#approve")
    expect(page.locator(".said")).to_contain_text("Approved; `supervisor resume 1` runs")
    assert _approval(repo) == "approved"

    # The board shows the task running (its implementer waits for the spec's word).
    page.goto(origin + "/")
    expect(row.locator(".status")).to_have_text("running", timeout=LONG)

    # Its page follows the log live: events appear and the status ends `completed`, no reload.
    page.goto(workflow)
    page.evaluate("window.keptAcrossUpdates = true")
    before = page.locator("#events tbody tr").count()
    release.touch()
    expect(page.locator("#events tbody tr")).not_to_have_count(before, timeout=LONG)
    expect(page.locator("#status")).to_have_text("completed", timeout=LONG)
    assert page.evaluate("window.keptAcrossUpdates") is True

    # The reviewer's markup is text on the page, and none of it ran.
    page.reload()
    expect(page.locator(".review")).to_contain_text("<script>window.pwned = 1</script>")
    assert page.evaluate("window.pwned") is None
    with Store(repo / ".supervisor" / "state.db") as store:
        assert store.workflow(1).status == "completed"


def test_a_rebound_name_reaches_nothing(
    dashboard: tuple[Path, str, Path], browser: Browser
) -> None:
    """DNS rebinding: a page of the attacker's name, its name now pointing at 127.0.0.1, asks the
    dashboard for the board with the person's browser. Chromium resolves the name to loopback
    here (--host-resolver-rules), as the rebound DNS would."""
    _, url, _ = dashboard
    port = _origin(url).rsplit(":", 1)[1]
    rebound = browser.browser_type.launch(
        executable_path=chromium_path(),
        args=[*CHROMIUM_FLAGS, "--host-resolver-rules=MAP rebound.test 127.0.0.1"],
    )
    try:
        page = rebound.new_page()
        answer = page.goto(f"http://rebound.test:{port}/?token={url.split('token=')[1]}")
        assert answer is not None and answer.status == 403
        assert "answers only as 127.0.0.1" in page.content()
        assert page.context.cookies() == []
    finally:
        rebound.close()


def _forged(action: str) -> str:
    """An attacker's page: a form to the dashboard's decision, sent as the page loads (its own
    inline script: this page is the attacker's, under no policy of ours)."""
    return (
        f"<form id='f' method='post' action='{action}/decide'>"
        "<input name='action' value='approve'><input name='csrf' value='guessed'></form>"
        "<script>document.getElementById('f').submit()</script>"
    )
