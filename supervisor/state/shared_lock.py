"""A task's lock across hosts, and the record of who holds it (supervisor/state/leases.py).

The file lock of supervisor/state/locks.py only sees this host's processes; with a shared database,
`supervisor worker`s and `resume`s on several hosts may reach for the same task. So the task is
also held by a lease row in the shared database, renewed while its holder lives. A holder that
dies, is paused (SIGSTOP) or drops off the network stops renewing it and loses it after the
lease's time to live (a session-level advisory lock lingered for as long as the holder's kernel
kept its TCP session, hours); one that died on this host loses it at once.

With the repository's own SQLite file the file lock is the lock; the lease row is still written,
as the record `status` reads (where the task runs, since when it was last heard from).
"""

from __future__ import annotations

import contextlib
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from supervisor.state import leases

if TYPE_CHECKING:
    from collections.abc import Iterator

    from sqlalchemy.engine import Engine


@contextmanager
def held(url: str, wf_id: int, engine: Engine | None = None) -> Iterator[None]:
    """Hold task `wf_id` in the shared database `url`; WorkflowBusyError while a live process
    on any host holds it. `engine`: the caller's, already open on `url` (a submission's store):
    opening another would connect, and check the schema, a second time."""
    from supervisor.core.errors import WorkflowBusyError
    from supervisor.state.postgres import describe

    with _engine(url, engine) as engine:
        try:
            hold = leases.hold(engine, leases.task_name(wf_id), wf_id)
            lease = hold.__enter__()
        except leases.LeaseBusyError as e:
            raise WorkflowBusyError(
                f"Task {wf_id} is running in another process, perhaps on another host: "
                f"{e.message.removeprefix(leases.task_name(wf_id) + ' is held by ')} "
                f"(shared state database {describe(url)}).",
                f"Wait for it to finish (`supervisor status {wf_id}`), or stop that process; "
                f"then `supervisor resume {wf_id}` continues the task. {e.hint}",
            ) from None
        lease.fences = True
        try:
            with leases.registered(wf_id, lease):
                yield
        finally:
            hold.__exit__(None, None, None)


@contextmanager
def _engine(url: str, engine: Engine | None) -> Iterator[Engine]:
    """`engine`, or one of a store opened on `url` for the block."""
    if engine is not None:
        yield engine
        return
    from supervisor.state.store import Store

    with Store(Path("/nonexistent/state.db"), url=url) as store:
        yield store.engine


@contextmanager
def recorded(db: Path, wf_id: int) -> Iterator[None]:
    """With a SQLite state: the caller holds the task's file lock, so any lease row of the task
    is a dead holder's; this process's replaces it."""
    from sqlalchemy import create_engine, text

    from supervisor.state.busy import busy_timeout

    engine = create_engine(f"sqlite:///{db}", connect_args={"timeout": busy_timeout()})
    lease = None
    try:
        with contextlib.suppress(Exception):  # an older database without the table: no record
            with engine.begin() as conn:
                conn.execute(
                    text("DELETE FROM leases WHERE name = :n"), {"n": leases.task_name(wf_id)}
                )
            lease = leases.acquire(engine, leases.task_name(wf_id), wf_id)
            lease.start()
        with leases.registered(wf_id, lease):
            yield
    finally:
        if lease is not None:
            lease.release()
        engine.dispose()


def is_held(url: str, wf_id: int) -> bool:
    """Whether a live process, on any host, holds task `wf_id`."""
    return wf_id in held_tasks(url, [wf_id])


def held_tasks(url: str, wf_ids: list[int]) -> set[int]:
    """Which of `wf_ids` a live process on some host runs."""
    from supervisor.state.store import Store

    if not wf_ids:
        return set()
    with Store(Path("/nonexistent/state.db"), url=url) as store:
        found = leases.all_leases(store)
    names = {leases.task_name(i): i for i in wf_ids}
    return {names[x.name] for x in found if x.name in names and not x.expired()}
