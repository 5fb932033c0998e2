"""What one export reads of a task's state: its row, steps, events, worker runs and approvals,
and what earlier exports of it already sent (their `telemetry_exported` events).

Why the marks are events: they live in the task's own state, shared by every host of a team, so a
run resumed anywhere sends only what no export sent before and links to the run it continues.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sqlalchemy import select

from supervisor.state import schema as t

if TYPE_CHECKING:
    from supervisor.state.store import Event, Store, Workflow

MARK = "telemetry_exported"
FAILED = "telemetry_failed"


@dataclass
class Sent:
    """What earlier exports of the task sent."""

    runs: int = 0
    steps: set[int] = field(default_factory=set)
    approvals: set[int] = field(default_factory=set)
    last_event: int = 0
    failures: int = 0


@dataclass
class Snapshot:
    """The task's state as one export sees it."""

    wf: Workflow
    steps: list[dict[str, Any]]
    events: list[Event]
    invocations: list[dict[str, Any]]
    approvals: list[dict[str, Any]]
    sent: Sent


def snapshot(store: Store, wf_id: int) -> Snapshot:
    wf = store.workflow(wf_id)
    events = store.events(wf_id)
    with store.engine.connect() as conn:
        invocations = conn.execute(
            select(t.invocations)
            .where(t.invocations.c.workflow_id == wf_id)
            .order_by(t.invocations.c.id)
        ).all()
        approvals = conn.execute(
            select(t.approvals).where(t.approvals.c.workflow_id == wf_id).order_by(t.approvals.c.id)
        ).all()
    return Snapshot(
        wf,
        store.steps(wf_id),
        events,
        [dict(r._mapping) for r in invocations],
        [dict(r._mapping) for r in approvals],
        sent(events),
    )


def sent(events: list[Event]) -> Sent:
    found = Sent()
    for event in events:
        if event.type == FAILED:
            found.failures += 1
        if event.type != MARK:
            continue
        found.runs += 1
        found.steps.update(_ids(event.payload.get("steps")))
        found.approvals.update(_ids(event.payload.get("approvals")))
        found.last_event = max(found.last_event, int(event.payload.get("last_event") or 0))
    return found


def _ids(value: Any) -> list[int]:
    return [v for v in value if isinstance(v, int)] if isinstance(value, list) else []
