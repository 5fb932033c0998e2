"""What `supervisor status` prints: the list of workflows, or one in detail.

Shared by the full command line (supervisor/cli/app.py) and the quick entry point
(supervisor/cli/entry.py), so both print the same thing. It never imports typer, the engine or
SQLAlchemy (for a SQLite state); one workflow's detail printed to a pipe is plain lines
(supervisor/cli/status_plain.py) and does not import rich either: a script polling `status <id>`
waits for little more than the interpreter.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from supervisor.cli.plain import json_out, plain
from supervisor.core import depth_view

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from rich.console import Console


def to_a_pipe() -> bool:
    """Whether stdout is a pipe or a file rather than a terminal: plain lines, no rich."""
    return not sys.stdout.isatty()


def show_status(
    console: Callable[[], Console], repo: Path, workflow_id: int | None, *, as_json: bool
) -> None:
    """`console`: the rich console to print to, made only when a table is drawn."""
    from supervisor.lifecycle import task_state as access

    if workflow_id is None:
        found = access.workflows(repo)
        pids = access.supervisors(repo, found)
        runners = access.runners(repo, found, pids)
        if as_json:
            json_out(
                [
                    {**plain(wf), "supervisor_pid": pids.get(wf.id), "runner": runners.get(wf.id)}
                    for wf in found
                ]
            )
        elif not found:  # an empty table says nothing; say how to get a row
            sys.stdout.write(
                'No workflows in this repository yet. Start one: supervisor start-task "what to '
                'do"  (or see one run first: supervisor demo)\n'
            )
        else:
            from supervisor.cli.output import show
            from supervisor.views.listings import workflows

            show(console(), workflows(found, pids, runners))
        return
    with access.reading(repo) as store:
        wf = store.workflow(workflow_id)
        pids = access.supervisors(repo, [wf])
        runner = access.runners(repo, [wf], pids).get(wf.id)
        about: list[str] = []
        if wf.status in ("awaiting_approval", "budget_exceeded"):
            from supervisor.policy.approvals import pending

            about = pending(wf, access.state_db(repo).parent.parent)
        if as_json:
            approval = store.latest_approval(workflow_id)
            json_out(
                {
                    **plain(wf),
                    "supervisor_pid": pids.get(wf.id),  # as the list has it
                    "steps": store.steps(workflow_id),
                    "usage": store.usage_totals(workflow_id),
                    "approval": plain(approval) if approval else None,
                    "to_approve": about,
                    "runner": runner,
                    "depth": depth_view.summary(wf.context),
                    "components": components_json(wf.context),
                }
            )
            return
        from supervisor.views.detail import workflow_detail

        shown = workflow_detail(store, workflow_id, about, pids, runner)
    if to_a_pipe():
        from supervisor.cli.status_plain import detail_lines

        sys.stdout.write("\n".join(detail_lines(shown)) + "\n")
        return
    from supervisor.views.render import detail_view

    out = console()
    out.print(detail_view(shown))


def components_json(context: dict[str, Any]) -> list[dict[str, Any]]:
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
