"""`supervisor status <id> --watch`: redraws as the workflow moves and ends by itself once it has
finished, while another process writes the state (a real SQLite database, a real git repository)."""

from __future__ import annotations

import os
import select
import subprocess
import sys
import time
from typing import TYPE_CHECKING

from supervisor.state.store import Store

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
    watcher = subprocess.Popen(
        [sys.executable, "-m", "supervisor", "status", str(wf.id), "--watch", "--interval", "0.2",
         "--repo", str(repo)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )  # fmt: skip
    try:
        first = shown_until(watcher, "running", deadline=time.monotonic() + 60)
        assert watcher.poll() is None  # still running: the workflow has not finished
        with Store(db) as store:
            store.set_status(wf.id, "completed")
        rest, errors = watcher.communicate(timeout=30)
        out, err = (first + rest).decode(), errors.decode()
    finally:
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
