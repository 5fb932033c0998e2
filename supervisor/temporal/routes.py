"""The worker pools' side of a worker's activities (docs/worker-pools.md): which pool a task's
step belongs to, and the events that say where each step went and ran.

- `step_routed`: the next step goes to a pool (the submission for the first step, the step's
  activity for the next one): `status` says `queued for isolated workers (none polling)`;
- `step_worker`: a step or component started on this worker: its pool and identity
  (`host-pid`), one event per run, in the event log of every face;
- `pool_fallback`: no worker of a preferred pool took the step within its wait; it went to the
  fallback.

The route itself is the routing policy's (supervisor/routing/pools.py), from the task's pinned
workflow and the role files, so the workflow (supervisor/temporal/workflow.py) only carries it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from supervisor.core.config import WorkflowDef
from supervisor.routing.pools import Route, pool_of, step_route
from supervisor.state.records import EventSpec

if TYPE_CHECKING:
    from supervisor.lifecycle.opening import Project
    from supervisor.state.records import Workflow

ROUTED = "step_routed"
RAN = "step_worker"
FELL_BACK = "pool_fallback"


def route_of(project: Project, wf: Workflow) -> Route | None:
    """The route of `wf`'s current step (None: any worker)."""
    if wf.current_step is None or not wf.definition:
        return None
    definition = WorkflowDef.model_validate(wf.definition)
    return step_route(definition, wf.current_step, project.settings, project.root)


def misrouted(project: Project, wf_id: int, given: dict[str, Any] | None) -> Route | None:
    """The current step's route when the workflow sent the step with another one (None: run
    it here). A step sent to its route's pool, or to that route's fallback, runs where it is."""
    with project.store() as store:
        wf = store.workflow(wf_id)
    if wf.status != "running":
        return None
    route = route_of(project, wf)
    if route is None or route.same_place(Route.from_data(given)):
        return None
    record_routed(project, wf, route)
    return route


def next_route(project: Project, wf: Workflow) -> dict[str, Any] | None:
    """After a step: the route of the step the task goes to, recorded when it names a pool."""
    if wf.status != "running":
        return None
    route = route_of(project, wf)
    if route is None:
        return None
    record_routed(project, wf, route)
    return route.data()


def record_routed(project: Project, wf: Workflow, route: Route) -> None:
    payload = {"step": wf.current_step, **route.data()}
    with project.store() as store:
        store.add_event(wf.id, EventSpec(ROUTED, step=wf.current_step, role=route.role,
                                         status="queued", payload=payload))  # fmt: skip


def record_ran(project: Project, wf_id: int, queue: str, worker: str,
               component: str | None = None) -> None:  # fmt: skip
    """A step (or one of its components) started on `worker`, polling `queue`."""
    with project.store() as store:
        wf = store.workflow(wf_id)
        payload = {"step": wf.current_step, "pool": pool_of(queue), "queue": queue,
                   "worker": worker}  # fmt: skip
        if component is not None:
            payload["component"] = component
        store.add_event(wf_id, EventSpec(RAN, step=wf.current_step, status="started",
                                         payload=payload))  # fmt: skip


def record_fallback(project: Project, wf_id: int, route: dict[str, Any]) -> None:
    """No worker of the preferred pool took the step within its wait."""
    with project.store() as store:
        wf = store.workflow(wf_id)
        fallback = route.get("fallback") or "any worker"
        said = (
            f"fell back from {route['pool']} to {fallback} after {route.get('wait_s', 0):g} s: "
            f"no {route['pool']} worker took the step"
        )
        payload = {"step": wf.current_step, **route, "said": said}
        store.add_event(wf_id, EventSpec(FELL_BACK, step=wf.current_step, role=route.get("role"),
                                         status="fallback", payload=payload))  # fmt: skip
