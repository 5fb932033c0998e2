"""Deleting removed worktrees in the background: a 10,000-file tree takes seconds that its
component's slot should not wait for, so Workspace moves it to the trash and a thread deletes
it, never following a symlink and opening directories a worker left without write permission."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import threading
from pathlib import Path

_DELETIONS: set[threading.Thread] = set()  # removed worktrees still being deleted
_DELETIONS_LOCK = threading.Lock()


def _delete_in_background(path: Path) -> None:
    """Delete `path` in a thread the interpreter waits for at exit (not a daemon), so a finished
    run leaves no trash behind; a killed one leaves it for the next start."""

    def delete() -> None:
        try:
            _delete_tree(path)
        finally:
            with _DELETIONS_LOCK:
                _DELETIONS.discard(threading.current_thread())

    thread = threading.Thread(target=delete, name="worktree-deletion")
    with _DELETIONS_LOCK:
        _DELETIONS.add(thread)
    thread.start()


def wait_for_deletions(timeout: float | None = None) -> None:
    """Wait until the removed worktrees' files are gone."""
    with _DELETIONS_LOCK:
        pending = list(_DELETIONS)
    for thread in pending:
        thread.join(timeout)


def _delete_tree(path: Path) -> None:
    """Delete a worktree's directory (outside the worktree lock), never following a symlink."""
    if path.is_symlink():
        path.unlink()
    elif path.exists():
        try:
            shutil.rmtree(path, onerror=_make_removable)
        except RecursionError:
            # A directory chain deeper than Python's recursion (a worker can make one): rm
            # walks it with openat, never following a symlink.
            subprocess.run(["rm", "-rf", "--", str(path)], check=False, capture_output=True)


def _make_removable(function: object, path: str, excinfo: object) -> None:
    """A worker may leave directories without write permission; open them and retry once."""
    target = Path(path)
    with contextlib.suppress(OSError):
        target.parent.chmod(0o700)
        if target.is_dir() and not target.is_symlink():
            target.chmod(0o700)
            shutil.rmtree(target, ignore_errors=True)
        else:
            target.unlink()
