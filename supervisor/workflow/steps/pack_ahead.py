"""The context packs a prepared worker step will ask for, gathered ahead (issue 30: pipelined
steps): its inputs computed as the worker step computes them (steps/worker.py), so that the
step finds them made (supervisor/context/ahead.py compares every input before it uses one)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable

    from supervisor.context.ahead import Ahead
    from supervisor.state.store import Workflow
    from supervisor.workflow.lookahead import Expected
    from supervisor.workflow.steps.base import StepContext


def pack_ahead(
    c: StepContext,
    wf: Workflow,
    expected: Expected,
    packs: Ahead,
    components: int = 0,
    promised: Callable[[], None] | None = None,
) -> None:
    """Gather the context pack `expected` will ask for, as the worker step computes its inputs
    (steps/worker.py): the files changed since the task branch's tip, else the plan's, and the
    diff. A fix-up of one component of a plan asks for that component's files: the plan's; the
    first `components` of a plan, each its own (a fan-out's workers: steps/components.py)."""
    from supervisor.context.assemble import strategy_for
    from supervisor.context.plan_view import plan_files
    from supervisor.context.roles import load_role
    from supervisor.workspace.treedata import CommitFiles

    role = load_role(expected.role, c.repo)
    tip = c.ws.branch_tip(wf.task_branch)
    base = expected.base
    files = CommitFiles(c.ws.git_dir, base)
    strategy = strategy_for(role, c.repo)
    planned = plan_files(wf.context.get("plan"))
    diff = c.ws.diff(tip, base) if base != tip else ""
    changed = c.ws.changed_files(tip, base) if base != tip else planned
    each = component_files(wf.context.get("plan"))[:components]  # a fan-out's, asked first
    packs.gather_all(files, role, strategy, [*each, changed, planned], diff, promised)


def component_files(plan: dict[str, Any] | None) -> list[list[str]]:
    """Each component's files, in the plan's order; not a monorepo project's component (its
    pack is scoped to its project, never gathered ahead: context/ahead.py)."""
    return [
        list(component.get("files", []))
        for phase in (plan or {}).get("phases", [])
        for component in phase.get("components", [])
        if not component.get("project")
    ]
