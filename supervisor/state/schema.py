"""Every table and index of the state database, in one place.

The events table is append-only: the store never updates or deletes a row of it. Everything else
(workflows, steps, checkpoints, approvals) is current state, changed one transaction at a time.
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


metadata = MetaData()

schema_migrations = Table(
    "schema_migrations",
    metadata,
    Column("version", Integer, primary_key=True),
    Column("name", String, nullable=False),
    Column("applied_at", UtcDateTime(), nullable=False),
)

workflows = Table(
    "workflows",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("description", Text, nullable=False),
    # running | awaiting_approval | completed | failed | interrupted
    Column("status", String, nullable=False),
    Column("current_step", String),
    Column("cli", String, nullable=False),
    Column("base_branch", String),
    Column("base_sha", String, nullable=False),
    Column("task_branch", String, nullable=False),
    # The workflow definition as it was when the task started: a running task keeps it.
    Column("definition", JSON, nullable=False),
    # Data the steps hand to each other (plan, feedback, candidate sha, retry counts).
    Column("context", JSON, nullable=False),
    Column("error", Text),
    Column("created_at", UtcDateTime(), nullable=False),
    Column("updated_at", UtcDateTime(), nullable=False),
)

steps = Table(
    "steps",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("workflow_id", Integer, ForeignKey("workflows.id"), nullable=False),
    Column("name", String, nullable=False),
    Column("attempt", Integer, nullable=False),
    Column("role", String),
    Column("status", String, nullable=False),  # running|succeeded|failed|rejected|interrupted
    Column("worktree", String),
    Column("container_id", String),
    Column("output", JSON),
    Column("error", Text),
    Column("started_at", UtcDateTime(), nullable=False),
    Column("finished_at", UtcDateTime()),
)

events = Table(
    "events",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("workflow_id", Integer, ForeignKey("workflows.id")),
    Column("step", String),
    Column("type", String, nullable=False),
    Column("role", String),
    Column("status", String),
    Column("payload", JSON, nullable=False),
    Column("input_tokens", Integer),
    Column("output_tokens", Integer),
    Column("cost_usd", Float),
    Column("timestamp", UtcDateTime(), nullable=False),
)

checkpoints = Table(
    "checkpoints",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("workflow_id", Integer, ForeignKey("workflows.id"), nullable=False),
    Column("step", String, nullable=False),
    Column("git_sha", String),
    Column("status", String, nullable=False),
    Column("next_step", String),
    Column("timestamp", UtcDateTime(), nullable=False),
)

approvals = Table(
    "approvals",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("workflow_id", Integer, ForeignKey("workflows.id"), nullable=False),
    Column("step", String, nullable=False),
    Column("status", String, nullable=False),  # pending|approved|rejected
    Column("reason", Text),
    Column("requested_at", UtcDateTime(), nullable=False),
    Column("decided_at", UtcDateTime()),
)

invocations = Table(
    "invocations",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("workflow_id", Integer, ForeignKey("workflows.id")),
    Column("step", String),
    Column("role", String, nullable=False),
    Column("cli", String, nullable=False),
    Column("model", String),
    Column("task_type", String),
    Column("success", Boolean, nullable=False),
    Column("retries", Integer, nullable=False),
    Column("duration_s", Float, nullable=False),
    Column("input_tokens", Integer, nullable=False),
    Column("output_tokens", Integer, nullable=False),
    Column("cost_usd", Float, nullable=False),
    Column("error_category", String),
    Column("timestamp", UtcDateTime(), nullable=False),
)

leases = Table(
    "leases",
    metadata,
    Column("name", String, primary_key=True),
    Column("workflow_id", Integer),
    Column("holder", String, nullable=False),
    Column("host", String, nullable=False),
    Column("pid", Integer, nullable=False),
    Column("doing", String, nullable=False),
    Column("heartbeat_at", Float, nullable=False),
    Column("expires_at", Float, nullable=False),
)

Index("ix_events_workflow", events.c.workflow_id, events.c.id)
Index("ix_events_type", events.c.workflow_id, events.c.type, events.c.id)
Index("ix_steps_workflow", steps.c.workflow_id, steps.c.id)
Index("ix_checkpoints_workflow", checkpoints.c.workflow_id, checkpoints.c.id)
Index("ix_approvals_workflow", approvals.c.workflow_id, approvals.c.id)
Index("ix_invocations_time", invocations.c.timestamp)
