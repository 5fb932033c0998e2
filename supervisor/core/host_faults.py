"""Faults of the machine, not the worker: a full disk, a state database held locked by another
program and a Docker engine that stopped answering, recognised in whatever exception carries them
and said as one typed error.

They arrive in many shapes: an `OSError` with ENOSPC from writing a worktree, SQLite's
`database or disk is full` or `database is locked` through SQLAlchemy, git's "No space left on
device" in a failed command's output. Left as they are, a person reads a traceback and a
`running (no supervisor)` task with no reason given. Here each becomes a `DiskFullError`
(what is full and where: the path, its mount point and the space left) or a
`DatabaseLockedError` (which process holds the lock, read from the kernel's lock table), both
telling the fix and, once the caller knows the task, the `resume` that continues it. The engine's
loss (the Docker client's connection refused, reset or its socket gone) becomes a
`DockerUnavailableError`; the sandbox first waits for the engine to come back
(supervisor/sandbox/engine_loss.py), so this names only what that wait did not cure.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING

from supervisor.core.errors import (
    DatabaseLockedError,
    DiskFullError,
    DockerUnavailableError,
    EngineUnreachableError,
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
# git names the file but not the cause when a ref's lock file is made and then cannot be written
_UNWRITTEN = re.compile(r"couldn't write '([^'\n]+)'")
# the Docker engine's words when its data root is full, after what it could not make
_ENGINE_FULL = re.compile(r"(/[^\s:'\"]+): no space left on device", re.IGNORECASE)
LOW_BYTES = 1 << 20
"""Below this much free (or 0.5 % of the file system, if more), the host counts it as full."""
_ENGINE_CLIENT = ("requests.", "urllib3.")
"""Where the Docker SDK's connection errors come from: the package speaks HTTP through them to
the Docker engine alone (supervisor/sandbox/docker.py)."""
_ENGINE_LOST_TEXT = ("Cannot connect to the Docker daemon", "Error while fetching server API")
DEFAULT_SOCKET = "unix:///var/run/docker.sock"


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


def is_engine_lost(error: BaseException) -> bool:
    """Whether `error` is the Docker engine gone from under a request (connection refused or
    reset, its socket removed), not an answer of the engine's nor a read that timed out."""
    return any(_engine_lost(e) for e in causes(error))


def engine_address() -> str:
    """The engine the Docker client talks to: DOCKER_HOST, or the default socket."""
    return os.environ.get("DOCKER_HOST") or DEFAULT_SOCKET


def docker_unavailable(
    cause: object, wf_id: int | None, waited_s: float | None = None
) -> DockerUnavailableError:
    """The one-line error for an engine that stopped answering (and, `waited_s`, stayed away
    that long)."""
    waited = f"; waited {waited_s:g} s for it to come back" if waited_s else ""
    said = f"The Docker engine at {engine_address()} stopped answering ({_short(cause)}){waited}."
    return DockerUnavailableError(
        said, fix="Start the Docker engine (`docker info` checks it)", wf_id=wf_id
    )


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
    engine = next((e for e in causes(error) if _engine_full(e)), None)
    if engine is not None:  # the engine's own disk: not one of `near`
        return engine_full_error(engine, wf_id)
    lost = next((e for e in causes(error) if _engine_lost(e)), None)
    if lost is not None and not any(isinstance(e, EngineUnreachableError) for e in causes(error)):
        return docker_unavailable(lost, wf_id)
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


def engine_full_error(reply: BaseException, wf_id: int | None) -> DiskFullError:
    """The Docker engine could not make a container (its layer, a volume) for want of space on
    its data root: said as the full disk it is, not as a sandbox failure. The file system is
    named when the engine's path is on this host (a local engine); else the path as it said."""
    prune = "`docker system prune` removes stopped containers, unused images and build cache"
    found = _ENGINE_FULL.search(str(reply))
    path = Path(found.group(1)) if found else None
    if path is None or _existing(path) == Path("/"):  # not known here: a remote engine's
        where = f" (writing {path})" if path else ""
        return DiskFullError(
            "No space left on the Docker engine's data root (`docker info` names it: Docker "
            f"Root Dir){where}: it could not create a container.",
            fix=f"Free space there ({prune})", path=str(path or ""), database=False, wf_id=wf_id,
        )  # fmt: skip
    mount = mount_point(path)
    return DiskFullError(
        f"No space left on the file system mounted at {mount} ({left(path)}), the Docker "
        f"engine's data root: it could not create a container (writing {path}).",
        fix=f"Free space on {mount} ({prune})", path=str(path), database=False, wf_id=wf_id,
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


def out_of_space(path: Path) -> bool:
    """Whether the host itself reads the file system holding `path` as full: under LOW_BYTES
    (or 0.5 % of its size) free, or no inode left. What a program prints about space is only a
    hint; this reading is the host's own, which no text can fake."""
    try:
        info = os.statvfs(_existing(path))
    except OSError:
        return False
    free = info.f_bavail * info.f_frsize
    if free < max(LOW_BYTES, info.f_blocks * info.f_frsize // 200):
        return True
    return bool(info.f_files) and not info.f_favail


def _full(e: BaseException) -> bool:
    if isinstance(e, DiskFullError):
        return True
    if isinstance(e, OSError) and e.errno in _FULL_ERRNOS:
        return True
    if isinstance(e, sqlite3.Error):
        return getattr(e, "sqlite_errorcode", None) == _SQLITE_FULL
    if isinstance(e, GitError | ToolFailedError):  # a host tool's own words, never a worker's
        said = f"{e.message}\n{getattr(e, 'output', '')}"
        return any(text in said for text in _FULL_TEXT) or _unwritten(e) is not None
    return False


def _engine_full(e: BaseException) -> bool:
    """The Docker engine's reply (the SDK's errors, never a container's output) saying no
    space was left."""
    return type(e).__module__.startswith("docker.") and "no space left on device" in str(e).lower()


def _unwritten(e: BaseException) -> Path | None:
    """The file a host tool says it could not write (git's "couldn't write '<path>'"), when
    the host reads its file system as full."""
    said = f"{getattr(e, 'message', '')}\n{getattr(e, 'output', '')}"
    found = _UNWRITTEN.search(said)
    if found is None or not out_of_space(Path(found.group(1))):
        return None
    return Path(found.group(1))


def _engine_lost(e: BaseException) -> bool:
    if isinstance(e, DockerUnavailableError):
        return True
    name, said = type(e).__name__, str(e)
    if (type(e).__module__ + ".").startswith(_ENGINE_CLIENT):
        # A unix socket's read timeout comes as a ConnectionError too: a slow engine, not gone.
        if "Timeout" in name or "timed out" in said:
            return False
        return "Connection" in name or name == "ProtocolError"
    return type(e).__module__.startswith("docker.") and any(t in said for t in _ENGINE_LOST_TEXT)


_LOST_REASONS = (
    "Connection refused",
    "No such file or directory",
    "Connection reset",
    "Connection aborted",
    "Remote end closed connection",
    "Response ended prematurely",
)


def _short(cause: object) -> str:
    """The cause in a few words: the innermost reason a connection error carries."""
    said = " ".join(str(cause).split())
    reason = next((r for r in _LOST_REASONS if r in said), None)
    return reason.lower() if reason else said[:200] or type(cause).__name__


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
    if isinstance(e, GitError | ToolFailedError):
        return _unwritten(e)
    return None


def _existing(path: Path) -> Path:
    here = path
    while not here.exists() and here != here.parent:
        here = here.parent
    return here
