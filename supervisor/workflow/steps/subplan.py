"""The component fan-out's part in recursive decomposition: it acts, the engine decides.

What the fan-out does here (supervisor/workflow/decompose.py decides what the tree becomes):

- asks the planner for a sub-plan of one component (the `subplan.j2` prompt), validates it
  (supervisor.workflow.decompose.validate_subplan) and hands it, or the reason it is refused, to
  the engine as an EXPAND outcome;
- records a split the engine must decide on: a worker's TOO_LARGE, a component whose retries are
  spent, a planned scope over the limits, a QA pass that keeps failing;
- runs a split component's QA pass once its sub-components are merged into its branch: its gates
  on the merged work, or, after a failed pass, one worker fixing that merged work first.

Sub-components are ordinary components of the fan-out's work graph (the tree flattened), so the
file-ownership rules, the parallel batches and resume after a kill are the fan-out's own. Under
the Temporal runner too: the step (its activity) asks the planner and records splits as here, and
each sub-component, or a split one's QA pass, is an activity of its own from its parent's branch
(supervisor/temporal/components.py), its result settled by the step as a local one's.
"""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Protocol

from supervisor.context import prompts
from supervisor.context.assemble import scope_tokens
from supervisor.context.roles import load_role
from supervisor.core.dag import WorkGraph, flatten
from supervisor.core.schemas import PlanOutput
from supervisor.state.store import EventSpec
from supervisor.workflow import decompose
from supervisor.workflow.steps.base import Outcome
from supervisor.workflow.steps.worker import run_worker
from supervisor.workflow.steps.worker_run import component_task
from supervisor.workspace.treedata import CommitFiles

if TYPE_CHECKING:
    import threading

    from supervisor.core.config import StepDef
    from supervisor.core.dag import Component
    from supervisor.core.projects import ProjectMap
    from supervisor.state.store import StepRecord, Workflow
    from supervisor.workflow.steps.base import StepContext


class ComponentFanOut(Protocol):
    """What of the fan-out (steps/components.py) this module uses: it imports this module."""

    c: StepContext
    wf: Workflow
    name: str
    step: StepDef
    ctx: dict[str, Any]
    state: dict[str, dict[str, Any]]
    lock: threading.Lock
    tree: decompose.Tree
    flat_plan: dict[str, Any] | None
    splitting: list[str]
    projects: ProjectMap
    pending_records: list[StepRecord]

    def _save(self, cid: str, **fields: Any) -> None: ...
    def _hold(self, cid: str, records: list[StepRecord], **fields: Any) -> None: ...
    def _view(self) -> Workflow: ...
    def _branch(self, cid: str) -> str: ...
    def _gate_and_hand_over(self, cid: str) -> Outcome: ...
    def base_for(self, cid: str, integrated: str) -> str: ...
    def snapshot(self) -> dict[str, Any]: ...


PENDING = ("requested", "proposed", "invalid", "qa_failed")
"""Node statuses the engine has not settled yet: the fan-out hands them over before anything."""


def work_graph(fan: ComponentFanOut, plan: dict[str, Any]) -> WorkGraph:
    """The fan-out's work graph: the plan with its installed sub-plans."""
    children = fan.tree.children()
    flat = flatten(plan, children) if children else plan
    fan.flat_plan = flat
    return WorkGraph.from_plan(PlanOutput.model_validate(flat), fan.projects)


def before_dispatch(fan: ComponentFanOut, work: WorkGraph, integrated: str) -> Outcome | None:
    """What comes before any component runs: a blocked tree a person let go on is unblocked;
    an unsettled change goes to the engine at once (a crash may have come before it did); an
    asked-for sub-plan is planned."""
    limits = fan.c.settings.limits.decomposition
    decompose.unblock(fan.tree, fan.state, limits.max_depth)
    if any(n.status in PENDING for n in fan.tree.nodes.values()):
        return _expand(fan, [])
    planning = [cid for cid, n in fan.tree.nodes.items() if n.status == "planning"]
    if not planning:
        return None
    records: list[StepRecord] = []
    for cid in planning:
        outcome = _ask_planner(fan, work, cid, integrated)
        if outcome is not None:  # a transient error or an escalation: the engine's as always
            return replace(outcome, context=fan.snapshot(), records=[*records, *outcome.records])
        records += fan.pending_records
        fan.pending_records = []
    return _expand(fan, records)


