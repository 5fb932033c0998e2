"""`supervisor tui`, driven by Textual's pilot over a real repository and a real state database
written by `Store`: the list shows the workflows, and the approval screen records decisions through
the same code as `supervisor approve` / `reject`."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
from typing import TYPE_CHECKING, Any

import pytest
from textual.widgets import DataTable, Input

from supervisor.state.store import EventSpec, Store
from supervisor.tui.app import SupervisorTui
from supervisor.tui.approval import ApprovalScreen

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

    from textual.pilot import Pilot

SIZE = (140, 45)


def git(root: Path, *args: str) -> str:
    base = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t"]
    stamp = "2026-01-01T00:00:00Z"  # fixed commit ids: the snapshots show them
    env = {**os.environ, "GIT_AUTHOR_DATE": stamp, "GIT_COMMITTER_DATE": stamp}
    return subprocess.run(
        [*base, *args], check=True, capture_output=True, text=True, env=env
    ).stdout


def make_repo(root: Path) -> tuple[Path, int]:
    """A repository with one finished workflow and one waiting for approval of its implement
    step, whose task branch adds a file and changes another, reviewed with one issue."""
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    (root / ".git" / "info" / "exclude").write_text(".supervisor/\n")
    (root / "app.py").write_text("def login(user):\n    return True\n")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "init")
    base = git(root, "rev-parse", "HEAD").strip()
    db = root / ".supervisor" / "state.db"
    with Store(db) as store:
        done = store.create_workflow(
            description="fix the typo",
            cli="claude",
            base_branch="main",
            base_sha=base,
            branch_for_id=lambda i: f"ai/{i}-fix-the-typo",
            definition={},
            first_step="implement",
        )
        store.set_status(done.id, "completed")
        wf = store.create_workflow(
            description="check passwords in login",
            cli="claude",
            base_branch="main",
            base_sha=base,
            branch_for_id=lambda i: f"ai/{i}-check-passwords",
            definition={"steps": {"implement": {"role": "implementer"}}},
            first_step="implement",
        )
        step = store.start_step(wf.id, "implement", 1, "implementer", None)
        store.finish_step(
            step, "succeeded", event=EventSpec("implementation", input_tokens=1200, cost_usd=0.25)
        )
        review: dict[str, Any] = {
            "status": "APPROVED",
            "summary": "checks the hash",
            "issues": [
                {"severity": "minor", "description": "no rate limit", "file": "app.py", "line": 2}
            ],
            "security_concerns": [],
        }
        payload = {"output": review}
        store.add_event(
            wf.id,
            EventSpec("review", step="review", role="reviewer", status="APPROVED", payload=payload),
        )
        store.advance(
            wf.id,
            step="implement",
            next_step="done",
            context={"approval_step": "implement"},
            status="awaiting_approval",
            request_approval=True,
        )
    git(root, "checkout", "-q", "-b", f"ai/{wf.id}-check-passwords")
    (root / "app.py").write_text("def login(user):\n    return check(user.password)\n")
    (root / "check.py").write_text("def check(p):\n    return bool(p)\n")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "candidate")
    git(root, "checkout", "-q", "main")
    return root, wf.id


@pytest.fixture
def repo(tmp_path: Path) -> tuple[Path, int]:
    return make_repo(tmp_path / "repo")


def tui(root: Path) -> SupervisorTui:
    return SupervisorTui(root, root / ".supervisor" / "state.db", interval=60)


async def settled(pilot: Pilot[None]) -> None:
    """The TUI draws first and reads the state after, in a thread: wait for it to land."""
    app = pilot.app
    assert isinstance(app, SupervisorTui)
    while not app.filled:
        await pilot.pause(0.01)
    await pilot.pause()


@contextlib.asynccontextmanager
async def opened(app: SupervisorTui, size: tuple[int, int] = SIZE) -> AsyncIterator[Pilot[None]]:
    """The TUI running headless, its state read."""
    async with app.run_test(size=size) as pilot:
        await settled(pilot)
        yield pilot


def screen_text(app: SupervisorTui) -> str:
    """The screen as plain text, one line a row (what a person reads in the terminal)."""
    import io

    from rich.console import Console

    width, height = app.size
    console = Console(width=width, height=height, file=io.StringIO(), record=True, safe_box=False)
    console.print(app.screen._compositor.render_update(full=True))
    return console.export_text(styles=False)


def latest_approval(root: Path, wf_id: int) -> Any:
    with Store(root / ".supervisor" / "state.db") as store:
        return store.latest_approval(wf_id)


def test_the_list_shows_each_workflow_with_status_step_tokens_and_cost(
    repo: tuple[Path, int],
) -> None:
    root, wf_id = repo

    async def scenario() -> list[list[str]]:
        app = tui(root)
        async with opened(app):
            table = app.query_one("#workflows", DataTable)
            return [[str(c) for c in table.get_row(key)] for key in table.rows]

    rows = asyncio.run(scenario())
    assert [r[0] for r in rows] == ["1", str(wf_id)]
    assert rows[0][1] == "completed"
    waiting = rows[1]
    assert waiting[1] == "awaiting_approval"
    assert waiting[2] == "implement (approval)"
    assert waiting[4] == "1,200"
    assert waiting[5] == "$0.2500"
    assert waiting[6] == "check passwords in login"


def test_pressing_a_on_the_approval_screen_records_the_approval(repo: tuple[Path, int]) -> None:
    root, wf_id = repo

    async def scenario() -> str:
        app = tui(root)
        async with opened(app) as pilot:
            await pilot.press("o")
            screen = app.screen
            assert isinstance(screen, ApprovalScreen)
            shown = app.export_screenshot().replace("&#160;", " ")
            await pilot.press("a")
            await pilot.pause()
            return shown

    shown = asyncio.run(scenario())
    assert "check.py" in shown  # the changed files
    assert "reviewer" in shown and "no rate limit" in shown  # the reviewer's verdict and issue
    approval = latest_approval(root, wf_id)
    assert approval.status == "approved"


def test_r_asks_for_a_reason_and_records_the_rejection_with_it(repo: tuple[Path, int]) -> None:
    root, wf_id = repo

    async def scenario() -> None:
        app = tui(root)
        async with opened(app) as pilot:
            await pilot.press("o", "r")
            assert isinstance(app.screen.query_one(Input), Input)
            assert latest_approval(root, wf_id).status == "pending"  # nothing before the reason
            await pilot.press(*"hash it", "enter")
            await pilot.pause()

    asyncio.run(scenario())
    approval = latest_approval(root, wf_id)
    assert (approval.status, approval.reason) == ("rejected", "hash it")


def test_an_empty_reason_rejects_nothing(repo: tuple[Path, int]) -> None:
    root, wf_id = repo

    async def scenario() -> None:
        app = tui(root)
        async with opened(app) as pilot:
            await pilot.press("o", "r", "enter")
            await pilot.pause()

    asyncio.run(scenario())
    assert latest_approval(root, wf_id).status == "pending"


def test_d_toggles_the_diff_and_the_mouse_approves(repo: tuple[Path, int]) -> None:
    root, wf_id = repo

    async def scenario() -> list[bool]:
        app = tui(root)
        seen = []
        async with opened(app) as pilot:
            await pilot.press("o")
            diff = app.screen.query_one("#diff")
            seen.append(diff.display)
            await pilot.press("d")
            seen.append(diff.display)
            await pilot.press("d")
            seen.append(diff.display)
            await pilot.click("#approve")
            await pilot.pause()
        return seen

    assert asyncio.run(scenario()) == [True, False, True]
    assert latest_approval(root, wf_id).status == "approved"


def test_a_workflow_that_is_not_waiting_opens_no_approval_screen(repo: tuple[Path, int]) -> None:
    root, _ = repo

    async def scenario() -> bool:
        app = tui(root)
        async with opened(app) as pilot:
            await pilot.press("up", "o")
            return isinstance(app.screen, ApprovalScreen)

    assert asyncio.run(scenario()) is False


def test_snapshot_of_the_approval_screen(repo: tuple[Path, int], snap_compare: Any) -> None:
    root, _ = repo
    assert snap_compare(tui(root), terminal_size=SIZE, run_before=settled, press=["o"])


def test_snapshot_of_the_rejection_reason_dialog(repo: tuple[Path, int], snap_compare: Any) -> None:
    root, _ = repo
    press = ["o", "r", *"too broad"]
    assert snap_compare(tui(root), terminal_size=SIZE, run_before=settled, press=press)


def test_the_bell_rings_when_a_workflow_starts_waiting(repo: tuple[Path, int]) -> None:
    """A workflow another process moves to a waiting state rings the terminal bell once."""
    root, _ = repo
    rings: list[int] = []

    class Counted(SupervisorTui):
        def bell(self) -> None:
            rings.append(1)

    async def scenario() -> None:
        app = Counted(root, root / ".supervisor" / "state.db", interval=60)
        async with opened(app) as pilot:
            app.refresh_state()
            assert rings == []  # what was already waiting at start does not ring
            with Store(root / ".supervisor" / "state.db") as store:
                store.set_status(1, "rate_limited")
            app.refresh_state()
            app.refresh_state()
            await pilot.pause()

    asyncio.run(scenario())
    assert rings == [1]


def test_a_task_description_is_shown_as_written_not_as_markup(repo: tuple[Path, int]) -> None:
    root, _ = repo
    with Store(root / ".supervisor" / "state.db") as store:
        store.create_workflow(
            description="fix [red]auth[/red] in [link=http://x]login",
            cli="claude",
            base_branch="main",
            base_sha="a" * 40,
            branch_for_id=lambda i: f"ai/{i}-fix",
            definition={},
            first_step="implement",
        )

    async def scenario() -> str:
        app = tui(root)
        async with opened(app):
            table = app.query_one("#workflows", DataTable)
            return str(table.get_row(list(table.rows)[-1])[-1])

    assert asyncio.run(scenario()) == "fix [red]auth[/red] in [link=http://x]login"


def test_the_events_pane_says_which_pool_and_worker_ran_each_step(tmp_path: Path) -> None:
    """Team mode's pools (docs/worker-pools.md): each run's `step_worker` event, in the TUI's
    words, as `status <id>` and the web page say it."""
    from supervisor.tui.views import events_view
    from supervisor.views.monitor import Monitor

    root, wf_id = make_repo(tmp_path / "repo")
    with Store(root / ".supervisor" / "state.db") as store:
        ran = {"step": "implement", "pool": "isolated", "worker": "ci-7-4242"}
        store.add_event(wf_id, EventSpec("step_worker", step="implement", payload=ran))
    detail = Monitor(root / ".supervisor" / "state.db").detail(wf_id)
    assert detail is not None
    assert "step_worker implement  pool isolated, worker ci-7-4242" in events_view(detail).plain
