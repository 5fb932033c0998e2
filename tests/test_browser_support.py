"""The real browser of the web dashboard's specs (tests/browser_support.py): Debian's Chromium,
driven by Playwright, loads a Starlette app served on loopback, runs its scripts, and enforces
its Content-Security-Policy, so that the dashboard's CSP specs prove what a browser would do."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from starlette.applications import Starlette
from starlette.responses import HTMLResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from playwright.sync_api import Page
    from starlette.requests import Request
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

CSP = "default-src 'self'"

BUTTON_PAGE = """<!doctype html>
<html><head><title>button</title><script src="/static/button.js" defer></script></head>
<body><button id="go">go</button><p id="out">waiting</p></body></html>"""

BUTTON_JS = """document.getElementById("go").addEventListener("click", () => {
  document.getElementById("out").textContent = "clicked";
});"""

INLINE_PAGE = """<!doctype html>
<html><head><title>inline</title><script src="/static/watch.js"></script></head>
<body><p id="out">untouched</p>
<script>document.getElementById("out").textContent = "inline ran";</script>
</body></html>"""

WATCH_JS = """window.violations = [];
document.addEventListener("securitypolicyviolation", (event) => {
  window.violations.push(event.effectiveDirective);
});"""


def strict_csp(app: ASGIApp) -> ASGIApp:
    """`app` with `Content-Security-Policy: default-src 'self'` on every response."""

    async def with_csp(scope: Scope, receive: Receive, send: Send) -> None:
        async def send_with_csp(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [*message.get("headers", []), (b"content-security-policy", CSP.encode())]
                message = {**message, "headers": headers}
            await send(message)

        await app(scope, receive, send_with_csp)

    return with_csp


@pytest.fixture
def site(tmp_path: Path, serve_app: Callable[[ASGIApp], str]) -> str:
    """A small Starlette site under that CSP, its scripts served from /static; its base URL."""
    static = tmp_path / "static"
    static.mkdir()
    (static / "button.js").write_text(BUTTON_JS, encoding="utf-8")
    (static / "watch.js").write_text(WATCH_JS, encoding="utf-8")

    async def button(request: Request) -> HTMLResponse:
        return HTMLResponse(BUTTON_PAGE)

    async def inline(request: Request) -> HTMLResponse:
        return HTMLResponse(INLINE_PAGE)

    app = Starlette(
        routes=[
            Route("/", button),
            Route("/inline", inline),
            Mount("/static", StaticFiles(directory=static)),
        ]
    )
    return serve_app(strict_csp(app))


def test_a_script_from_static_runs_under_the_csp_and_reacts_to_a_click(
    page: Page, site: str
) -> None:
    from playwright.sync_api import expect

    response = page.goto(site + "/")
    assert response is not None
    assert response.headers["content-security-policy"] == CSP
    expect(page.locator("#out")).to_have_text("waiting")

    page.click("#go")

    expect(page.locator("#out")).to_have_text("clicked")


def test_an_inline_script_is_refused_by_the_browser_under_the_csp(page: Page, site: str) -> None:
    page.goto(site + "/inline")  # returns after the load event: every allowed script has run

    assert page.text_content("#out") == "untouched"
    page.wait_for_function("window.violations.length > 0")  # the report is dispatched later
    assert page.evaluate("window.violations") == ["script-src-elem"]


def test_a_screenshot_of_the_page_is_a_png(page: Page, site: str, tmp_path: Path) -> None:
    page.goto(site + "/")
    shot = tmp_path / "page.png"

    page.screenshot(path=shot)

    data = shot.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n")
    assert len(data) > 100