def _expand(fan: ComponentFanOut, records: list[StepRecord]) -> Outcome:
    return Outcome(decompose.EXPAND, context=fan.snapshot(), records=records)


def _ask_planner(
    fan: ComponentFanOut, work: WorkGraph, cid: str, integrated: str
) -> Outcome | None:
    node = fan.tree.nodes[cid]
    comp = work.components[cid]
    step = f"{fan.name}/{cid}/plan"
    steps = (fan.wf.definition or {}).get("steps") or {}
    planned_by = str(fan.ctx.get("planned_by") or "")
    role = str((steps.get(planned_by) or {}).get("role") or "planner")
    task = prompts.render(
        "subplan.j2",
        fan.c.repo,
        PlanOutput,
        task=fan.wf.description,
        component=comp,
        reason=node.reason,
        depth=node.depth,
        problem=node.problem,
    )
    view = fan._view()
    view.context.setdefault("feedback", {})[step] = [node.problem] if node.problem else []
    view = replace(view, description=task)
    outcome = run_worker(fan.c, view, step, role, base=fan.base_for(cid, integrated))
    if outcome.escalate is not None or outcome.transient is not None:
        return outcome
    fan.pending_records = list(outcome.records)
    plan = outcome.context.get("plan")
    # A plan the planner's own check refused (a dangling dependency, say) is read too: what a
    # sub-plan may not say has a more precise reason here (a dependency on another level).
    answered = next((r.output for r in outcome.records if isinstance(r.output, dict)), None)
    owned = {f for other in work.components.values() if other.id != cid for f in other.files}
    taken = {*work.components, *owned}
    children, problem = decompose.validate_subplan(cid, comp.files, plan or answered or {}, taken)
    if outcome.result != "passed" or not plan:
        node.status = "invalid"
        node.problem = problem or outcome.feedback or "the sub-plan was refused"
        return None
    if problem is not None:
        node.status, node.problem = "invalid", problem
    else:
        node.status, node.proposal, node.problem = "proposed", children, ""
    return None


# -- splits the fan-out asks for -------------------------------------------------------------


def over_scope(fan: ComponentFanOut, comp: Component, base: str) -> bool:
    """A component planned too big is split before any worker starts on it (the engine
    decides); True when it was asked for."""
    if comp.id in fan.tree.nodes:  # split already, or past it
        return False
    estimated = _estimated_lines(fan.flat_plan, comp.id)
    limits = fan.c.settings.limits.decomposition
    depth = fan.tree.depth_of(comp.id)
    why = decompose.over_scope(comp.files, estimated, depth, limits)
    if why is None and depth < limits.max_depth and fan.step.role:
        why = decompose.over_scope(
            comp.files, estimated, depth, limits, _pack_fact(fan, comp, base)
        )
    if why is None:
        return False
    split(fan, comp, "scope", why, None)
    return True


def unsplit(fan: ComponentFanOut, batch: list[Component], integrated: str) -> list[Component]:
    """The batch the Temporal runner is handed: a component planned too big is split instead,
    as `over_scope` does before a local worker starts (its split parent's branch is where it
    would start)."""
    return [c for c in batch if not over_scope(fan, c, fan.base_for(c.id, integrated))]


def _pack_fact(fan: ComponentFanOut, comp: Component, base: str) -> decompose.PackFact:
    """The tokens the component's worker's pack would need, measured on the commit it starts
    from, against its role's budget (what supervisor/workflow/decompose.py judges)."""
    role = load_role(str(fan.step.role), fan.c.repo)
    task = fan.wf.description + component_task(comp)
    needed = scope_tokens(CommitFiles(fan.c.ws.git_dir, base), role, task, comp.files)
    return decompose.PackFact(role.name, needed, role.context.token_budget)


