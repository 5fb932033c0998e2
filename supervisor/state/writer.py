"""Creating a task with the standard library's sqlite3, for a submission to Temporal.

A submission is a command a person waits for, and importing SQLAlchemy (with the asyncio, ssl and
importlib.metadata it brings) was over a third of its process's CPU (benchmarks/scaleout.py
--submission-only). What a submission writes is small and fixed: the task's row and first events
(`create_workflow`), an event (`add_event`) and, after a failure, the task abandoned
(`update_workflow`). `TaskWriter` writes just those, as `Store` writes them: the same columns
(the rows of supervisor/state/records.py, from which its SQL is made), SQLAlchemy's JSON text
and its "YYYY-MM-DD HH:MM:SS.ffffff" UTC times (supervisor/state/columns.py), one transaction each
taken with `BEGIN IMMEDIATE`, every free text redacted (tests/test_task_writer.py reads its rows
back through `Store`). Like `StateReader`, it opens only a database already at this supervisor's
schema version: creating, migrating or refusing one, and a shared PostgreSQL database, are
`Store`'s business (`open_writer`).
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Protocol

from supervisor.core import faults
from supervisor.core.redaction import redact_value
from supervisor.state.busy import busy_timeout_pragma
from supervisor.state.columns import columns, to_sqlite
from supervisor.state.reader import StateReader
from supervisor.state.records import TABLES, Event, EventSpec, Workflow, now

if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Iterator
    from pathlib import Path

    from supervisor.state.columns import Column
    from supervisor.state.store import Store

# As Store's connections (supervisor/state/store.py `_on_connect`), with its busy timeout.
_PRAGMAS = (
    "PRAGMA journal_mode=WAL",
    "PRAGMA synchronous=NORMAL",
    "PRAGMA foreign_keys=ON",
)


class TaskRows(Protocol):
    """What a submission writes through: `Store` or, on a SQLite database at this schema
    version, `TaskWriter`."""

    def create_workflow(
        self,
        *,
        description: str,
        cli: str,
        base_branch: str | None,
        base_sha: str,
        branch_for_id: Any,
        definition: dict[str, Any],
        first_step: str,
        context: dict[str, Any] | None = None,
        events: list[EventSpec] = (),  # type: ignore[assignment]
    ) -> Workflow: ...

    def add_event(self, wf_id: int | None, spec: EventSpec) -> None: ...

    def update_workflow(
        self,
        wf_id: int,
        *,
        status: str,
        current_step: str | None,
        context: dict[str, Any],
        events: list[EventSpec] = (),  # type: ignore[assignment]
    ) -> None: ...

    def workflow(self, wf_id: int) -> Workflow: ...

    def close(self) -> None: ...


class TaskWriter(StateReader):
    """A submission's writes to `<repo>/.supervisor/state.db` without SQLAlchemy; the same
    signatures as `Store`'s methods of those names."""

    MODE = "rw"

    def __init__(self, conn: sqlite3.Connection, path: Path) -> None:
        super().__init__(conn, path)
        conn.isolation_level = None  # each transaction begun by `_tx`, as Store's
        for pragma in (*_PRAGMAS, busy_timeout_pragma()):
            conn.execute(pragma)

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        """One transaction holding the write lock from its start (see Store._tx)."""
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            yield self.conn
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")
        faults.committed()

    def create_workflow(
        self,
        *,
        description: str,
        cli: str,
        base_branch: str | None,
        base_sha: str,
        branch_for_id: Any,
        definition: dict[str, Any],
        first_step: str,
        context: dict[str, Any] | None = None,
        events: list[EventSpec] = (),  # type: ignore[assignment]
    ) -> Workflow:
        """As Store.create_workflow: `branch_for_id(id)` names its task branch in the same
        transaction."""
        with self._tx() as conn:
            stamp = now()
            description = _clean(description)
            wf_id = _insert(
                conn, Workflow, description=description, status="running",
                current_step=first_step, cli=cli, base_branch=base_branch, base_sha=base_sha,
                task_branch="", definition=definition, context=context or {}, created_at=stamp,
                updated_at=stamp,
            )  # fmt: skip
            _update(conn, Workflow, wf_id, task_branch=branch_for_id(wf_id))
            started = EventSpec("workflow_started", payload={"description": description})
            _append(conn, wf_id, started)
            for spec in events:
                _append(conn, wf_id, spec)
        return self.workflow(wf_id)

    def add_event(self, wf_id: int | None, spec: EventSpec) -> None:
        with self._tx() as conn:
            _append(conn, wf_id, spec)

    def update_workflow(
        self,
        wf_id: int,
        *,
        status: str,
        current_step: str | None,
        context: dict[str, Any],
        events: list[EventSpec] = (),  # type: ignore[assignment]
    ) -> None:
        """As Store.update_workflow (its error cleared, the events that say why)."""
        with self._tx() as conn:
            _update(
                conn, Workflow, wf_id, status=status, current_step=current_step,
                context=_clean(context), error=None, updated_at=now(),
            )  # fmt: skip
            for spec in events:
                _append(conn, wf_id, spec)


def open_writer(path: Path) -> TaskWriter | Store:
    """The light writer when it can serve; otherwise the full store, which creates, migrates or
    refuses the database with its own errors. A shared PostgreSQL database (`state.url`) is
    always written through the store."""
    from supervisor.state.location import state_url

    writer = None if state_url() else TaskWriter.open(path)
    if writer is not None:
        return writer
    from supervisor.state.store import Store

    return Store(path)


def _append(conn: sqlite3.Connection, wf_id: int | None, spec: EventSpec) -> None:
    """As supervisor/state/rows.py `_append`."""
    faults.event_written(spec.type)
    _insert(
        conn, Event, workflow_id=wf_id, step=spec.step, type=spec.type, role=spec.role,
        status=spec.status, payload=_clean(spec.payload or {}), input_tokens=spec.input_tokens,
        output_tokens=spec.output_tokens, cost_usd=spec.cost_usd, timestamp=now(),
    )  # fmt: skip


def _insert(conn: sqlite3.Connection, row: type, **values: Any) -> int:
    """A new row of `row`'s table from its columns' values, as SQLAlchemy's SQLite dialect
    stores them; its id. A column not given is NULL (or refused by the database)."""
    _given(row, values)
    given = [c for c in columns(row) if not c.row_id]
    sql = (
        f"INSERT INTO {_table(row)} ({', '.join(c.name for c in given)}) "
        f"VALUES ({', '.join('?' for _ in given)})"
    )
    new_id = conn.execute(sql, [to_sqlite(c, values.get(c.name)) for c in given]).lastrowid
    assert new_id is not None  # an insert has its key
    return new_id


def _update(conn: sqlite3.Connection, row: type, row_id: int, **values: Any) -> None:
    """Set the given columns of row `row_id` of `row`'s table."""
    table, given = _table(row), _given(row, values)
    sql = f"UPDATE {table} SET {', '.join(f'{c.name} = ?' for c in given)} WHERE id = ?"
    conn.execute(sql, [*(to_sqlite(c, values[c.name]) for c in given), row_id])


def _table(row: type) -> str:
    return next(name for name, declared in TABLES.items() if declared is row)


def _given(row: type, values: dict[str, Any]) -> list[Column]:
    """The columns named in `values`, in the table's order; a name that is none is an error."""
    known = {c.name: c for c in columns(row)}
    if unknown := set(values) - set(known):
        raise ValueError(f"{row.__name__} has no columns {sorted(unknown)}")
    return [c for c in known.values() if c.name in values]


def _clean(value: Any) -> Any:
    return redact_value(value)[0]
