"""The records the state database holds, as plain dataclasses: every table's columns, written once.

Each table's row is a dataclass whose fields are its columns, in order (`TABLES`): the store's
SQLAlchemy tables (supervisor/state/schema.py), the standard library's reader and fast writer
(supervisor/state/reader.py, writer.py) and the records they return are all made from these
(supervisor/state/columns.py says how a field is a column). Kept apart from `store` (SQLAlchemy)
so that the read-only commands build the same records without importing SQLAlchemy.
"""

# No `from __future__ import annotations`: the fields' types are the columns' descriptions,
# read at run time (supervisor/state/columns.py) without evaluating strings.
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated, Any

from supervisor.state.columns import FreeText, Json, Mark, RowId, WorkflowId


def now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class Workflow:
    id: RowId
    description: FreeText
    status: str  # running | awaiting_approval | completed | failed | interrupted
    current_step: str | None
    cli: str
    base_branch: str | None
    base_sha: str
    task_branch: str
    definition: Json  # the workflow definition as it was when the task started: it keeps it
    context: Json  # data the steps hand to each other (plan, feedback, candidate sha, retries)
    error: FreeText | None
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True)
class Event:
    """A row of the events table, which is append-only: nothing updates or deletes one."""

    id: RowId
    workflow_id: WorkflowId | None
    step: str | None
    type: str
    role: str | None
    status: str | None
    payload: Json
    input_tokens: int | None
    output_tokens: int | None
    cost_usd: float | None
    timestamp: datetime


@dataclass(frozen=True)
class Approval:
    """What `latest_approval` answers: an approval's row without its times (ApprovalRow)."""

    id: RowId
    workflow_id: WorkflowId
    step: str
    status: str  # pending | approved | rejected
    reason: FreeText | None


class ApprovalRow(Approval):
    """The approvals table's columns: `Approval`'s and its times."""

    requested_at: datetime
    decided_at: datetime | None


# The tables whose rows the store and the reader give as dicts are declared by plain classes:
# their fields are all that is read of them (supervisor/state/columns.py), and a dataclass's
# making costs the read-only commands' start-up.


class StepRow:
    """One run (attempt) of a step."""

    id: RowId
    workflow_id: WorkflowId
    name: str
    attempt: int
    role: str | None
    status: str  # running | succeeded | failed | rejected | interrupted
    worktree: str | None
    container_id: str | None
    output: Json | None
    error: FreeText | None
    started_at: datetime
    finished_at: datetime | None


class CheckpointRow:
    id: RowId
    workflow_id: WorkflowId
    step: str
    git_sha: str | None
    status: str
    next_step: str | None
    timestamp: datetime


class InvocationRow:
    """One worker's run, for routing's statistics (supervisor/routing/)."""

    id: RowId
    workflow_id: WorkflowId | None
    step: str | None
    role: str
    cli: str
    model: str | None
    task_type: str | None
    success: bool
    retries: int
    duration_s: float
    input_tokens: int
    output_tokens: int
    cost_usd: float
    error_category: str | None
    timestamp: datetime


@dataclass(frozen=True)
class LeaseRow:
    """Who holds what (supervisor/state/leases.py `Lease`); times are epoch seconds."""

    name: Annotated[str, Mark.KEY]
    workflow_id: int | None
    holder: str
    host: str
    pid: int
    doing: str
    heartbeat_at: float
    expires_at: float


class WebTokenRow:
    """A personal sign-in token of `supervisor web` in team mode (supervisor/state/web_tokens.py):
    only the token's sha256 digest is kept, so the database never holds what signs a person in."""

    id: RowId
    email: str
    digest: str  # unique (schema.py, the migration's index)
    created_at: datetime
    revoked_at: datetime | None
    last_used_at: datetime | None


class MigrationRow:
    version: Annotated[int, Mark.KEY]
    name: str
    applied_at: datetime


@dataclass(frozen=True)
class EventSpec:
    """An event to append, built by the caller and written inside another state change."""

    type: str
    step: str | None = None
    role: str | None = None
    status: str | None = None
    payload: dict[str, Any] | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    cost_usd: float | None = None


@dataclass(frozen=True)
class StepRecord:
    """A finished step run, not yet written: it commits in the same transaction as the workflow's
    move (Store.transition), so a crash never keeps a step done while the workflow forgets it."""

    step_id: int
    status: str
    output: dict[str, Any] | None = None
    error: str | None = None
    event: EventSpec | None = None
    invocation: dict[str, Any] | None = None


TABLES: dict[str, type] = {
    "schema_migrations": MigrationRow,
    "workflows": Workflow,
    "steps": StepRow,
    "events": Event,
    "checkpoints": CheckpointRow,
    "approvals": ApprovalRow,
    "invocations": InvocationRow,
    "leases": LeaseRow,
    "web_tokens": WebTokenRow,
}
"""Every table of the state database and its row."""