def _estimated_lines(plan: dict[str, Any] | None, cid: str) -> int:
    for phase in (plan or {}).get("phases") or []:
        for comp in phase.get("components") or []:
            if comp["id"] == cid:
                return int(comp.get("estimated_lines") or 0)
    return 0


def split(
    fan: ComponentFanOut,
    comp: Component,
    trigger: decompose.Trigger,
    reason: str,
    cli: str | None,
    **fields: Any,
) -> None:
    """Ask the engine to split `comp` (or, `qa_failed`, to decide on a split component whose
    QA pass keeps failing); it waits meanwhile, and nothing new starts until the engine did."""
    with fan.lock:
        node = decompose.request(fan.tree, comp.id, trigger, reason, cli)
    comp.status = "waiting"
    fan.splitting.append(comp.id)
    if trigger == "qa_failed":
        fields["qa_failed"] = True  # its next QA pass starts with a worker fixing it
    fan._save(
        comp.id,
        status="expanding",
        feedback=reason if trigger != "scope" else None,
        **fields,
        event=EventSpec(
            "component_split_requested",
            step=fan.name,
            status=trigger,
            payload={"component": comp.id, "reason": reason[:1000], "depth": node.depth},
        ),
    )


def failure_trigger(
    fan: ComponentFanOut, cid: str, outcome: Outcome, exhausted: bool
) -> decompose.Trigger | None:
    """Why a failed component is split rather than failed or retried: it said it is too big, or
    its retries are spent (its QA pass, for a split one); None: as before."""
    if outcome.escalate is not None:
        return None  # a person's, or the task's end: the engine decides as before
    if fan.c.settings.limits.decomposition.max_depth == 0:
        return None  # splitting is off: a component fails after its retries, as before
    node = fan.tree.nodes.get(cid)
    container = node is not None and bool(node.children)
    if exhausted:
        return "qa_failed" if container else "failed"
    if outcome.context.get("too_large") and not container:
        return "too_large"
    return None


# -- a split component's QA pass -------------------------------------------------------------


def is_container(fan: ComponentFanOut, cid: str) -> bool:
    node = fan.tree.nodes.get(cid)
    return node is not None and bool(node.children)


def qa_pass(fan: ComponentFanOut, comp: Component) -> Outcome:
    """The split component's sub-components are merged into its branch: its gates judge that
    merged work (after a failed pass, a worker first fixes it, with the gates' feedback, on the
    CLI the engine chose), and then it merges upward like any component."""
    entry = fan.state[comp.id]
    merged = entry["integrated"]
    if entry.get("attempts", 0) == 0 and not entry.get("qa_failed"):
        fan._save(comp.id, status="implemented", sha=merged, base=merged, qa=True)
        return fan._gate_and_hand_over(comp.id)
    node = fan.tree.nodes[comp.id]
    c = fan.c
    if node.retry_cli is not None:
        c = replace(c, routes={**c.routes, fan.step.role or "": node.retry_cli})
    outcome = run_worker(
        c,
        fan._view(),
        f"{fan.name}/{comp.id}",
        fan.step.role or "",
        base=merged,
        component=comp,
        branch=fan._branch(comp.id),
    )
    if outcome.result != "passed" or outcome.git_sha is None:
        fan._hold(comp.id, outcome.records)  # recorded with what `_settle` decides
        return replace(outcome, records=[])
    fan._save(
        comp.id,
        status="implemented",
        sha=outcome.git_sha,
        base=merged,
        qa=True,
        records=outcome.records,
    )
    return fan._gate_and_hand_over(comp.id)


def routed(fan: ComponentFanOut, cid: str) -> Any:
    """The step context a component's worker runs with: on the CLI the engine moved it to,
    after a retry on another CLI."""
    node = fan.tree.nodes.get(cid)
    if node is None or node.retry_cli is None:
        return fan.c
    return replace(fan.c, routes={**fan.c.routes, fan.step.role or "": node.retry_cli})


def snapshot_tree(fan: ComponentFanOut, ctx: dict[str, Any]) -> None:
    """The tree into the context the fan-out saves (called under its lock)."""
    if fan.tree.nodes:
        ctx["decomposition"] = copy.deepcopy(fan.tree.model_dump(mode="json"))
