"""How one row goes into the state database inside a transaction: a step run closed, an event
appended, every free text redacted on its way in (`_clean`). Shared by the Store's writers
(supervisor/state/store.py, supervisor/state/approval_store.py), so each transition can write
them in its own single transaction."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sqlalchemy import insert, select, update

from supervisor.core import faults
from supervisor.core.redaction import redact_value
from supervisor.state import leases
from supervisor.state import schema as t
from supervisor.state.records import now

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

    from supervisor.state.records import EventSpec, StepRecord


def _finish(conn: Connection, record: StepRecord) -> int:
    """Close one step run (its result, metrics row and event); returns its workflow's id."""
    if record.invocation is not None:
        conn.execute(insert(t.invocations).values(**record.invocation, timestamp=now()))
    conn.execute(
        update(t.steps)
        .where(t.steps.c.id == record.step_id)
        .values(
            status=record.status,
            output=_clean(record.output),
            error=_clean(record.error),
            finished_at=now(),
        )
    )
    wf_id = int(
        conn.execute(
            select(t.steps.c.workflow_id).where(t.steps.c.id == record.step_id)
        ).scalar_one()
    )
    if record.event is not None:
        _append(conn, wf_id, record.event)
    return wf_id


def _append(conn: Connection, wf_id: int | None, spec: EventSpec) -> None:
    """Every state change writes an event, so this is where a process that may have lost its
    hold on the task (a worker paused past its lease, supervisor/state/leases.py) is stopped:
    its whole transaction rolls back, and nothing of it lands in a task another worker runs."""
    held = leases.current(wf_id) if wf_id is not None else None
    if held is not None and not held.still_held(conn):
        raise held.refusal()
    faults.event_written(spec.type)
    conn.execute(
        insert(t.events).values(
            workflow_id=wf_id,
            step=spec.step,
            type=spec.type,
            role=spec.role,
            status=spec.status,
            payload=_clean(spec.payload or {}),
            input_tokens=spec.input_tokens,
            output_tokens=spec.output_tokens,
            cost_usd=spec.cost_usd,
            timestamp=now(),
        )
    )


def _clean(value: Any) -> Any:
    """The value with every secret in its strings redacted (None stays None)."""
    return redact_value(value)[0]
