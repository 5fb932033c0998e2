"""Who runs what, right now: a lease row per holder in the state database, renewed while its
process lives, so that every host reads the same answer (`status`), and a holder that stops
answering loses its hold after a bounded time instead of never.

A lease names what it holds: a task (`task:<id>`, the lock of a step's run across hosts), one
component of a task's fan-out (`task:<id>/<component>`), or a worker polling a queue
(`worker:<queue>:<holder>`). A thread of the holding process renews it every third of its time to
live; a holder that is paused (SIGSTOP), cut off or dead stops renewing, and once the lease
expires another process may take it over. Unlike a session-level advisory lock, the kernel of a
stopped process cannot keep it alive by answering TCP keepalives for hours.

Taking over is safe because the holder checks its lease before it commits a step
(`Held.check`, the Temporal activity's `before_commit`), and its pushes to the shared remote are
under a lease on the refs (supervisor/workspace/remote.py): a holder woken after a take-over finds
both gone and commits nothing. A component's run is fenced the same way by its own lease
(`held_here`: its state writes, and its push after `Held.check`); a refusal is
`LeaseLostError`. A lease held by a dead process of this same host is taken at once (its pid
no longer exists), so a crashed run is resumable without waiting for the expiry.

Times are epoch seconds of the writing host; a team's hosts keep their clocks in step (NTP), and
the time to live (SUPERVISOR_LEASE_SECONDS, 45 s by default) is far above their drift.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from supervisor.core.errors import RemoteNotUpdatedError, WorkflowBusyError
from supervisor.state.columns import names
from supervisor.state.records import LeaseRow

if TYPE_CHECKING:
    from collections.abc import Iterator

    from sqlalchemy.engine import Connection, Engine

DEFAULT_TTL = 45.0
COLUMNS = ", ".join(names(LeaseRow))


def ttl() -> float:
    raw = os.environ.get("SUPERVISOR_LEASE_SECONDS", "")
    try:
        return max(1.0, float(raw)) if raw else DEFAULT_TTL
    except ValueError:
        return DEFAULT_TTL


def task_name(wf_id: int) -> str:
    return f"task:{wf_id}"


def component_name(wf_id: int, component: str) -> str:
    return f"task:{wf_id}/{component}"


def worker_name(queue: str, holder: str) -> str:
    return f"worker:{queue}:{holder}"


def host() -> str:
    import socket  # here, as uuid below: `status` reads leases and needs neither

    return socket.gethostname()


class Lease(LeaseRow):
    """A row of the leases table (its columns: supervisor/state/records.py `LeaseRow`)."""

    def expired(self, now: float | None = None) -> bool:
        return (time.time() if now is None else now) > self.expires_at

    def silent_for(self, now: float | None = None) -> float:
        return max(0.0, (time.time() if now is None else now) - self.heartbeat_at)

    def dead_here(self) -> bool:
        """Held by a process of this host that no longer exists (killed, crashed)."""
        if self.host != host():
            return False
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
        return False


class Held:
    """A lease this process holds; `lost` once another process took it over."""

    def __init__(self, engine: Engine, name: str, holder: str, ttl_s: float) -> None:
        self.engine = engine
        self.name = name
        self.holder = holder
        self.ttl = ttl_s
        self.lost = threading.Event()
        self.renewed_at = time.monotonic()
        self.fences = False  # a shared database's task hold (state/shared_lock.py)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def renew(self, doing: str | None = None) -> bool:
        from sqlalchemy import text

        now = time.time()
        sets = "heartbeat_at = :now, expires_at = :exp" + (", doing = :doing" if doing else "")
        try:
            with self.engine.begin() as conn:
                n = conn.execute(
                    text(f"UPDATE leases SET {sets} WHERE name = :name AND holder = :holder"),
                    {"now": now, "exp": now + self.ttl, "doing": doing, "name": self.name,
                     "holder": self.holder},
                ).rowcount  # fmt: skip
        except Exception:  # the database out of reach for a moment: the next renewal tries again
            return not self.lost.is_set()
        if n == 0:
            self.lost.set()
        else:
            self.renewed_at = time.monotonic()
        return n == 1

    def check(self) -> None:
        """Before a commit: refused once another process took the lease over."""
        if self.lost.is_set() or not self.renew():
            raise self.refusal()

    def still_held(self, conn: Connection | None = None) -> bool:
        """Whether this process may still write for the task: asked inside every state write
        (supervisor/state/rows.py; `conn`, the write's own), so that a process paused or cut off
        long enough for another to take its task over writes nothing more into it. Only a hold
        that can be taken over fences (`fences`: a shared database's task hold, and a
        component's on any database; a SQLite task's file lock keeps others out while its
        holder lives). On SQLite the row is read in the write's own transaction (a renewal, on
        another connection, would wait for that transaction's lock): a local read per write. On
        a shared database only a silence of a whole TTL costs a round trip: the renewal that
        says who holds it."""
        if not self.fences:
            return True
        if self.lost.is_set():
            return False
        if conn is not None and conn.dialect.name == "sqlite":
            from sqlalchemy import text

            holder = conn.execute(
                text("SELECT holder FROM leases WHERE name = :name"), {"name": self.name}
            ).scalar()
            if holder != self.holder:
                self.lost.set()
            return holder == self.holder
        if time.monotonic() - self.renewed_at <= self.ttl:
            return True
        return self.renew() and not self.lost.is_set()

    def refusal(self) -> Exception:
        return LeaseLostError(
            f"This process stopped renewing its hold on {self.name} long enough for another "
            "to take it over: this step's result was not committed.",
            "Nothing to do: the process that took it over runs the step.",
        )

    def start(self) -> None:
        def renewing() -> None:
            while not self._stop.wait(self.ttl / 3):
                self.renew()

        self._thread = threading.Thread(target=renewing, name=f"lease {self.name}", daemon=True)
        self._thread.start()

    def release(self) -> None:
        from sqlalchemy import text

        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        with contextlib.suppress(Exception), self.engine.begin() as conn:
            conn.execute(
                text("DELETE FROM leases WHERE name = :name AND holder = :holder"),
                {"name": self.name, "holder": self.holder},
            )


class LeaseLostError(RemoteNotUpdatedError):
    """This process's lease was taken over by another (it was paused or cut off past its time
    to live): what it was doing is refused, write or push; nothing of it was committed."""


class LeaseBusyError(WorkflowBusyError):
    def __init__(self, message: str, hint: str, current: Lease) -> None:
        super().__init__(message, hint)
        self.current = current


def acquire(
    engine: Engine, name: str, wf_id: int | None, doing: str = "", ttl_s: float | None = None
) -> Held:
    """Take lease `name`: free, expired, or held by a dead process of this host; else
    LeaseBusyError naming who holds it. A shared database that drops the connection meanwhile:
    taken again whole (supervisor/state/reconnect.py); one dropped at the commit of the row it
    wrote finds its own row, a holder still alive, and waits for its expiry like any other."""
    from supervisor.state import reconnect  # here, as sqlalchemy: `status` reads leases only

    where = engine.url.render_as_string(hide_password=True)
    return reconnect.call(where, lambda: _acquire(engine, name, wf_id, doing, ttl_s))


def _acquire(engine: Engine, name: str, wf_id: int | None, doing: str, ttl_s: float | None) -> Held:
    import uuid

    from sqlalchemy import text
    from sqlalchemy.exc import IntegrityError

    ttl_s = ttl() if ttl_s is None else ttl_s
    holder = f"{os.getpid()}@{host()}#{uuid.uuid4().hex[:8]}"
    now = time.time()
    row = {"name": name, "wf": wf_id, "holder": holder, "host": host(), "pid": os.getpid(),
           "doing": doing, "now": now, "exp": now + ttl_s}  # fmt: skip
    try:
        with engine.begin() as conn:
            conn.execute(
                text(
                    f"INSERT INTO leases ({COLUMNS}) "
                    "VALUES (:name, :wf, :holder, :host, :pid, :doing, :now, :exp)"
                ),
                row,
            )
    except IntegrityError:
        current = read(engine, name)
        taken = False
        if current is not None and (current.expired(now) or current.dead_here()):
            with engine.begin() as conn:  # the old holder's row as read: no race with a third
                taken = (
                    conn.execute(
                        text(
                            "UPDATE leases SET workflow_id = :wf, holder = :holder, host = :host, "
                            "pid = :pid, doing = :doing, heartbeat_at = :now, expires_at = :exp "
                            "WHERE name = :name AND holder = :old"
                        ),
                        {**row, "old": current.holder},
                    ).rowcount
                    == 1
                )
        elif current is None:
            return _acquire(engine, name, wf_id, doing, ttl_s)  # released meanwhile
        if not taken:
            assert current is not None
            raise LeaseBusyError(
                f"{name} is held by process {current.pid} on {current.host}"
                f"{' (' + current.doing + ')' if current.doing else ''}, last heard from "
                f"{current.silent_for(now):.0f} s ago.",
                "Wait for it to finish; a holder that stops answering loses its hold after "
                f"{ttl_s:.0f} s.",
                current,
            ) from None
    return Held(engine, name, holder, ttl_s)


@contextmanager
def hold(
    engine: Engine, name: str, wf_id: int | None, doing: str = "", ttl_s: float | None = None
) -> Iterator[Held]:
    """Hold lease `name` for the block, renewed in the background."""
    held = acquire(engine, name, wf_id, doing, ttl_s)
    held.start()
    try:
        yield held
    finally:
        held.release()


def read(engine: Engine, name: str) -> Lease | None:
    from sqlalchemy import text

    with engine.connect() as conn:
        found = conn.execute(
            text(f"SELECT {COLUMNS} FROM leases WHERE name = :name"), {"name": name}
        ).fetchone()
    return Lease(*found) if found else None


def all_leases(state: Any) -> list[Lease]:
    """Every lease, through a Store (SQLAlchemy) or a StateReader (sqlite3): for `status`."""
    query = f"SELECT {COLUMNS} FROM leases ORDER BY name"
    if hasattr(state, "conn"):  # supervisor.state.reader.StateReader
        return [Lease(*row) for row in state.conn.execute(query).fetchall()]
    from sqlalchemy import text

    with state.engine.connect() as conn:
        return [Lease(*row) for row in conn.execute(text(query)).fetchall()]


HELD: dict[int, Held] = {}
"""This process's holds on tasks, by workflow id, while it runs them (supervisor/state/
shared_lock.py registers them)."""
HELD_GUARD = threading.Lock()


_HERE = threading.local()
"""This thread's hold on one component of a task (`held_here`)."""


