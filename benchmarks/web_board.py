"""How fast `supervisor web` paints its pages and brings a new event to the screen, on a large
state database, in a real browser.

    .venv/bin/python benchmarks/web_board.py [--workflows 100] [--events 100000] [--runs 10]
                                             [--writes 40]

Builds a repository whose state database holds `--workflows` workflows (running, waiting for
approval, completed, failed) and `--events` events: a fifth of them (20,000 by default) in the
first workflow, whose task branch changes two files, the rest spread over the others. Serves the
dashboard with uvicorn in this process (tests/browser_support.py `serving_for`, as the specs do)
and drives Debian's headless Chromium with Playwright, signed in with the printed token:

- board: `/` opened in a fresh page `--runs` times; per load the server's answer (navigation
  timing responseStart - requestStart), responseEnd, DOMContentLoaded and the first contentful
  paint (`performance.getEntriesByType('paint')`), all from the navigation's start. The first
  load after the server started (its Monitor cold: every workflow and the usage totals read) is
  shown apart from the median and p90 of the others.
- workflow page: the same for the page of the workflow with 20,000 events (drawn with its last
  200; the stream brings the later ones).
- floor: the same for `/login`, which has the same stylesheets and script and no data: what the
  browser alone takes on this machine (a fresh renderer's start, mostly). The three are loaded
  in turn, so that all see the same machine load; "above the floor" is the dashboard's share.
- event latency: on that page, `--writes` times, one event written with `Store.add_event` (at a
  random moment, so the server's 0.1 s poll is met at every phase); the page itself records when
  each new `#events tbody tr` appears (a MutationObserver, `performance.timeOrigin + now()`), and
  the latency is that minus the wall-clock time just before the write (Chromium's clock checked
  against this process's first, the offset removed).

Targets (the web dashboard's issue): a page with 100 workflows and 100,000 events first painted
in <= 300 ms, an event on the screen <= 200 ms after it is written. A benchmark reports: it exits
0 either way. The load average and core count are printed with the figures: the machine is
shared, and a busy one inflates them.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

PAINT_TARGET_MS = 300.0
EVENT_TARGET_MS = 200.0
STATUSES = ("running", "awaiting_approval", "completed", "completed", "failed")
"""Cycled over the workflows: a fifth running, a fifth waiting, two fifths done, a fifth failed."""
GATE_EVERY = 1_000
"""One event in so many is a gate's result (the workflow page shows every gate's output)."""

TIMING = """() => {
  const nav = performance.getEntriesByType("navigation")[0];
  const paint = performance.getEntriesByType("paint")
    .find((p) => p.name === "first-contentful-paint");
  return {
    server: nav.responseStart - nav.requestStart,
    response: nav.responseEnd,
    dom: nav.domContentLoadedEventEnd,
    paint: paint ? paint.startTime : null,
    rows: document.querySelectorAll("tbody tr").length,
  };
}"""

OBSERVE = """() => {
  window.arrivals = [];
  const body = document.querySelector("#events tbody");
  new MutationObserver((changes) => {
    const at = performance.timeOrigin + performance.now();
    for (const change of changes)
      for (const node of change.addedNodes)
        if (node.nodeName === "TR") window.arrivals.push([Number(node.dataset.id), at]);
  }).observe(body, { childList: true });
}"""


def git(repo: Path, *args: str) -> str:
    command = ["git", "-C", str(repo), "-c", "user.name=b", "-c", "user.email=b@b", *args]
    return subprocess.run(command, check=True, capture_output=True, text=True).stdout


def make_state(base: Path, workflows: int, events: int, big: int) -> tuple[Path, int]:
    """The repository, and the id of the workflow holding `big` of the events."""
    from sqlalchemy import insert

    from supervisor.state import schema
    from supervisor.state.store import EventSpec, Store, now

    repo = base / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / ".git" / "info" / "exclude").write_text(".supervisor/\n")
    (repo / "app.py").write_text("def login(user):\n    return True\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "init")
    sha = git(repo, "rev-parse", "HEAD").strip()
    made: list[int] = []
    with Store(repo / ".supervisor" / "state.db") as store:
        for n in range(workflows):
            wf = store.create_workflow(
                description=f"task number {n}: make the login check the password hash",
                cli="claude",
                base_branch="main",
                base_sha=sha,
                branch_for_id=lambda i: f"ai/{i}-task",
                definition={"steps": {"implement": {"role": "implementer"}}},
                first_step="implement",
            )
            step = store.start_step(wf.id, "implement", 1, "implementer", None)
            store.finish_step(
                step, "succeeded", event=EventSpec("implementation", input_tokens=1200)
            )
            status = STATUSES[n % len(STATUSES)]
            if status == "awaiting_approval":
                store.advance(
                    wf.id,
                    step="implement",
                    next_step="done",
                    context={"approval_step": "implement"},
                    status="awaiting_approval",
                    request_approval=True,
                )
            else:
                store.set_status(wf.id, status)
            made.append(wf.id)
        first, others = made[0], made[1:] or made[:1]
        kinds = ("step_started", "implementation", "note", "retry", "component_merged")

        def event(i: int, wf_id: int) -> dict[str, object]:
            kind = "gate" if i % GATE_EVERY == 0 else kinds[i % len(kinds)]
            return {
                "workflow_id": wf_id,
                "step": "implement",
                "type": kind,
                "role": "implementer",
                "status": "passed" if kind == "gate" else None,
                "payload": {"i": i, "summary": f"worked on part {i % 97}"},
                "input_tokens": 10,
                "output_tokens": 1,
                "cost_usd": 0.001,
                "timestamp": now(),
            }

        rest = max(0, events - big)
        with store.engine.begin() as conn:  # one transaction; the usage trigger runs per row
            conn.execute(insert(schema.events), [event(i, first) for i in range(big)])
            conn.execute(
                insert(schema.events), [event(i, others[i % len(others)]) for i in range(rest)]
            )
    git(repo, "checkout", "-q", "-b", f"ai/{first}-task")
    (repo / "app.py").write_text("def login(user):\n    return check(user.password)\n")
    (repo / "check.py").write_text("def check(p):\n    return bool(p)\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "candidate")
    git(repo, "checkout", "-q", "main")
    return repo, first


@dataclass
class Load:
    """One page load, in ms from the navigation's start."""

    server: float
    response: float
    dom: float
    paint: float
    rows: int


