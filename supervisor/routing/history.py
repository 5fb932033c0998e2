"""The recorded runs behind adaptive assignment: a typed snapshot built from the state database.

A worker's exit code says little about its work, so a run counts as a success only when it ended
well *and* nothing sent its step back afterwards: no `retry` event aimed at the same step (a gate
that failed its candidate, a reviewer that rejected it, a plan sent back for refinement) before the
step's next run in that workflow. A gate that failed the candidate when no retry was left sends
nothing back (the task fails there), so a failed `gate` event counts against the step its
definition's `on_fail` names, too: `metrics` once showed an implementer at 100% while half its
candidates failed their gate. Read-only: it never writes the database.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from sqlalchemy import and_, or_, select

from supervisor.routing.adaptive import CliStats, Snapshot
from supervisor.state import schema as t

if TYPE_CHECKING:
    from supervisor.state.store import Store


def snapshot(
    store: Store, role: str, task_type: str, window_days: float, at: datetime | None = None
) -> Snapshot:
    """Every CLI's record for `role` doing `task_type` over the last `window_days`."""
    since = (at or datetime.now(UTC)) - timedelta(days=window_days)
    inv = t.invocations
    with store.engine.connect() as conn:
        runs = [
            dict(r._mapping)
            for r in conn.execute(
                select(inv)
                .where(inv.c.role == role, inv.c.task_type == task_type, inv.c.timestamp >= since)
                .order_by(inv.c.id)
            ).all()
        ]
        sent_back = _sent_back(conn, since)
    return Snapshot(
        role=role, task_type=task_type, window_days=window_days, stats=aggregate(runs, sent_back)
    )


def accepted_runs(store: Store, since: datetime | None) -> list[dict[str, Any]]:
    """Every run since `since` (all time when None), each with `accepted`: first time right."""
    inv = t.invocations
    query = select(inv).order_by(inv.c.id)
    if since is not None:
        query = query.where(inv.c.timestamp >= since)
    with store.engine.connect() as conn:
        runs = [dict(r._mapping) for r in conn.execute(query).all()]
        sent_back = _sent_back(conn, since)
    marked = _accepted(runs, sent_back)
    return [{**r, "accepted": ok} for r, ok in zip(runs, marked, strict=True)]


def aggregate(
    runs: list[dict[str, Any]], sent_back: dict[tuple[int, str], list[datetime]]
) -> dict[str, CliStats]:
    """Per CLI: runs, first-time-right successes, and mean retries, seconds and cost."""
    groups: dict[str, list[tuple[dict[str, Any], bool]]] = defaultdict(list)
    for run, ok in zip(runs, _accepted(runs, sent_back), strict=True):
        groups[run["cli"]].append((run, ok))
    stats = {}
    for cli, items in sorted(groups.items()):
        n = len(items)
        stats[cli] = CliStats(
            cli=cli,
            runs=n,
            successes=sum(1 for _, ok in items if ok),
            avg_retries=sum(r["retries"] for r, _ in items) / n,
            avg_seconds=sum(r["duration_s"] for r, _ in items) / n,
            avg_cost_usd=sum(r["cost_usd"] for r, _ in items) / n,
        )
    return stats


def _sent_back(conn: Any, since: datetime | None) -> dict[tuple[int, str], list[datetime]]:
    """(workflow, step) -> when work was sent back to that step: a `retry` event aimed at it, or
    a gate whose `on_fail` is that step failing its candidate."""
    ev = t.events
    failed_gate = and_(ev.c.type == "gate", ev.c.status == "failed")
    query = select(ev.c.workflow_id, ev.c.type, ev.c.step, ev.c.timestamp).where(
        or_(ev.c.type == "retry", failed_gate)
    )
    if since is not None:
        query = query.where(ev.c.timestamp >= since)
    rows = [r for r in conn.execute(query).all() if r[0] is not None and r[2]]
    blamed = _gate_targets(conn, {wf_id for wf_id, kind, _, _ in rows if kind == "gate"})
    found: dict[tuple[int, str], list[datetime]] = defaultdict(list)
    for wf_id, kind, step, when in rows:
        target = step if kind == "retry" else blamed.get((wf_id, step_of(step)))
        if target:
            found[(wf_id, target)].append(when)
    return found


def _gate_targets(conn: Any, workflows: set[int]) -> dict[tuple[int, str], str]:
    """(workflow, gate step) -> the step whose work that gate judges: its `on_fail`, in the
    definition the task started with (a gate with none retries itself and blames no one)."""
    if not workflows:
        return {}
    wf = t.workflows
    query = select(wf.c.id, wf.c.definition).where(wf.c.id.in_(sorted(workflows)))
    found = {}
    for wf_id, definition in conn.execute(query).all():
        steps = (definition or {}).get("steps") or {}
        for name, step in steps.items():
            if isinstance(step, dict) and step.get("gate") and step.get("on_fail"):
                found[(wf_id, name)] = str(step["on_fail"])
    return found


def _accepted(
    runs: list[dict[str, Any]], sent_back: dict[tuple[int, str], list[datetime]]
) -> list[bool]:
    """For each run: it succeeded and no `retry` reached its step before the step's next run."""
    later: dict[int, datetime | None] = {}
    last_seen: dict[tuple[Any, str, str], int] = {}
    for index, run in enumerate(runs):
        key = (run["workflow_id"], step_of(run["step"]), run["role"])
        if key in last_seen:
            later[last_seen[key]] = run["timestamp"]
        last_seen[key] = index
    out = []
    for index, run in enumerate(runs):
        if not run["success"]:
            out.append(False)
            continue
        start, end = run["timestamp"], later.get(index)
        times = sent_back.get((run["workflow_id"], step_of(run["step"])), [])
        out.append(not any(start <= when and (end is None or when <= end) for when in times))
    return out


def step_of(name: str | None) -> str:
    """A component's run (`implement/calc`) answers for its step (`implement`)."""
    return (name or "").split("/", 1)[0]
