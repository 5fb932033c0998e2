"""How workflows, steps and events look in a terminal (rich tables)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from rich.console import Group
from rich.table import Table
from rich.text import Text

from supervisor.workflow.engine import Reporter

if TYPE_CHECKING:
    from rich.console import Console, RenderableType

    from supervisor.state.store import Event, Store, Workflow

STATUS_STYLE = {
    "completed": "green",
    "running": "cyan",
    "awaiting_approval": "yellow",
    "failed": "red",
    "succeeded": "green",
    "rejected": "yellow",
    "interrupted": "magenta",
}


class RichReporter(Reporter):
    """Shows step starts and streams worker output, dimmed, as it arrives."""

    def __init__(self, console: Console) -> None:
        self.console = console

    def step(self, wf_id: int, name: str, detail: str) -> None:
        self.console.print(f"[bold]▶ wf{wf_id} {name}[/bold]: {detail}", highlight=False)

    def output(self, text: str) -> None:
        self.console.print(Text(text.rstrip("\n"), style="dim"), highlight=False)

    def info(self, text: str) -> None:
        self.console.print(f"  {text}", highlight=False)


def _status(value: str | None) -> Text:
    value = value or ""
    return Text(value, style=STATUS_STYLE.get(value, ""))


def workflows_table(workflows: list[Workflow]) -> Table:
    table = Table(title="Workflows", title_justify="left")
    for column in ("id", "status", "step", "branch", "task", "updated"):
        table.add_column(column)
    for wf in workflows:
        table.add_row(
            str(wf.id),
            _status(wf.status),
            wf.current_step or "-",
            wf.task_branch,
            wf.description[:50],
            wf.updated_at.strftime("%Y-%m-%d %H:%M:%S"),
        )
    return table


def workflow_detail(store: Store, wf_id: int) -> RenderableType:
    wf = store.workflow(wf_id)
    totals = store.usage_totals(wf_id)
    head = Table.grid(padding=(0, 2))
    head.add_row("workflow", str(wf.id))
    head.add_row("task", wf.description)
    head.add_row("status", _status(wf.status))
    head.add_row("current step", wf.current_step or "-")
    head.add_row(
        "branch", f"{wf.task_branch} (from {wf.base_branch or 'detached'} {wf.base_sha[:10]})"
    )
    head.add_row(
        "usage",
        f"{totals['input_tokens']} in / {totals['output_tokens']} out tokens, "
        f"${totals['cost_usd']:.4f}",
    )
    if wf.error:
        head.add_row("error", Text(wf.error, style="red"))
    approval = store.latest_approval(wf_id)
    if wf.status == "awaiting_approval" and approval is not None:
        head.add_row("waiting for", f"approval of '{approval.step}' ({approval.status})")
    steps = Table(title="Steps", title_justify="left")
    for column in ("#", "step", "attempt", "role", "status", "started", "took"):
        steps.add_column(column)
    for row in store.steps(wf_id):
        took = ""
        if row["finished_at"] is not None:
            took = f"{(row['finished_at'] - row['started_at']).total_seconds():.1f}s"
        steps.add_row(
            str(row["id"]),
            row["name"],
            str(row["attempt"]),
            row["role"] or "(gate)",
            _status(row["status"]),
            row["started_at"].strftime("%H:%M:%S"),
            took,
        )
    return Group(head, steps)


def events_table(events: list[Event]) -> Table:
    table = Table(title="Events", title_justify="left")
    for column in ("#", "time", "type", "step", "role", "status", "tokens", "details"):
        table.add_column(column)
    for e in events:
        tokens = ""
        if e.input_tokens or e.output_tokens:
            tokens = f"{e.input_tokens or 0}/{e.output_tokens or 0}"
        table.add_row(
            str(e.id),
            e.timestamp.strftime("%H:%M:%S"),
            e.type,
            e.step or "",
            e.role or "",
            _status(e.status),
            tokens,
            json.dumps(e.payload, default=str)[:120],
        )
    return table
