"""The activity of one component of a fan-out step (supervisor/workflow/steps/dispatched.py):
its worker and gates, on this host's clone and Docker engine, from the integration commit the
step recorded (a sub-component of a split one: from its parent's branch, steps/subplan.py).
Several run at once on several hosts, so it writes no workflow progress: its step runs and
events are appended, its component's new state is returned to the workflow, and the fan-out
step applies it (the engine's one writer of the context).

With a shared remote it fetches the task's refs first and pushes its component's branch after,
under the component's lease: a run whose lease another worker took over (this one paused past
it) pushes and writes nothing (issue 58).
Where it ran (worker identity and clone) is the `component_ran` event, for `supervisor events`.
"""

from __future__ import annotations

import os
import socket
from typing import TYPE_CHECKING, Any

from supervisor.core.config import WorkflowDef
from supervisor.core.errors import SupervisorError
from supervisor.lifecycle.doctor import clis_in_use
from supervisor.lifecycle.opening import open_sandbox
from supervisor.routing import route
from supervisor.state.store import EventSpec
from supervisor.workflow import history
from supervisor.workflow.engine import Reporter
from supervisor.workflow.steps import dispatched, subplan
from supervisor.workflow.steps.base import Outcome, StepContext
from supervisor.workflow.steps.components import ComponentFanOut
from supervisor.workspace import remote

if TYPE_CHECKING:
    from collections.abc import Callable

    from supervisor.lifecycle.opening import Project
    from supervisor.state.store import StepRecord, Store


def identity() -> str:
    """The worker's identity as Temporal names it by default (pid@host)."""
    return f"{os.getpid()}@{socket.gethostname()}"


def run_component(
    project: Project, wf_id: int, cid: str, url: str | None, fence: Callable[[], None] | None = None
) -> dict[str, Any]:
    """`fence`: the component lease's check, before the push (its state writes check the lease
    themselves: supervisor/state/leases.py `held_here`)."""
    with project.store() as store:
        wf = store.workflow(wf_id)
        entry = wf.context.get("components", {}).get(cid, {})
        if wf.status != "running" or entry.get("status") != "running" or not wf.current_step:
            return {"component": cid, "stale": True}  # settled already (a repeated activity)
        seen: dict[str, str] = {}
        if url:
            remote.fetch_for_component(project.root, url, wf)
            seen = remote.component_branches(project.root, url, wf)  # what its push leases on
        definition = WorkflowDef.model_validate(wf.definition)
        name = wf.current_step
        step = definition.steps[name]
        settings = project.settings.model_copy(update={"cli": wf.cli})
        store.add_event(
            wf_id,
            EventSpec(
                "component_ran",
                step=f"{name}/{cid}",
                status="started",
                payload={"component": cid, "worker": identity(), "clone": str(project.root)},
            ),
        )
        sandbox = open_sandbox(project, clis_in_use(definition, settings, project.root))
        try:
            c = StepContext(
                project.root, settings, store, project.workspace, sandbox, Reporter(),
                _appender(store),
            )  # fmt: skip
            chosen = route.for_step(project.root, settings, store, wf.cli, step)
            c.routes = {choice.role: choice.cli for choice in chosen}
            # An earlier attempt of this component on this host (its worker process killed, or
            # given up by Temporal) may have left its container running: it would go on writing
            # to a worktree nobody reads, and spend the model's tokens. Other components of the
            # task may be running here right now: only this component's go.
            sandbox.remove_stale(c.labels(wf_id, f"{name}/{cid}"), run_dirs=False)
            fan = ComponentFanOut(c, wf, name, step)
            # the plan with the sub-plans the engine installed: a sub-component is a component
            fan.work = subplan.work_graph(fan, fan.ctx["plan"])
            try:
                base = fan.base_for(cid, str(fan.ctx["integrated"]))  # its split parent's branch
                outcome = fan._build(fan.work.components[cid], base)
            except SupervisorError as e:
                outcome = Outcome("failed", escalate=e)
            # A failed run's end (its step rows, its gate's events) waits locally for the
            # step's decision on it (ComponentFanOut._hold); here that decision is the step's,
            # in another process: the rows are finished now, what it kept goes back with it.
            held, kept_fields = fan.unsettled.pop(cid, ([], {}))
            c.checkpoint(wf_id, name, fan.ctx, [], held)
            if url:
                branch = fan._branch(cid)
                kept = branch if project.workspace.branch_exists(branch) else None
                attempts = history.attempt_ref(wf_id, f"{name}/{cid}", 0).rsplit("/", 1)[0]
                remote.push_component(project.root, url, kept, attempts, seen, fence)
        finally:
            store.after_record.drain()  # its run's clean-up uses the sandbox
            sandbox.close()
    entry = {**kept_fields, **fan.state[cid]}
    return {
        "component": cid,
        "entry": {k: v for k, v in entry.items() if k in dispatched.ENTRY_FIELDS},
        "trees": kept_fields.get("trees") or fan.ctx.get("trees", {}).get(f"{name}/{cid}"),
        "claims": sorted(p for p, owner in fan.claims.items() if owner == cid),
        "outcome": dispatched.outcome_to(outcome),
        "worker": identity(),
    }


def _appender(store: Store) -> Any:
    """The step context's checkpoint here: the finished step runs and events are appended at
    once; the context itself is returned to the workflow, not written."""

    def checkpoint(
        wf_id: int, step: str, context: dict[str, Any], events: list[EventSpec],
        records: list[StepRecord],
    ) -> None:  # fmt: skip
        for r in records:
            store.finish_step(
                r.step_id, r.status, output=r.output, error=r.error, event=r.event,
                invocation=r.invocation,
            )  # fmt: skip
        for event in events:
            store.add_event(wf_id, event)

    return checkpoint
