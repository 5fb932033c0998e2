"""The records the state database holds, as plain dataclasses.

Kept apart from `store` (SQLAlchemy) so that the read-only commands, which read with the standard
library's sqlite3 (supervisor.state.reader), build the same records without importing SQLAlchemy.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any


def now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class Workflow:
    id: int
    description: str
    status: str
    current_step: str | None
    cli: str
    base_branch: str | None
    base_sha: str
    task_branch: str
    definition: dict[str, Any]
    context: dict[str, Any]
    error: str | None
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True)
class Event:
    id: int
    workflow_id: int | None
    step: str | None
    type: str
    role: str | None
    status: str | None
    payload: dict[str, Any]
    input_tokens: int | None
    output_tokens: int | None
    cost_usd: float | None
    timestamp: datetime


@dataclass(frozen=True)
class Approval:
    id: int
    workflow_id: int
    step: str
    status: str
    reason: str | None


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
