"""The TUI says who runs a task from where `supervisor status` reads it (issue 59): a task the
database calls `running` but whose task lock no process holds (its supervisor was killed) is
`running (no supervisor)` in the list and the tree, its clock stopped at its last update, and `r`
resumes it; while a supervisor holds the lock it is `running`, its clock going. Textual's pilot over
a real repository, a real state database and a real task lock (flock) held by this process."""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import sys
from typing import TYPE_CHECKING

import pytest
from test_tui import make_repo, opened, tui
from textual.widgets import DataTable

from supervisor.state.locks import task_lock
from supervisor.state.store import Store
from supervisor.views.monitor import elapsed

if TYPE_CHECKING:
    from pathlib import Path


def running_task(root: Path) -> int:
    """A `running` task, created two hours ago and last updated one hour ago."""
    db = root / ".supervisor" / "state.db"
    with Store(db) as store:
        wf = store.create_workflow(
            description="left running",
            cli="claude",
            base_branch="main",
            base_sha="a" * 40,
            branch_for_id=lambda i: f"ai/{i}-left-running",
            definition={},
            first_step="implement",
        )
    with sqlite3.connect(db) as conn:
        conn.execute(
            "UPDATE workflows SET created_at = datetime('now', '-2 hours'), "
            "updated_at = datetime('now', '-1 hours') WHERE id = ?",
            (wf.id,),
        )
    return wf.id


def shown(root: Path, wf_id: int) -> tuple[str, str, str]:
    """The row's status and elapsed cells, and the tree pane, as the TUI draws them."""

    async def scenario() -> tuple[str, str, str]:
        app = tui(root)
        async with opened(app):
            row = app.query_one("#workflows", DataTable).get_row(str(wf_id))
            return str(row[1]), str(row[3]), str(app.query_one("#tree-body").content)

    return asyncio.run(scenario())


def status_says(root: Path, wf_id: int) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "supervisor", "status", str(wf_id)],
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout


def test_a_running_task_no_supervisor_holds_says_so_and_its_clock_stops(tmp_path: Path) -> None:
    root, _ = make_repo(tmp_path / "repo")
    wf_id = running_task(root)
    status, clock, tree = shown(root, wf_id)
    assert "running (no supervisor)" in status_says(root, wf_id)
    assert status == "running (no supervisor)"
    assert clock == "1:00:00"  # from its creation to its last update, not to now
    assert "running (no supervisor)" in tree and f"supervisor resume {wf_id}" in tree


def test_a_running_task_its_supervisor_holds_is_running_with_its_clock_going(
    tmp_path: Path,
) -> None:
    root, _ = make_repo(tmp_path / "repo")
    wf_id = running_task(root)
    with task_lock(root / ".supervisor", wf_id, record=False):
        status, clock, tree = shown(root, wf_id)
    assert status == "running"
    assert clock.startswith("2:")  # two hours since it started, and counting
    assert "no supervisor" not in tree


@pytest.mark.parametrize("status", ["abandoned", "interrupted"])
def test_the_clock_of_a_task_nothing_runs_stops_at_its_last_update(
    tmp_path: Path, status: str
) -> None:
    """An abandoned task (its branch removed) or an interrupted one (until a resume): its
    elapsed time stops where it stopped, as a finished task's does, instead of growing."""
    root, _ = make_repo(tmp_path / "repo")
    wf_id = running_task(root)
    db = root / ".supervisor" / "state.db"
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE workflows SET status = ? WHERE id = ?", (status, wf_id))
    with Store(db) as store:
        wf = store.workflow(wf_id)
    assert elapsed(wf, supervised=False) == elapsed(wf) == "1:00:00"
