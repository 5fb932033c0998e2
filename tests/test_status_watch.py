"""`supervisor status <id> --watch`: redraws as the workflow moves and ends by itself once only a
person can move it (finished, waiting for an approval, or no supervisor running it any more), while
another process writes the state (a real SQLite database, a real git repository, real file locks).
`--exit-status` (as `gh run watch`) says in the exit code how it ended."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from typing import TYPE_CHECKING

import pytest

from supervisor.state.locks import task_lock
from supervisor.state.store import Store
from tests.cli_support import supervisor

if TYPE_CHECKING:
    from pathlib import Path


def test_watch_follows_the_workflow_and_ends_when_it_completes(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "init"], check=True)
    db = repo / ".supervisor" / "state.db"
    with Store(db) as store:
        wf = store.create_workflow(
            description="watch me",
            cli="claude",
            base_branch="main",
            base_sha="a" * 40,
            branch_for_id=lambda i: f"ai/{i}-watch-me",
            definition={},
            first_step="implement",
        )
    env = {
        **os.environ,
        "SUPERVISOR_USER_DIR": str(tmp_path / "user"),
        "COLUMNS": "100",
        "TTY_COMPATIBLE": "1",  # drawn as on a terminal: each redraw reaches the output
    }
    held = task_lock(db.parent, wf.id)  # a live supervisor runs it (this test process)
    held.__enter__()
    watcher = subprocess.Popen(
        [sys.executable, "-m", "supervisor", "status", str(wf.id), "--watch", "--interval", "0.2",
         "--repo", str(repo)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )  # fmt: skip
    try:
        first = shown_until(watcher, "running", deadline=time.monotonic() + 180)
        assert watcher.poll() is None  # still running: the workflow has not finished
        with Store(db) as store:
            store.set_status(wf.id, "completed")
        rest, errors = watcher.communicate(timeout=120)
        out, err = (first + rest).decode(), errors.decode()
    finally:
        held.__exit__(None, None, None)
        if watcher.poll() is None:
            watcher.kill()
    assert watcher.returncode == 0, err
    assert "running" in out  # what it showed first (TTY_COMPATIBLE: redrawn in place)
    assert out.index("running") < out.rindex("completed")  # then the end, and it stopped


def shown_until(watcher: subprocess.Popen[bytes], text: str, deadline: float) -> bytes:
    """What the watcher printed up to its first drawing that shows `text`."""
    assert watcher.stdout is not None
    fd = watcher.stdout.fileno()
    shown = b""
    while text.encode() not in shown:
        assert time.monotonic() < deadline, f"never showed {text!r}: {shown!r}"
        ready, _, _ = select.select([fd], [], [], 0.1)
        if ready:
            chunk = os.read(fd, 65536)
            assert chunk, f"ended before showing {text!r}: {shown!r}"
            shown += chunk
    return shown


def make_workflow(tmp_path: Path) -> tuple[Path, int]:
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "init"], check=True)
    with Store(repo / ".supervisor" / "state.db") as store:
        wf = store.create_workflow(
            description="watch me",
            cli="claude",
            base_branch="main",
            base_sha="a" * 40,
            branch_for_id=lambda i: f"ai/{i}-watch-me",
            definition={},
            first_step="implement",
        )
    return repo, wf.id


@pytest.mark.parametrize(
    ("status", "code", "said"),
    [
        ("completed", 0, "Workflow 1 completed."),
        ("failed", 1, "Workflow 1 failed. After fixing the cause: supervisor resume 1"),
        ("awaiting_approval", 10, "waits for approval: supervisor approve 1"),
        ("budget_exceeded", 10, "paused at its budget"),
    ],
)
def test_exit_status_says_how_the_workflow_ended(
    tmp_path: Path, status: str, code: int, said: str
) -> None:
    repo, wf_id = make_workflow(tmp_path)
    with Store(repo / ".supervisor" / "state.db") as store:
        store.set_status(wf_id, status)
    watched = supervisor("status", str(wf_id), "--watch", "--interval", "0.1", "--exit-status",
                         cwd=repo)  # fmt: skip
    assert watched.returncode == code, watched.stderr
    assert said in watched.stdout
    plain = supervisor("status", str(wf_id), "--watch", "--interval", "0.1", cwd=repo)
    assert plain.returncode == 0, "without --exit-status a watch that ends exits 0"


def test_piped_the_watch_says_its_last_message_on_a_line_of_its_own(tmp_path: Path) -> None:
    """Rich ends a live display with a line break on a terminal only: piped, the message was
    glued to the table's last edge (`└───┘Workflow 1 completed.`)."""
    repo, wf_id = make_workflow(tmp_path)
    with Store(repo / ".supervisor" / "state.db") as store:
        store.set_status(wf_id, "completed")
    for args in ([str(wf_id)], [str(wf_id), "--exit-status"]):
        lines = supervisor("status", *args, "-w", "--interval", "0.1", cwd=repo).stdout
        assert lines.splitlines()[-1] == "Workflow 1 completed.", lines
        assert lines.splitlines()[-2].endswith("┘")  # the table, whole, on the line before


