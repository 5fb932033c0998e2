"""One running supervisor per task; several tasks side by side in one repository.

Each task has its own lock, an exclusive `flock` on `.supervisor/locks/task-<id>.lock` that holds
the pid of the supervisor running it. The kernel releases a `flock` when its process dies, even by
SIGKILL, so a crash never leaves a stale lock behind: the pid written in a lock file nobody holds
is history, and the next `resume` takes the lock over.

What tasks share is guarded by short critical sections instead of a lock for the whole run: the
state database (SQLite in WAL mode with a busy timeout, one short transaction per change) and
git's own bookkeeping (`critical_section` around `worktree add/prune` and ref updates).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from contextlib import contextmanager
from typing import TYPE_CHECKING

from supervisor.core.errors import WorkflowBusyError

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from sqlalchemy.engine import Engine

LOCKS_DIR = "locks"


def lock_path(state_dir: Path, wf_id: int) -> Path:
    return state_dir / LOCKS_DIR / f"task-{wf_id}.lock"


@contextmanager
def task_lock(
    state_dir: Path, wf_id: int, *, record: bool = True, engine: Engine | None = None
) -> Iterator[None]:
    """Hold task `wf_id` for this process; refused (WorkflowBusyError) while a live supervisor
    holds it. Other tasks of the repository are not affected. Not `record`: with SQLite, no lease
    row says who holds it (a submission holds it only while it makes the task's branch, and the
    row's writer would load SQLAlchemy for a record nobody could see). `engine`: the shared
    database's, when the caller has it open (a submission): the lease row is taken over it."""
    path = lock_path(state_dir, wf_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "another process"
            raise WorkflowBusyError(
                f"Task {wf_id} is still running: a supervisor ({holder}) holds it.",
                f"Wait for it to finish (`supervisor status {wf_id}`), or stop that process; "
                f"then `supervisor resume {wf_id}` continues the task.",
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"pid {os.getpid()}")
        handle.flush()
        try:
            with _across_hosts(state_dir, wf_id, record, engine):
                yield
        finally:
            handle.seek(0)
            handle.truncate()
            handle.flush()
            fcntl.flock(handle, fcntl.LOCK_UN)


@contextmanager
def _across_hosts(
    state_dir: Path, wf_id: int, record: bool, engine: Engine | None
) -> Iterator[None]:
    """With a shared state database, the task is held there too (supervisor/state/shared_lock.py):
    another host's supervisor sees none of this host's file locks. With SQLite, the holder is
    only recorded there, for `status`."""
    from supervisor.state.location import state_url
    from supervisor.state.postgres import is_postgres
    from supervisor.state.shared_lock import held, recorded

    url = state_url()
    if not is_postgres(url):
        db = state_dir / "state.db"
        with recorded(db, wf_id) if record and db.is_file() else contextlib.nullcontext():
            yield
        return
    assert url is not None
    with held(url, wf_id, engine):
        yield


def task_holder(state_dir: Path, wf_id: int) -> int | None:
    """The pid of the live supervisor running task `wf_id`, or None when no process holds it
    (finished, waiting, or crashed: a crashed task's lock is free for `resume`)."""
    path = lock_path(state_dir, wf_id)
    try:
        handle = path.open("r")
    except OSError:
        return None
    with handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            text = handle.read().strip().removeprefix("pid ")
            return int(text) if text.isdigit() else -1
        fcntl.flock(handle, fcntl.LOCK_UN)
        return None


@contextmanager
def critical_section(state_dir: Path, name: str) -> Iterator[None]:
    """A short section that tasks of one repository must not run at the same time (git's
    worktree and ref bookkeeping, a project image build): waits for the other process, then
    holds an exclusive `flock` on `.supervisor/locks/<name>.lock` until the block ends."""
    path = state_dir / LOCKS_DIR / f"{name}.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