def load(browser_page: Page, url: str) -> Load:
    browser_page.goto(url, wait_until="load")
    browser_page.wait_for_function(
        "() => performance.getEntriesByType('paint')"
        ".some((p) => p.name === 'first-contentful-paint')"
    )
    found = browser_page.evaluate(TIMING)
    return Load(found["server"], found["response"], found["dom"], found["paint"], found["rows"])


def loads(browser: Browser, cookies: list, urls: list[str], runs: int) -> list[list[Load]]:
    """`runs + 1` loads of each of `urls`, interleaved (so that all see the same machine load),
    each in a fresh page of a fresh context (no cache, no stream of a page before)."""
    found: list[list[Load]] = [[] for _ in urls]
    for _ in range(runs + 1):
        for index, url in enumerate(urls):
            context = browser.new_context()
            context.add_cookies(cookies)
            try:
                found[index].append(load(context.new_page(), url))
            finally:
                context.close()
    return found


def clock_offset(browser_page: Page) -> tuple[float, float]:
    """Chromium's `timeOrigin + now()` minus this process's `time.time()`, in ms, from the
    quickest of 20 round trips; and that round trip (the offset's uncertainty is half of it)."""
    best = (float("inf"), 0.0)
    for _ in range(20):
        before = time.time() * 1000
        there = browser_page.evaluate("() => performance.timeOrigin + performance.now()")
        after = time.time() * 1000
        best = min(best, (after - before, there - (before + after) / 2))
    return best[1], best[0]


def latencies(
    browser_page: Page, db: Path, wf_id: int, writes: int
) -> tuple[list[float], float, tuple[float, float]]:
    """Ms from just before each write to its row in the page, the median write's ms, and the
    clocks' offset (`clock_offset`)."""
    from supervisor.state.store import EventSpec, Store

    browser_page.evaluate(OBSERVE)
    offset, trip = clock_offset(browser_page)
    written, spent = [], []
    with Store(db) as store:
        for n in range(writes):
            time.sleep(random.uniform(0.05, 0.25))
            before = time.time() * 1000
            store.add_event(wf_id, EventSpec("note", step="implement", payload={"bench": n}))
            spent.append(time.time() * 1000 - before)
            written.append(before)
            browser_page.wait_for_function(
                f"() => window.arrivals.length >= {n + 1}", timeout=10_000
            )
    arrivals = browser_page.evaluate("() => window.arrivals")
    found = [at - offset - w for (_, at), w in zip(arrivals, written, strict=True)]
    return found, statistics.median(spent), (offset, trip)


def pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def verdict(value: float, target: float) -> str:
    return "ok" if value <= target else "OVER"