def test_watch_stops_waiting_on_a_task_whose_supervisor_died(tmp_path: Path) -> None:
    """`running` in the database, and no process holds its task lock: it was killed. The watch
    says so, with the command that continues it, instead of waiting forever."""
    repo, wf_id = make_workflow(tmp_path)
    watched = supervisor("status", str(wf_id), "-w", "--interval", "0.1", "--exit-status",
                         cwd=repo)  # fmt: skip
    assert watched.returncode == 1
    assert "running (no supervisor)" in watched.stdout  # the detail says what the list says
    assert "No supervisor runs workflow 1 any more" in watched.stdout
    assert "Continue it with: supervisor resume 1" in watched.stdout


def test_the_detail_view_says_no_supervisor_as_the_list_does(tmp_path: Path) -> None:
    repo, wf_id = make_workflow(tmp_path)
    listed = supervisor("status", cwd=repo)
    shown = supervisor("status", str(wf_id), cwd=repo)
    assert "running (no supervisor)" in listed.stdout
    assert "running (no supervisor)" in shown.stdout
    with task_lock(repo / ".supervisor", wf_id):
        held = supervisor("status", str(wf_id), cwd=repo)
    assert "no supervisor" not in held.stdout


@pytest.mark.parametrize("exit_status", [True, False])
def test_ctrl_c_ends_a_watch_with_130_as_an_interrupt(tmp_path: Path, exit_status: bool) -> None:
    """README: 130 interrupted. `status --watch --exit-status && complete-task` must not take
    a Ctrl-C for a completed task; the task itself goes on (the watch only read it)."""
    repo, wf_id = make_workflow(tmp_path)
    env = {
        **os.environ,
        "SUPERVISOR_USER_DIR": str(tmp_path / "user"),
        "COLUMNS": "100",
        "TTY_COMPATIBLE": "1",  # drawn as on a terminal: the first drawing reaches the output
    }
    flags = ["--exit-status"] if exit_status else []
    with task_lock(repo / ".supervisor", wf_id):  # a live supervisor runs it: no end in sight
        watcher = subprocess.Popen(
            [sys.executable, "-m", "supervisor", "status", str(wf_id), "--watch", *flags,
             "--interval", "0.2", "--repo", str(repo)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )  # fmt: skip
        try:
            shown_until(watcher, "running", deadline=time.monotonic() + 180)
            time.sleep(1)  # in its loop of redraws, past the start of the live display
            watcher.send_signal(signal.SIGINT)
            _, errors = watcher.communicate(timeout=60)
        finally:
            if watcher.poll() is None:
                watcher.kill()
    assert watcher.returncode == 130, errors.decode()
    assert "Traceback" not in errors.decode()
    with Store(repo / ".supervisor" / "state.db") as store:
        assert store.workflow(wf_id).status == "running"  # untouched
