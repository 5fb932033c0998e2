"""A task's lock across hosts, when the state is shared (PostgreSQL).

The file lock of supervisor/state/locks.py only sees this host's processes; with a shared database,
`supervisor worker`s and `resume`s on several hosts may reach for the same task. So the task is
also held by a session-level advisory lock, on a connection of its own kept for as long as the
task runs. PostgreSQL releases it when that session ends: at the end of the run, and when the
holding process dies (its connection closes; TCP keepalives bound how long the session of a host
that vanished lingers), so a crash never leaves a task locked.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import TYPE_CHECKING

from supervisor.errors import WorkflowBusyError

if TYPE_CHECKING:
    from collections.abc import Iterator

TASK_LOCK_CLASS = (
    0x53555056  # "SUPV": the first key of the two-key advisory lock; the task id is the second
)
KEEPALIVE = {
    "keepalives": 1,
    "keepalives_idle": 10,
    "keepalives_interval": 5,
    "keepalives_count": 3,
}


@contextmanager
def held(url: str, wf_id: int) -> Iterator[None]:
    """Hold task `wf_id` in the shared database `url`; WorkflowBusyError while a process on any
    host holds it."""
    from sqlalchemy import text
    from sqlalchemy.exc import OperationalError

    from supervisor.state.postgres import describe, make_engine, unreachable

    engine = make_engine(url, connect_args=KEEPALIVE)
    keys = {"cls": TASK_LOCK_CLASS, "task": wf_id}
    try:
        try:
            conn = engine.connect()
        except OperationalError as e:
            raise unreachable(url, e.orig) from e
        with conn:
            got = conn.execute(text("SELECT pg_try_advisory_lock(:cls, :task)"), keys).scalar()
            conn.commit()  # the lock is the session's; no transaction stays open while it runs
            if not got:
                raise WorkflowBusyError(
                    f"Task {wf_id} is running in another process, perhaps on another host: it "
                    f"holds the task's lock in the shared state database {describe(url)}.",
                    f"Wait for it to finish (`supervisor status {wf_id}`), or stop that process; "
                    f"then `supervisor resume {wf_id}` continues the task.",
                )
            try:
                yield
            finally:
                conn.execute(text("SELECT pg_advisory_unlock(:cls, :task)"), keys)
                conn.commit()
    finally:
        engine.dispose()


def is_held(url: str, wf_id: int) -> bool:
    """Whether some session, on any host, holds task `wf_id`."""
    return wf_id in held_tasks(url, [wf_id])


def held_tasks(url: str, wf_ids: list[int]) -> set[int]:
    """Which of `wf_ids` a process on some host is running (for `status`: a task running on
    another host is not one whose supervisor died)."""
    from sqlalchemy import text

    from supervisor.state.postgres import make_engine

    if not wf_ids:
        return set()
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(
                text(
                    "SELECT objid FROM pg_locks WHERE locktype = 'advisory' AND granted "
                    "AND classid = :cls AND database = "
                    "(SELECT oid FROM pg_database WHERE datname = current_database())"
                ),
                {"cls": TASK_LOCK_CLASS},
            )
            held = {int(r[0]) for r in rows}
    finally:
        engine.dispose()
    return held & set(wf_ids)
