"""One truth about who runs a task, for `status`: read from the leases (supervisor/state/leases.py)
and the task's events, the same on every host that shares the state.

A task Temporal owns (a `temporal_submitted` event) is never "no supervisor": it is queued on its
task queue (with or without a worker polling it), running on a named host, stalled (its holder
silent past its lease), or failed in Temporal with the reason the workflow recorded.
"""

from __future__ import annotations

import contextlib
import time
from typing import TYPE_CHECKING, Any

from supervisor.core.plural import counted
from supervisor.state import leases

if TYPE_CHECKING:
    from supervisor.state.records import Workflow

SUBMITTED = "temporal_submitted"
FAILED = "temporal_failed"
ROUTED = "step_routed"  # the worker pools' events (supervisor/temporal/routes.py)
RAN = "step_worker"
FELL_BACK = "pool_fallback"


def labels(state: Any, found: list[Workflow], pids: dict[int, int | None]) -> dict[int, str]:
    """The status to show for each running or Temporal-failed task in `found`."""
    held: list[leases.Lease] = []
    with contextlib.suppress(Exception):  # a database older than the leases: no records
        held = [x for x in leases.all_leases(state) if not x.dead_here()]
    now = time.time()
    shown: dict[int, str] = {}
    for wf in found:
        if wf.status not in ("running", "failed"):
            continue
        last = state.last_event(wf.id)
        found_submitted = state.last_event(wf.id, SUBMITTED)
        submitted = found_submitted.payload if found_submitted else None
        if wf.status == "failed":
            if last is not None and last.type == FAILED:
                shown[wf.id] = f"failed in Temporal: {last.payload.get('reason', '?')}"
            elif last is not None and last.type == SUBMITTED:  # handed back by `resume`
                shown[wf.id] = "resumed: " + _running(wf, held, submitted, None, now)
            continue
        shown[wf.id] = _running(wf, held, submitted, pids.get(wf.id), now, _pool(state, wf))
    return shown


def _pool(state: Any, wf: Workflow) -> dict[str, Any] | None:
    """The worker pool the task's next step waits for (its `step_routed` event, when no step
    started since), with what its fallback said, if it fell back."""
    routed = state.last_event(wf.id, ROUTED)
    if routed is None or routed.payload.get("step") != wf.current_step:
        return None
    ran = state.last_event(wf.id, RAN)
    if ran is not None and ran.id > routed.id:
        return None
    fell = state.last_event(wf.id, FELL_BACK)
    found = dict(routed.payload)
    if fell is not None and fell.id > routed.id:
        found["fell_back"] = fell.payload.get("said", "fell back")
    return found


def polled_queues(held: list[leases.Lease], now: float) -> set[str]:
    """The queues live workers poll (`worker:<queue>:<holder>` leases), pools' included."""
    prefix = "worker:"
    return {
        x.name[len(prefix) :].rsplit(":", 1)[0]
        for x in held
        if x.name.startswith(prefix) and not x.expired(now)
    }


def _queued(queue: str, pool: dict[str, Any] | None, held: list[leases.Lease], now: float,
            wf_id: int | None = None) -> str:  # fmt: skip
    """`queued on Q (N workers polling)`, or for a pool's step `queued for isolated workers
    (none polling)`; a task on a queue no worker polls while workers poll others (submitted
    under an old name: before per-repository queues, or before temporal.task_queue changed;
    a database is one repository's, so they are its workers) says where `resume` hands it."""
    name = None if pool is None else str(pool.get("pool"))
    if pool is not None and pool.get("fell_back"):
        name = pool.get("fallback")
    polled = f"{queue}@{name}" if name else queue
    polling = [x for x in held if x.name.startswith(f"worker:{polled}:") and not x.expired(now)]
    who = f"{counted(len(polling), 'worker')} polling" if polling else "none polling"
    if pool is not None and pool.get("fell_back"):
        return f"queued on {polled} ({who}): {pool['fell_back']}"
    if pool is not None:
        then = (
            ""
            if pool.get("required")
            else f"; falls back to {pool.get('fallback') or 'any worker'} after "
            f"{float(pool.get('wait_s') or 0):g} s"
        )
        return f"queued for {name} workers ({who}{then})"
    if not polling:
        others = sorted(q for q in polled_queues(held, now) if "@" not in q)
        if others:
            return (
                f"stranded on queue {queue}, which no worker polls (workers poll "
                f"{', '.join(others)}): `supervisor resume {wf_id}` hands it to theirs"
            )
        return f"queued (no worker on queue {queue})"
    return f"queued on {queue} ({who})"


def _running(
    wf: Workflow,
    held: list[leases.Lease],
    submitted: dict[str, Any] | None,
    pid: int | None,
    now: float,
    pool: dict[str, Any] | None = None,
) -> str:
    task = leases.task_name(wf.id)
    mine = [x for x in held if x.name == task or x.name.startswith(task + "/")]
    stalled = [x for x in mine if x.expired(now)]
    if stalled:
        x = stalled[0]
        what = f" ({x.doing})" if x.doing else ""
        return f"stalled: worker {x.host} silent for {x.silent_for(now):.0f} s{what}"
    if mine:
        where = [
            f"{x.host} ({x.doing or 'step ' + str(wf.current_step or '-')})"
            for x in mine
            if x.name != task or len(mine) == 1
        ]
        return "running on " + ", ".join(where)
    if submitted is not None:
        return _queued(str(submitted.get("task_queue", "?")), pool, held, now, wf.id)
    if pid is not None:
        return "running"
    return "running (no supervisor)"


def runner_alive(state: Any, wf: Workflow) -> bool | None:
    """Whether Temporal's runner still drives task `wf`, for `status --watch` (None: the task is
    not Temporal's; its runner is a local process, whose pid says). Alive while a live process
    holds the task or one of its components, or a worker polls the queue it was submitted to:
    between two activities the task holds no lease, and a stalled holder's step goes to any
    worker of the queue. No local pid ever runs such a task, so a pid cannot say (issue 58:
    the watch gave up after two refreshes while workers ran the task)."""
    found = state.last_event(wf.id, SUBMITTED)
    if found is None:
        return None
    now = time.time()
    task = leases.task_name(wf.id)
    polling = f"worker:{found.payload.get('task_queue', '?')}:"
    return any(
        x.name == task or x.name.startswith((task + "/", polling))
        for x in leases.all_leases(state)
        if not x.expired(now) and not x.dead_here()
    )