def report(name: str, found: list[Load]) -> list[tuple[str, float]]:
    cold, warm = found[0], found[1:]
    print(f"\n{name}: {warm[0].rows} table rows; ms from the navigation's start")
    print(f"  {'':22} {'cold':>8} {'median':>8} {'p90':>8}")
    for label, attr in (
        ("server answer", "server"),
        ("responseEnd", "response"),
        ("DOMContentLoaded", "dom"),
        ("first contentful paint", "paint"),
    ):
        values = [getattr(x, attr) for x in warm]
        print(
            f"  {label:22} {getattr(cold, attr):8.1f} {statistics.median(values):8.1f} "
            f"{pct(values, 0.9):8.1f}"
        )
    paints = [x.paint for x in warm]
    return [
        (f"{name}: first paint, median", statistics.median(paints)),
        (f"{name}: first paint, p90", pct(paints, 0.9)),
        (f"{name}: first paint, cold", cold.paint),
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workflows", type=int, default=100)
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--big", type=int, default=20_000, help="events of the first workflow")
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--writes", type=int, default=40)
    args = parser.parse_args()

    from browser_support import CHROMIUM_FLAGS, chromium_path, serving_for
    from playwright.sync_api import sync_playwright

    from supervisor.web.app import create_app
    from supervisor.web.board import Board, key_of
    from supervisor.web.dashboard import Dashboard
    from supervisor.web.guard import Bound
    from supervisor.web.sessions import Sessions

    executable = chromium_path()
    if executable is None:
        print("Debian's chromium is not installed (scripts/setup.sh): nothing measured")
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        repo, big = make_state(Path(tmp), args.workflows, args.events, args.big)
        print(
            f"state: {args.workflows} workflows, {args.events} events ({args.big} in workflow "
            f"{big}), built in {time.perf_counter() - started:.1f} s"
        )
        print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        sessions = Sessions()
        dashboard_of = lambda port: Dashboard(  # noqa: E731
            Bound("127.0.0.1", port, False), sessions, Board(fixed=[repo])
        )
        with (
            serving_for(lambda port: create_app(dashboard_of(port))) as origin,
            sync_playwright() as playwright,
        ):
            browser = playwright.chromium.launch(
                executable_path=executable,
                headless=True,
                chromium_sandbox=False,
                args=list(CHROMIUM_FLAGS),
            )
            signing = browser.new_context()
            signing.new_page().goto(f"{origin}/?token={sessions.login_token}")
            cookies = signing.cookies()
            signing.close()
            page_url = f"{origin}/r/{key_of(repo.resolve())}/w/{big}"
            floor, board, workflow = loads(
                browser, cookies, [f"{origin}/login", f"{origin}/", page_url], args.runs
            )
            context = browser.new_context()
            context.add_cookies(cookies)
            following = context.new_page()
            following.goto(page_url, wait_until="load")
            following.wait_for_timeout(500)  # the stream is open
            lat, write_ms, (offset, trip) = latencies(
                following, repo / ".supervisor" / "state.db", big, args.writes
            )
            context.close()
            browser.close()
        floor_figures = report("/login", floor)
        figures = report("board /", board)
        figures += report(f"workflow {big}'s page", workflow)
        print(f"\nevent latency, {len(lat)} writes (write itself: median {write_ms:.1f} ms)")
        print(f"  browser clock minus ours: {offset:+.1f} ms (+/- {trip / 2:.1f}), removed")
        print(
            f"  median {statistics.median(lat):.1f} ms, p90 {pct(lat, 0.9):.1f} ms, "
            f"min {min(lat):.1f} ms, max {max(lat):.1f} ms"
        )
    print(f"\ncores: {os.cpu_count()}")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"\n{'figure':44} {'ms':>8} {'target':>8}")
    floor_median = floor_figures[0][1]
    for name, value in floor_figures[:2]:
        print(f"{'(floor) ' + name:44} {value:8.1f}")
    rows = [(name, value, PAINT_TARGET_MS) for name, value in figures]
    rows += [
        ("event on screen, median", statistics.median(lat), EVENT_TARGET_MS),
        ("event on screen, p90", pct(lat, 0.9), EVENT_TARGET_MS),
        ("event on screen, max", max(lat), EVENT_TARGET_MS),
    ]
    for name, value, target in rows:
        print(f"{name:44} {value:8.1f} {target:8.0f}  {verdict(value, target)}")
    # The dashboard's own share of a first paint: the page's median above the sign-in page's,
    # which has the same stylesheets and script and no data (what is left is the browser's).
    for name, value in figures:
        if name.endswith("median"):
            print(
                f"{name.split(':')[0] + ': above the floor, median':44} {value - floor_median:8.1f}"
            )
    # The verdict is on the warm medians and p90s; a cold first load and the worst event are
    # shown for what they are (one request, one sample).
    judged = [r for r in rows if not r[0].endswith(("cold", "max"))]
    ok = all(value <= target for _, value, target in judged)
    print("within targets" if ok else "OVER TARGET")
    if not ok and floor_median > PAINT_TARGET_MS / 2:
        print(
            f"(the browser alone takes {floor_median:.0f} ms to paint a page without data here: "
            "compare the figures above the floor, and the load average with the cores)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
