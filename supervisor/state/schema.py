"""Every table and index of the state database as SQLAlchemy's, for the store's queries.

The columns are the rows' (supervisor/state/records.py `TABLES`, supervisor/state/columns.py);
this module adds only SQLAlchemy's types for their kinds and the indexes. The events table is
append-only: the store never updates or deletes a row of it. Everything else (workflows, steps,
checkpoints, approvals) is current state, changed one transaction at a time.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    Boolean,
    Column,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    TypeDecorator,
)

from supervisor.state.columns import Column as ColumnSpec
from supervisor.state.columns import Kind, columns
from supervisor.state.records import TABLES


class UtcDateTime(TypeDecorator[datetime]):
    """A time in UTC, read back as a naive datetime from either backend.

    SQLite keeps no zone and gives naive times back; PostgreSQL's `timestamptz` gives them with
    the session's zone. Readers compare and subtract them (elapsed times, waits, windows), so both
    backends give the same kind; a naive time written is taken as UTC, never as the server's
    zone."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is not None and value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value

    def process_result_value(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is not None and value.tzinfo is not None:
            return value.astimezone(UTC).replace(tzinfo=None)
        return value


_TYPES: dict[Kind, Any] = {
    Kind.INTEGER: Integer,
    Kind.VARCHAR: String,
    Kind.TEXT: Text,
    Kind.JSON: JSON,
    Kind.TIME: UtcDateTime,
    Kind.FLOAT: Float,
    Kind.BOOLEAN: Boolean,
}

metadata = MetaData()


def _table(name: str) -> Table:
    """Table `name` as its row declares it (supervisor/state/records.py `TABLES`)."""
    return Table(name, metadata, *(_column(c) for c in columns(TABLES[name])))


def _column(column: ColumnSpec) -> Column[Any]:
    refs = [ForeignKey(column.references)] if column.references else []
    if column.key:
        # A row id is the database's to give; a natural key (a version, a lease's name) is not.
        extra: dict[str, Any] = {"autoincrement": True} if column.row_id else {}
        return Column(column.name, _TYPES[column.kind](), *refs, primary_key=True, **extra)
    return Column(column.name, _TYPES[column.kind](), *refs, nullable=column.nullable)


schema_migrations = _table("schema_migrations")
workflows = _table("workflows")
steps = _table("steps")
events = _table("events")
checkpoints = _table("checkpoints")
approvals = _table("approvals")
invocations = _table("invocations")
leases = _table("leases")
web_tokens = _table("web_tokens")
assert set(metadata.tables) == set(TABLES)

Index("ix_events_workflow", events.c.workflow_id, events.c.id)
Index("ix_events_type", events.c.workflow_id, events.c.type, events.c.id)
Index("ix_steps_workflow", steps.c.workflow_id, steps.c.id)
Index("ix_checkpoints_workflow", checkpoints.c.workflow_id, checkpoints.c.id)
Index("ix_approvals_workflow", approvals.c.workflow_id, approvals.c.id)
Index("ix_invocations_time", invocations.c.timestamp)
Index("ux_web_tokens_digest", web_tokens.c.digest, unique=True)
