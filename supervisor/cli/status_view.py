"""What `supervisor status` prints: the list of workflows, or one in detail.

Shared by the full command line (supervisor/cli/app.py) and the quick entry point
(supervisor/cli/entry.py), so both print the same thing. It never imports typer, the engine or
SQLAlchemy (for a SQLite state); one workflow's detail printed to a pipe is plain lines
(supervisor/cli/status_plain.py) and does not import rich either: a script polling `status <id>`
waits for little more than the interpreter.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from supervisor.cli.plain import json_out
from supervisor.views import facts

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from rich.console import Console

    from supervisor.state.records import Workflow


def to_a_pipe() -> bool:
    """Whether stdout is a pipe or a file rather than a terminal: plain lines, no rich."""
    return not sys.stdout.isatty()


def _runners(repo: Path, found: list[Workflow], pids: dict[int, int | None]) -> dict[int, str]:
    """Who runs each task (lifecycle/task_state.py `runners`), and for a Temporal task queued
    with no holder, whether Temporal closed its workflow (terminated from its CLI or UI)."""
    from supervisor.lifecycle import task_state as access

    shown = access.runners(repo, found, pids)
    if not any(label.startswith(("queued", "stranded")) for label in shown.values()):
        return shown
    from supervisor.temporal.client import stopped_labels

    with access.reading(repo) as state:
        return stopped_labels(state, found, shown)


def show_status(
    console: Callable[[], Console], repo: Path, workflow_id: int | None, *, as_json: bool
) -> None:
    """`console`: the rich console to print to, made only when a table is drawn."""
    from supervisor.lifecycle import task_state as access

    if workflow_id is None:
        if as_json:
            json_out(facts.task_list(repo))
            return
        found = access.workflows(repo)
        if not found:  # an empty table says nothing; say how to get a row
            sys.stdout.write(
                'No workflows in this repository yet. Start one: supervisor start-task "what to '
                'do"  (or see one run first: supervisor demo)\n'
            )
        else:
            from supervisor.cli.output import show
            from supervisor.views.listings import workflows

            pids = access.supervisors(repo, found)
            show(console(), workflows(found, pids, _runners(repo, found, pids)))
        return
    if as_json:
        json_out(facts.task_detail(repo, workflow_id))
        return
    with access.reading(repo) as store:
        wf = store.workflow(workflow_id)
        pids = access.supervisors(repo, [wf])
        runner = _runners(repo, [wf], pids).get(wf.id)
        about: list[str] = []
        if wf.status in ("awaiting_approval", "budget_exceeded"):
            from supervisor.policy.approvals import pending

            about = pending(wf, access.state_db(repo).parent.parent)
        from supervisor.views.detail import workflow_detail

        shown = workflow_detail(store, workflow_id, about, pids, runner)
    if to_a_pipe():
        from supervisor.cli.status_plain import detail_lines

        sys.stdout.write("\n".join(detail_lines(shown)) + "\n")
        return
    from supervisor.views.render import detail_view

    out = console()
    out.print(detail_view(shown))


components_json = facts.components
"""Kept under its old name: supervisor/views/facts.py holds it, shared with the MCP server."""
