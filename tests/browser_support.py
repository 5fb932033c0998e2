"""A real browser for the web dashboard's specs (`supervisor web`): Debian's Chromium, driven by
Playwright for Python.

Why this browser: Playwright's own browser download (`playwright install`) cannot be had here,
only PyPI, Debian and npm answer. So scripts/setup.sh installs Debian's `chromium` (in a
checkout only) and Playwright is pointed at it (`executable_path`); Playwright's wire protocol
(CDP) is Chromium's own, and Debian's security updates keep that Chromium within a few versions
of the one a Playwright release is built against (Playwright 1.65 against 159; Debian's 156
works).

Why these flags: headless, because CI has no display; `--no-sandbox` because the specs run as
root (Chromium refuses its sandbox to root); `--disable-gpu` (there is none);
`--disable-background-networking`, `--disable-component-update`, `--disable-sync` and
`--disable-quic` because this machine's network is closed and Chromium's own calls home
(updates, field trials, sync, QUIC probes) are refused there, which slowed and broke its start;
`--no-first-run` for no first-run pages. Playwright gives every launch a new empty profile
(`--user-data-dir` in a temporary directory it deletes on close), so no state outlives a run.

What a spec gets (registered for every spec by `pytest_plugins` in tests/conftest.py):
- `browser`: one Chromium per spec module, started at its first spec that asks for it and closed
  after its last (Playwright's running asyncio loop must not outlive it: see the fixture).
  Missing Chromium or Playwright: skipped locally, a failure under CI (e2e_support.missing).
- `browser_context`: a fresh context of that browser per spec (its own cookies and storage),
  closed after the spec; `page`: a new page in it.
- `serve_app`: serves an ASGI app (the dashboard's Starlette app) with uvicorn on a free port of
  127.0.0.1 for the spec, returning its base URL; `serving(app)` is the same as a context
  manager.

Playwright's sync API runs its own event loop in a greenlet: call it from the test's thread,
never from inside a running asyncio loop. The imports of Playwright and uvicorn wait for the
first spec that needs them, so that no other spec pays for them."""

from __future__ import annotations

import contextlib
import shutil
import socket
import threading
import time
from typing import TYPE_CHECKING, NoReturn

import pytest

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from playwright.sync_api import Browser, BrowserContext, Page
    from starlette.types import ASGIApp

CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
"""What Chromium is started with (see above); Playwright adds its own automation flags."""

SERVER_START_LIMIT = 30.0
"""Seconds a served app may take to listen before the spec fails (it takes milliseconds)."""


def chromium_path() -> str | None:
    """Debian's Chromium launcher (/usr/bin/chromium), if installed."""
    return shutil.which("chromium")


def _missing(reason: str) -> NoReturn:
    """Skipped locally, a failure under CI (e2e_support.missing; imported only when needed, it
    brings half a second of supervisor's modules)."""
    from e2e_support import missing

    missing(reason)
    raise AssertionError("unreachable: missing() skips or fails")


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """One headless Debian Chromium for a module's specs, closed after its last one: Playwright's
    sync API keeps an asyncio loop running in the test process while it is started, and every
    later spec of that process that calls asyncio.run (the TUI's pilot, the MCP client) failed
    with "cannot be called from a running event loop" when it lived for the whole session."""
    executable = chromium_path()
    if executable is None:
        _missing("Debian's chromium is not installed (run scripts/setup.sh)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _missing("Playwright for Python is not installed (pip install -r requirements.txt)")
    playwright = sync_playwright().start()
    try:
        launched = playwright.chromium.launch(
            executable_path=executable,
            headless=True,
            chromium_sandbox=False,
            args=list(CHROMIUM_FLAGS),
        )
    except BaseException:
        playwright.stop()
        raise
    try:
        yield launched
    finally:
        launched.close()
        playwright.stop()


@pytest.fixture
def browser_context(browser: Browser) -> Iterator[BrowserContext]:
    """A fresh context for one spec: no cookies, storage or cache of any other spec."""
    context = browser.new_context()
    try:
        yield context
    finally:
        context.close()


@pytest.fixture
def page(browser_context: BrowserContext) -> Page:
    """A new page in this spec's own context (closed with it)."""
    return browser_context.new_page()


@contextlib.contextmanager
def serving(app: ASGIApp) -> Iterator[str]:
    """Serve `app` with uvicorn on a free port of 127.0.0.1 in a background thread; yields the
    base URL (no trailing slash) once the server listens, and stops it on leaving."""
    with serving_for(lambda _port: app) as base:
        yield base


@contextlib.contextmanager
def serving_for(app_for: Callable[[int], ASGIApp]) -> Iterator[str]:
    """`serving`, for an app that must know its port before it serves (the dashboard answers
    only to the address it is bound to): `app_for(port)` makes it."""
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))  # bound here and handed over: no race for the port
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        app_for(port), host="127.0.0.1", port=port, log_level="warning", timeout_graceful_shutdown=5
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(
        target=server.run, kwargs={"sockets": [sock]}, name=f"uvicorn-{port}", daemon=True
    )
    thread.start()
    try:
        deadline = time.monotonic() + SERVER_START_LIMIT
        while not server.started:
            if not thread.is_alive():
                raise RuntimeError("the served app did not start (see uvicorn's log above)")
            if time.monotonic() > deadline:
                raise RuntimeError(f"the served app did not listen within {SERVER_START_LIMIT} s")
            time.sleep(0.01)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join()
        sock.close()


@pytest.fixture
def serve_app() -> Iterator[Callable[[ASGIApp], str]]:
    """`serve_app(app)` serves an ASGI app for this spec (see `serving`) and returns its base
    URL; every app it served is stopped after the spec."""
    with contextlib.ExitStack() as stack:
        yield lambda app: stack.enter_context(serving(app))
