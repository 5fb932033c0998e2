"""Faults of the machine, not the worker: a full disk and a state database held locked by another
program, recognised in whatever exception carries them and said as one typed error.

They arrive in many shapes: an `OSError` with ENOSPC from writing a worktree, SQLite's
`database or disk is full` or `database is locked` through SQLAlchemy, git's "No space left on
device" in a failed command's output. Left as they are, a person reads a traceback and a
`running (no supervisor)` task with no reason given. Here each becomes a `DiskFullError`
(what is full and where: the path, its mount point and the space left) or a
`DatabaseLockedError` (which process holds the lock, read from the kernel's lock table), both
telling the fix and, once the caller knows the task, the `resume` that continues it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING

from supervisor.core.errors import (
    DatabaseLockedError,
    DiskFullError,
    GitError,
    MachineFault,
    Terminated,
    ToolFailedError,
)

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator

_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
_SQLITE_FULL = 13
_SQLITE_BUSY = 5
_SQLITE_LOCKED = 6
_FULL_TEXT = ("No space left on device", "Disk quota exceeded", "database or disk is full")


def causes(error: BaseException) -> Iterator[BaseException]:
    """`error` and what it came from: its cause and context, and the driver's error that
    SQLAlchemy wraps (`orig`), each once."""
    seen: set[int] = set()
    stack = [error]
    while stack:
        e = stack.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        yield e
        for nxt in (getattr(e, "orig", None), e.__cause__, e.__context__):
            if isinstance(nxt, BaseException):
                stack.append(nxt)


def is_disk_full(error: BaseException) -> bool:
    return any(_full(e) for e in causes(error))


def is_database_locked(error: BaseException) -> bool:
    return any(_locked(e) for e in causes(error))


def leaves_runs(error: BaseException) -> bool:
    """Whether a worker run cut short by `error` keeps what it left (its container, worktree and
    model record) for `resume` to adopt: a stop asked from outside, or a fault of the machine
    that struck after the model may have answered. Buying that answer again is the one loss
    freeing space or a lock cannot undo."""
    return isinstance(error, Terminated) or machine_fault(error) is not None


def machine_fault(
    error: BaseException, wf_id: int | None = None, *, near: Iterable[Path] = ()
) -> MachineFault | None:
    """`error` as the machine fault it is, or None. `wf_id`: the task, for the hint. `near`: the
    folders the command writes, for a fault that does not name its path (git's output): the
    fullest of their file systems is named."""
    for e in causes(error):
        if isinstance(e, MachineFault):
            if wf_id is not None:
                e.for_workflow(wf_id)
            return e
    if any(_locked(e) for e in causes(error)):
        return locked_error(None, wf_id)
    if not any(_full(e) for e in causes(error)):
        return None
    named = next((_filename(e) for e in causes(error) if _filename(e)), None)
    if named is not None:
        return disk_full_error(named, wf_id)
    return disk_full_error(fullest(near), wf_id, guessed=True)


def disk_full_error(
    path: Path | None, wf_id: int | None, *, database: bool = False, guessed: bool = False
) -> DiskFullError:
    """The one-line error: what is full (the file system, by its mount point, and what is left
    on it) and where (what could not be written). `guessed`: `path` is only the fullest place
    the command writes, not one the fault named."""
    if path is None:
        return DiskFullError(
            "No space left on a file system this command writes: a write failed.",
            fix="Free space (`df -h` shows which file system is full)",
            path="",
            database=database,
            wf_id=wf_id,
        )
    full = f"the file system mounted at {mount_point(path)} ({left(path)})"
    if database:
        said = (
            f"No space left on {full} for the state database {path}: it could not record this "
            "change, so the task stays at its last recorded step."
        )
    elif guessed:
        said = f"No space left on {full}, which holds {path}: a write failed."
    else:
        said = f"No space left on {full} for writing {path}."
    return DiskFullError(
        said, fix=f"Free space on {mount_point(path)}", path=str(path), database=database,
        wf_id=wf_id,
    )  # fmt: skip


def locked_error(db: Path | None, wf_id: int | None, waited_s: float | None = None) -> MachineFault:
    """The state database held locked by another program past the busy timeout."""
    holders = lock_holders(db) if db is not None else []
    who = f"another program ({', '.join(holders)})" if holders else "another program"
    name = f"The state database {db}" if db is not None else "The state database"
    waited = f" for {waited_s:g} s" if waited_s else ""
    return DatabaseLockedError(
        f"{name} is locked by {who}; waited{waited} and wrote nothing of this change.",
        fix="End that program's open transaction (or the program)",
        wf_id=wf_id,
    )


def left(path: Path) -> str:
    """What is left on the file system holding `path`: "12.0 MB free", and when its inodes are
    gone too (a file system of many small files), that no new file fits."""
    free = free_bytes(path)
    said = f"{size(free)} free" if free is not None else "free space unknown"
    with contextlib.suppress(OSError):
        info = os.statvfs(_existing(path))
        if info.f_files and not info.f_favail:
            said += ", no inode left for a new file"
    return said


def mount_point(path: Path) -> Path:
    here = _existing(path)
    while not os.path.ismount(here) and here != here.parent:
        here = here.parent
    return here


def free_bytes(path: Path) -> int | None:
    try:
        info = os.statvfs(_existing(path))
    except OSError:
        return None
    return info.f_bavail * info.f_frsize


def fullest(folders: Iterable[Path]) -> Path | None:
    """Of `folders`, the one on the file system with the least space left."""
    known = [(free, f) for f in folders if (free := free_bytes(f)) is not None]
    return min(known, key=lambda pair: pair[0])[1] if known else None


def size(n: int) -> str:
    value = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GB"  # unreachable: GB ends the loop


def lock_holders(db: Path) -> list[str]:
    """The processes holding a lock on the database's files, from the kernel's lock table
    (`/proc/locks`): those holding a write lock first ("pid 4242 sqlite3"); this process left
    out. Empty where the table is not readable."""
    ids = set()
    for path in (db, db.with_name(db.name + "-shm"), db.with_name(db.name + "-wal")):
        try:
            st = path.stat()
        except OSError:
            continue
        ids.add(f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}")
    try:
        table = Path("/proc/locks").read_text().splitlines()
    except OSError:
        return []
    writers: list[int] = []
    others: list[int] = []
    for line in table:
        fields = line.split()
        if len(fields) < 6 or fields[1] != "POSIX" or fields[5] not in ids:
            continue
        pid = int(fields[4]) if fields[4].isdigit() else 0
        if pid in (0, os.getpid()):
            continue
        (writers if fields[3] == "WRITE" else others).append(pid)
    pids = list(dict.fromkeys(writers or others))
    return [f"pid {pid} {_command(pid)}".strip() for pid in pids[:3]]


def _command(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def _full(e: BaseException) -> bool:
    if isinstance(e, DiskFullError):
        return True
    if isinstance(e, OSError) and e.errno in _FULL_ERRNOS:
        return True
    if isinstance(e, sqlite3.Error):
        return getattr(e, "sqlite_errorcode", None) == _SQLITE_FULL
    if isinstance(e, GitError | ToolFailedError):  # a host tool's own words, never a worker's
        said = f"{e.message}\n{getattr(e, 'output', '')}"
        return any(text in said for text in _FULL_TEXT)
    return False


def _locked(e: BaseException) -> bool:
    if isinstance(e, DatabaseLockedError):
        return True
    if isinstance(e, sqlite3.OperationalError):
        code = getattr(e, "sqlite_errorcode", None)
        return code in (_SQLITE_BUSY, _SQLITE_LOCKED) or "database is locked" in str(e)
    return False


def _filename(e: BaseException) -> Path | None:
    if isinstance(e, DiskFullError) and e.path:
        return Path(e.path)
    if isinstance(e, OSError) and e.errno in _FULL_ERRNOS and e.filename:
        return Path(os.fsdecode(e.filename))
    return None


def _existing(path: Path) -> Path:
    here = path
    while not here.exists() and here != here.parent:
        here = here.parent
    return here
