"""A shared PostgreSQL state database that drops a connection, or stops answering for a while (a
restart, a failover, `pg_terminate_backend`, a network cut): each change is run again whole, or
refused whole with one line saying why; never half-written, never a traceback.

Why here, around every `Store` method: one method is one transaction (store.py), so re-running
the method is re-running the transaction, the unit PostgreSQL rolls back when its connection
dies. What happens, in order:
- an idle pooled connection that died is replaced before it is used (`pool_pre_ping`,
  supervisor/state/postgres.py), so a drop between two changes costs nothing;
- a change whose connection drops before its COMMIT was sent wrote nothing (the server rolls
  the transaction back): it runs again after a short back-off, one progress line on stderr per
  try, for as long as a change waits for SQLite's lock (SUPERVISOR_STATE_BUSY_TIMEOUT,
  supervisor/state/busy.py: one knob for "how long a change waits for the database");
- a drop while the COMMIT was under way leaves unknown whether it landed: it is never run
  again (it could be written twice); the error says so, and `resume` continues from whatever
  the database recorded (it re-reads the task's last step);
- past the wait, `StateConnectionLostError`: the database named, why, the fix, the resume.
A refused server (a wrong password, no such database) is not a drop: refused at once, as
before (postgres.unreachable), and so is one out of reach when the store opens (`NOT_RETRIED`).
Two owners of one task cannot come of a retry: a retried change re-checks its process's lease
inside its transaction (supervisor/state/rows.py), as the first try did.
"""

from __future__ import annotations

import functools
import sys
import threading
import time
from typing import TYPE_CHECKING, Any, TypeVar

from sqlalchemy.exc import DBAPIError, OperationalError

from supervisor.core.errors import MachineFault, StateUnavailableError
from supervisor.state.busy import BUSY_TIMEOUT_ENV, busy_timeout

if TYPE_CHECKING:
    from collections.abc import Callable

T = TypeVar("T")
C = TypeVar("C", bound=type)

NOT_RETRIED = frozenset({"close", "iter_tables", "setup"})
"""`Store` methods left as they are: no database work, a generator (read as it runs), and the
opening's set-up: a server out of reach when a command starts is more often a wrong address
than a restart, so it is refused at once with its fix (postgres.unreachable); a Temporal
activity that cannot open it is retried by Temporal, on any worker."""
FIRST_WAIT_S = 0.5
LONGEST_WAIT_S = 5.0
# A server that answered and refused is not coming back by itself; one starting, stopping or
# recovering is (its FATAL says which).
_PASSING = ("starting up", "shutting down", "recovery mode", "too many clients")

_attempt = threading.local()


class StateConnectionLostError(MachineFault, StateUnavailableError):
    """The shared state database dropped this process's connection and did not take it back
    within the wait (or dropped it while a change was being committed). A fault of the machine:
    the task keeps what was recorded; a Temporal activity lets another worker try."""


def commit_sent() -> None:
    """Called by `Store._tx` once its body ran, before its COMMIT: from here on a dropped
    connection leaves the change's fate unknown, so the call is not run again."""
    _attempt.sent = True


def dropped(error: BaseException) -> DBAPIError | None:
    """The driver error of a lost or refused-for-now connection in `error` (or its cause)."""
    for e in (error, error.__cause__):
        if not isinstance(e, DBAPIError):
            continue
        if e.connection_invalidated:
            return e
        said = str(e.orig)
        # psycopg's "connection failed: ...": refused, reset, timed out, or the server's FATAL
        connecting = isinstance(e, OperationalError) and "connection" in said.split(":", 1)[0]
        if connecting and ("FATAL:" not in said or any(p in said for p in _PASSING)):
            return e
    return None


def retrying(cls: C) -> C:
    """Every public method of `cls` (and its bases) run through `call` when its instance is a
    shared database's (`url` set); SQLite's own lock wait is busy.py's."""
    for klass in reversed(cls.__mro__[:-1]):
        for name, method in list(vars(klass).items()):
            if name.startswith("_") or name in NOT_RETRIED or not callable(method):
                continue
            setattr(cls, name, _wrapped(method))
    return cls


def _wrapped(method: Callable[..., T]) -> Callable[..., T]:
    @functools.wraps(method)
    def run(self: Any, *args: Any, **kwargs: Any) -> T:
        if not getattr(self, "url", None):
            return method(self, *args, **kwargs)  # SQLite: its lock wait is busy.py's
        return call(self.where, lambda: method(self, *args, **kwargs))

    return run


def call(where: str, work: Callable[[], T]) -> T:
    """`work()`, run again on a dropped connection while the wait lasts (see the module); run
    once inside another such call (that one runs the whole again)."""
    depth = getattr(_attempt, "depth", 0)
    if depth:
        return work()
    bound = busy_timeout()
    started = time.monotonic()
    tries = 0
    _attempt.depth = 1
    try:
        while True:
            _attempt.sent = False
            try:
                return work()
            except (DBAPIError, StateUnavailableError) as e:
                lost = dropped(e)
                if lost is None:
                    raise
                if getattr(_attempt, "sent", False):
                    raise _unknown(where, lost) from e
                waited = time.monotonic() - started
                if waited >= bound:
                    raise _gone(where, lost, waited) from e
                tries += 1
                pause = min(FIRST_WAIT_S * 2 ** (tries - 1), LONGEST_WAIT_S, bound - waited)
                print(
                    f"supervisor: the state database {where} dropped the connection "
                    f"({_reason(lost)}); trying again in {pause:.1f} s (waited {waited:.0f} s "
                    f"of {bound:.0f} s)",
                    file=sys.stderr,
                    flush=True,
                )
                time.sleep(pause)
    finally:
        _attempt.depth = 0


def _reason(error: DBAPIError) -> str:
    """The driver's reason, short: its first line, without psycopg's "connection failed:
    connection to server at ..., port ... failed:" (the database is named already)."""
    said = (str(error.orig).strip().splitlines() or [""])[0]
    return " ".join(said.rsplit(" failed: ", 1)[-1].split())[:200]


def _gone(where: str, error: DBAPIError, waited: float) -> StateConnectionLostError:
    return StateConnectionLostError(
        f"The state database {where} stopped answering ({_reason(error)}); waited {waited:.0f} s "
        "and wrote nothing of this change.",
        fix=f"Start PostgreSQL there or restore the network (`pg_isready` says when it answers; "
        f"{BUSY_TIMEOUT_ENV} sets the wait)",
    )


def _unknown(where: str, error: DBAPIError) -> StateConnectionLostError:
    return StateConnectionLostError(
        f"The state database {where} dropped the connection while a change was being committed "
        f"({_reason(error)}): whether it was recorded is known once the database answers.",
        fix="Check that PostgreSQL runs there (`pg_isready`)",
    )
