"""The Store's approvals: the latest one of a workflow, a person's decision, and the votes of a
policy that needs several distinct approvers, each in one transaction.

A mixin of `Store` (supervisor/state/store.py), kept apart because approvals are their own
business: `approve` and `reject` use them, the engine only asks for one (`request_approval`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlalchemy import select, update

from supervisor.core.errors import StateError
from supervisor.state import schema as t
from supervisor.state.columns import names
from supervisor.state.records import Approval, EventSpec, now
from supervisor.state.rows import _append, _clean
from supervisor.state.status_label import DECISION_KEY

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    from sqlalchemy.engine import Connection, Engine


class ApprovalStore:
    """Approvals in `<repo>/.supervisor/state.db`; `Store` supplies the engine and `_tx`."""

    engine: Engine

    if TYPE_CHECKING:

        def _tx(self) -> AbstractContextManager[Connection]: ...

    def latest_approval(self, wf_id: int) -> Approval | None:
        with self.engine.connect() as conn:
            row = conn.execute(
                select(t.approvals)
                .where(t.approvals.c.workflow_id == wf_id)
                .order_by(t.approvals.c.id.desc())
                .limit(1)
            ).first()
        if row is None:
            return None
        m = row._mapping
        return Approval(**{name: m[name] for name in names(Approval)})

    def decide_approval(
        self, approval_id: int, decision: str, reason: str | None, approver: str | None = None
    ) -> None:
        """Record a human decision; only a pending approval can be decided (checked in SQL)."""
        with self._tx() as conn:
            result = conn.execute(
                update(t.approvals)
                .where(t.approvals.c.id == approval_id, t.approvals.c.status == "pending")
                .values(status=decision, reason=_clean(reason), decided_at=now())
            )
            if result.rowcount != 1:
                raise StateError(
                    "That approval was already decided.",
                    "Run `supervisor status <id>` to see where the workflow stands.",
                )
            row = conn.execute(
                select(t.approvals.c.workflow_id, t.approvals.c.step).where(
                    t.approvals.c.id == approval_id
                )
            ).one()
            _record_decision(conn, row[0], approval_id, decision)
            _append(
                conn,
                row[0],
                EventSpec(
                    "approval_decided",
                    step=row[1],
                    status=decision,
                    payload={
                        **({"reason": reason} if reason else {}),
                        **({"approver": approver} if approver else {}),
                    },
                ),
            )

    def vote_approval(self, approval_id: int, approver: str, required: int) -> list[str]:
        """One person's approval of a pending approval that needs `required` distinct people
        (supervisor/policy/approval_policy.py); the approval is decided with the last one. Every
        vote
        is an `approval_vote` event; all in one transaction. The approvers so far."""
        with self._tx() as conn:
            row = conn.execute(  # the row lock orders concurrent voters (PostgreSQL)
                select(t.approvals.c.workflow_id, t.approvals.c.step, t.approvals.c.status)
                .where(t.approvals.c.id == approval_id)
                .with_for_update()
            ).one()
            if row[2] != "pending":
                raise StateError(
                    "That approval was already decided.",
                    "Run `supervisor status <id>` to see where the workflow stands.",
                )
            votes = conn.execute(
                select(t.events.c.payload).where(
                    t.events.c.workflow_id == row[0], t.events.c.type == "approval_vote"
                )
            ).all()
            given = [v[0]["approver"] for v in votes if v[0].get("approval") == approval_id]
            if approver in given:
                raise StateError(
                    f"{approver} already approved this (approvals so far: {', '.join(given)}); "
                    f"it needs {required} distinct approvers.",
                    "Ask another approver (`supervisor approve <id> --as <their email>`).",
                )
            given.append(approver)
            context = conn.execute(
                select(t.workflows.c.context).where(t.workflows.c.id == row[0])
            ).scalar_one()
            if isinstance(context.get("risk"), dict):
                context = {**context, "risk": {**context["risk"], "approved_by": given}}
                conn.execute(
                    update(t.workflows).where(t.workflows.c.id == row[0]).values(context=context)
                )
            payload = {"approval": approval_id, "approver": approver, "required": required}
            _append(conn, row[0], EventSpec("approval_vote", step=row[1], payload=payload))
            if len(given) >= required:
                conn.execute(
                    update(t.approvals)
                    .where(t.approvals.c.id == approval_id)
                    .values(status="approved", reason=None, decided_at=now())
                )
                decided = {"approvers": given}
                _record_decision(conn, row[0], approval_id, "approved")
                _append(
                    conn,
                    row[0],
                    EventSpec("approval_decided", step=row[1], status="approved", payload=decided),
                )
        return given


def _record_decision(conn: Connection, wf_id: int, approval_id: int, decision: str) -> None:
    """The decision, in the workflow's own row: `status` and the TUI list read workflows only,
    and a decided approval must not still look like one waiting for a person."""
    context = conn.execute(
        select(t.workflows.c.context).where(t.workflows.c.id == wf_id)
    ).scalar_one()
    marked = {**context, DECISION_KEY: {"approval": approval_id, "status": decision}}
    conn.execute(update(t.workflows).where(t.workflows.c.id == wf_id).values(context=marked))
