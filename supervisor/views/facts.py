"""The facts of `supervisor status --json`, as data: what every face that speaks to a program
(the command line's `--json`, the MCP server's `list_tasks` and `task_status`) says of the
repository's tasks, so that they say the same.

Plain dicts whose times are `datetime`s: each face encodes them its own way. Imports neither
rich, typer nor the engine: `status --json` answers without them (supervisor/cli/entry.py).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from supervisor.core import depth_view

if TYPE_CHECKING:
    from pathlib import Path


def plain(record: object) -> dict[str, Any]:
    """A state record (a dataclass) as JSON-ready data."""
    return dataclasses.asdict(record)  # type: ignore[call-overload,no-any-return]


def task_list(repo: Path) -> list[dict[str, Any]]:
    """Every task of the repository, oldest first, as `status --json` lists them."""
    from supervisor.lifecycle import task_state as access

    found = access.workflows(repo)
    pids = access.supervisors(repo, found)
    runners = access.runners(repo, found, pids)
    return [
        {**plain(wf), "supervisor_pid": pids.get(wf.id), "runner": runners.get(wf.id)}
        for wf in found
    ]


def task_detail(repo: Path, workflow_id: int) -> dict[str, Any]:
    """One task as `status <id> --json` shows it: its row, steps, usage, the approval it waits
    on and what that approval is about, its runner, depth and components."""
    from supervisor.lifecycle import task_state as access

    with access.reading(repo) as store:
        wf = store.workflow(workflow_id)
        pids = access.supervisors(repo, [wf])
        runner = access.runners(repo, [wf], pids).get(wf.id)
        about: list[str] = []
        if wf.status in ("awaiting_approval", "budget_exceeded"):
            from supervisor.policy.approvals import pending

            about = pending(wf, access.state_db(repo).parent.parent)
        approval = store.latest_approval(workflow_id)
        return {
            **plain(wf),
            "supervisor_pid": pids.get(wf.id),  # as the list has it
            "steps": store.steps(workflow_id),
            "usage": store.usage_totals(workflow_id),
            "approval": plain(approval) if approval else None,
            "to_approve": about,
            "runner": runner,
            "depth": depth_view.summary(wf.context),
            "components": components(wf.context),
        }


def components(context: dict[str, Any]) -> list[dict[str, Any]]:
    """Every component of the plan and of its sub-plans, with its place in the tree (`depth` 0:
    a component of the plan, 1: a sub-component, ...) and, for a split one, why."""
    from supervisor.core.dag import WorkGraph, depth

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
