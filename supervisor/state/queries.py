"""The Store's questions: steps, invocations, events, usage and checkpoints read back, and the
database's own health. Read-only, so kept apart from the store's transactions (store.py), whose
class inherits them (a dropped PostgreSQL connection retries them as any Store method)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sqlalchemy import func, select, text

from supervisor.state import postgres
from supervisor.state import schema as t
from supervisor.state.approval_store import ApprovalStore
from supervisor.state.records import Event

if TYPE_CHECKING:
    from collections.abc import Iterator
    from datetime import datetime


class StoreQueries(ApprovalStore):
    """Reads of `<repo>/.supervisor/state.db` (or the shared database); `Store` supplies the
    engine and its `url`."""

    url: str | None

    def running_steps(self, wf_id: int) -> list[dict[str, Any]]:
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(t.steps).where(t.steps.c.workflow_id == wf_id, t.steps.c.status == "running")
            ).all()
        return [dict(r._mapping) for r in rows]

    def steps(self, wf_id: int) -> list[dict[str, Any]]:
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(t.steps).where(t.steps.c.workflow_id == wf_id).order_by(t.steps.c.id)
            ).all()
        return [dict(r._mapping) for r in rows]

    def count_steps(self, wf_id: int, name: str | None = None, role: str | None = None) -> int:
        query = select(func.count()).select_from(t.steps).where(t.steps.c.workflow_id == wf_id)
        if name is not None:
            query = query.where(t.steps.c.name == name)
        if role is not None:
            query = query.where(t.steps.c.role == role)
        with self.engine.connect() as conn:
            return int(conn.execute(query).scalar_one())

    def invocations(self, since: datetime | None = None) -> list[dict[str, Any]]:
        query = select(t.invocations).order_by(t.invocations.c.id)
        if since is not None:
            query = query.where(t.invocations.c.timestamp >= since)
        with self.engine.connect() as conn:
            return [dict(r._mapping) for r in conn.execute(query).all()]

    def events(
        self,
        wf_id: int,
        *,
        after_id: int = 0,
        limit: int | None = None,
        of_type: str | None = None,
    ) -> list[Event]:
        query = (
            select(t.events)
            .where(t.events.c.workflow_id == wf_id, t.events.c.id > after_id)
            .order_by(t.events.c.id)
        )
        if of_type is not None:  # one kind out of a long log, without reading the rest
            query = query.where(t.events.c.type == of_type)
        if limit is not None:
            query = query.limit(limit)
        with self.engine.connect() as conn:
            return [Event(**r._mapping) for r in conn.execute(query).all()]

    def last_event(self, wf_id: int, of_type: str | None = None) -> Event | None:
        """The newest event (of one type), as StateReader.last_event."""
        query = select(t.events).where(t.events.c.workflow_id == wf_id)
        if of_type is not None:
            query = query.where(t.events.c.type == of_type)
        with self.engine.connect() as conn:
            row = conn.execute(query.order_by(t.events.c.id.desc()).limit(1)).first()
        return Event(**row._mapping) if row else None

    def usage_totals(self, wf_id: int, step: str | None = None) -> dict[str, float]:
        """What the workflow's workers spent; with `step`, that step's (its components too)."""
        where = [t.events.c.workflow_id == wf_id]
        if step is not None:
            where.append(
                (t.events.c.step == step) | t.events.c.step.startswith(f"{step}/", autoescape=True)
            )
        with self.engine.connect() as conn:
            row = conn.execute(
                select(
                    func.coalesce(func.sum(t.events.c.input_tokens), 0),
                    func.coalesce(func.sum(t.events.c.output_tokens), 0),
                    func.coalesce(func.sum(t.events.c.cost_usd), 0.0),
                ).where(*where)
            ).one()
        return {"input_tokens": row[0], "output_tokens": row[1], "cost_usd": float(row[2])}

    def checkpoints(self, wf_id: int) -> list[dict[str, Any]]:
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(t.checkpoints)
                .where(t.checkpoints.c.workflow_id == wf_id)
                .order_by(t.checkpoints.c.id)
            ).all()
        return [dict(r._mapping) for r in rows]

    def integrity_ok(self) -> bool:
        with self.engine.connect() as conn:
            if self.url:  # PostgreSQL checks its pages itself; answering at all is the test
                return bool(conn.execute(text("SELECT 1")).scalar_one() == 1)
            return bool(conn.execute(text("PRAGMA integrity_check")).scalar_one() == "ok")

    def iter_tables(self) -> Iterator[str]:
        with self.engine.connect() as conn:
            if self.url:
                yield from postgres.table_names(conn)
                return
            yield from conn.execute(
                text("SELECT name FROM sqlite_master WHERE type='table' ORDER BY name")
            ).scalars()
