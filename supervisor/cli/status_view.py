"""What `supervisor status` prints: the list of workflows, or one in detail.

Shared by the full command line (supervisor/cli/app.py) and the quick entry point
(supervisor/cli/entry.py), so both print the same thing; it imports rich and the state reader,
never typer, the engine or SQLAlchemy (for a SQLite state).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from supervisor.cli.plain import json_out, plain
from supervisor.cli.render import fit, workflow_detail, workflows_table

if TYPE_CHECKING:
    from pathlib import Path

    from rich.console import Console


def show_status(console: Console, repo: Path, workflow_id: int | None, *, as_json: bool) -> None:
    from supervisor import task_state as access

    if workflow_id is None:
        found = access.workflows(repo)
        pids = access.supervisors(repo, found)
        if as_json:
            json_out([{**plain(wf), "supervisor_pid": pids.get(wf.id)} for wf in found])
        else:
            console.print(fit(console, workflows_table(found, pids)))
        return
    with access.reading(repo) as store:
        wf = store.workflow(workflow_id)
        about: list[str] = []
        if wf.status in ("awaiting_approval", "budget_exceeded"):
            from supervisor.policy.approvals import pending

            about = pending(wf, access.state_db(repo).parent.parent)
        if as_json:
            approval = store.latest_approval(workflow_id)
            json_out(
                {
                    **plain(wf),
                    "steps": store.steps(workflow_id),
                    "usage": store.usage_totals(workflow_id),
                    "approval": plain(approval) if approval else None,
                    "to_approve": about,
                    "components": components_json(wf.context),
                }
            )
            return
        console.print(fit(console, workflow_detail(store, workflow_id, about)))


def components_json(context: dict[str, Any]) -> list[dict[str, Any]]:
    """Every component of the plan and of its sub-plans, with its place in the tree (`depth` 0:
    a component of the plan, 1: a sub-component, ...) and, for a split one, why."""
    from supervisor.dag import WorkGraph, depth

    work = WorkGraph.of_workflow(context)
    if work is None:
        return []
    nodes = (context.get("decomposition") or {}).get("nodes") or {}
    found = []
    for comp in work.components.values():
        item: dict[str, Any] = {
            "id": comp.id,
            "phase": comp.phase,
            "parent": comp.parent,
            "depth": depth(work, comp.id),
            "status": comp.status,
            "files": comp.files,
        }
        node = nodes.get(comp.id)
        if node:
            item["split"] = {k: node.get(k) for k in ("status", "trigger", "reason", "problem")}
            item["split"]["failures"] = node.get("failures") or []
        found.append(item)
    return found