def current(wf_id: int) -> Held | None:
    """This process's hold on task `wf_id`, while it runs it (for a check before a commit), or
    this thread's on one of its components."""
    here: tuple[int, Held] | None = getattr(_HERE, "held", None)
    if here is not None and here[0] == wf_id:
        return here[1]
    with HELD_GUARD:
        return HELD.get(wf_id)


@contextmanager
def held_here(wf_id: int, lease: Held) -> Iterator[None]:
    """`lease` (a component's, `component_name`) as this thread's hold on task `wf_id` for the
    block: every state write of the thread checks it (supervisor/state/rows.py), as a step's
    writes check the task's. Per thread, not per process: several components of one task run
    at once in one worker, each in a thread of its own. Its holder string is the fencing token:
    once another process took the lease over, no renewal of this one matches. On SQLite too
    (workers of one host sharing the repository's state file): a component's lease is a row,
    not a file lock, so a worker paused past its time to live loses it to another worker."""
    lease.fences = True
    _HERE.held = (wf_id, lease)
    try:
        yield
    finally:
        _HERE.held = None


@contextmanager
def registered(wf_id: int, lease: Held | None) -> Iterator[None]:
    """`lease` as this process's hold on task `wf_id` for the block (`current`)."""
    with HELD_GUARD:
        if lease is not None:
            HELD[wf_id] = lease
    try:
        yield
    finally:
        with HELD_GUARD:
            HELD.pop(wf_id, None)
