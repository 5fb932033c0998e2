"""How workflows, steps and events look in a terminal (rich tables).

Every cell that may hold worker or repository text (a task, a component id, a reviewer's words, an
event's payload, a role file's description) is a Text made by supervisor.guard.textsafe: never
parsed as
markup (`[/]` in a component id crashed `status`), never obeyed as terminal control.

Imported by every command, so it imports rich and nothing heavy: what a table needs from elsewhere
is imported where it is drawn (see tests/test_cli_imports.py).
"""

from __future__ import annotations

import json
import os
import time
from typing import TYPE_CHECKING

from rich.console import Group
from rich.padding import Padding
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from supervisor.dag import WorkGraph
from supervisor.guard.textsafe import text, visible

if TYPE_CHECKING:
    from rich.console import Console, RenderableType

    from supervisor.config import Settings
    from supervisor.context.roles import ResolvedRole, RoleFile
    from supervisor.state.reader import StateReader
    from supervisor.state.records import Event, Workflow
    from supervisor.state.store import Store

STATUS_STYLE = {
    "completed": "green",
    "running": "cyan",
    "awaiting_approval": "yellow",
    "failed": "red",
    "succeeded": "green",
    "rejected": "yellow",
    "interrupted": "magenta",
    "rate_limited": "yellow",
    "complete": "green",
    "in_progress": "cyan",
    "pending": "dim",
}


PIPE_WIDTH = 1000
"""Width for output that is not a terminal: lines as long as they need, nothing cut."""
NARROW = 120
MIN_OTHER = 8
"""Columns a table leaves each non-identifier column before it folds identifiers."""
"""Below this many columns, events print one per block instead of as a table."""


def fit_to_output(console: Console) -> None:
    """A terminal keeps rich's width; a pipe or a file gets PIPE_WIDTH (rich would otherwise
    assume 80 columns and cut identifiers like `implementer_fa…`), unless COLUMNS says."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit():
        console.width = int(columns)
    elif not console.is_terminal:
        console.width = PIPE_WIDTH
    else:
        console.width = None  # type: ignore[assignment]  # back to the terminal's own width


def _id_column(table: Table, header: str, values: list[str]) -> None:
    """A column of identifiers: kept on one line, whole, while the other columns wrap; folded
    onto the next line (never cut with an ellipsis) when even that does not fit: see `fit`."""
    del values  # every identifier column takes the same treatment, whatever its values
    table.add_column(header, no_wrap=True, overflow="fold")


def fit(console: Console, renderable: RenderableType) -> RenderableType:
    """Let identifier columns fold where the terminal is too narrow to keep each on one line
    (next to a few columns for the rest); rich would otherwise crop them, and the table's edge
    with them."""
    if isinstance(renderable, Group):
        for part in renderable.renderables:
            fit(console, part)
    elif isinstance(renderable, Table):
        ids = [c for c in renderable.columns if c.no_wrap and c.overflow == "fold"]
        if not ids:
            return renderable
        widest = [
            max([console.measure(c.header).maximum, *(console.measure(x).maximum for x in c.cells)])
            for c in ids
        ]
        others = (len(renderable.columns) - len(ids)) * MIN_OTHER
        edges = 3 * len(renderable.columns) + 1
        if sum(widest) + others + edges > console.width:
            for column in ids:
                column.no_wrap = False
    return renderable


def _status(value: str | None, shown: str | None = None) -> Text:
    value = value or ""
    return text(shown or value, STATUS_STYLE.get(value, ""), lines=False)


def _one(value: object) -> Text:
    """An identifier's cell (a step, a role, a branch): one line, shown as text."""
    return text(value, lines=False)


def _shown_status(wf: Workflow, supervisors: dict[int, int | None] | None) -> str:
    """A running task that no supervisor runs any more (killed) says so: resume continues it."""
    from supervisor.degradation import label

    degraded = f" ({label(wf.context)})" if wf.context.get("degraded") else ""
    if supervisors is not None and wf.id in supervisors and supervisors[wf.id] is None:
        return f"{wf.status} (no supervisor){degraded}"
    return wf.status + degraded


def workflows_table(
    workflows: list[Workflow], supervisors: dict[int, int | None] | None = None
) -> Table:
    """`supervisors`: the pid running each running task (None: no supervisor runs it)."""
    table = Table(title="Workflows", title_justify="left")
    table.add_column("id")
    _id_column(table, "status", [_shown_status(wf, supervisors) for wf in workflows])
    _id_column(table, "step", [shown_step(wf) for wf in workflows])
    _id_column(table, "branch", [wf.task_branch for wf in workflows])
    for column in ("task", "updated"):
        table.add_column(column)
    for wf in workflows:
        table.add_row(
            str(wf.id),
            _status(wf.status, _shown_status(wf, supervisors)),
            _one(shown_step(wf)),
            _one(wf.task_branch),
            _one(wf.description[:50]),
            wf.updated_at.strftime("%Y-%m-%d %H:%M:%S"),
        )
    return table


def shown_step(wf: Workflow) -> str:
    """The step the workflow stands at: while it waits for an approval, the step whose result
    waits (the database already points at the next one)."""
    if wf.status == "awaiting_approval" and wf.context.get("approval_step"):
        return f"{wf.context['approval_step']} (awaiting approval)"
    return wf.current_step or "-"


def workflow_detail(
    store: Store | StateReader, wf_id: int, pending: list[str] | None = None
) -> RenderableType:
    """One workflow; `pending` says what a waiting approval is about
    (supervisor.policy.approvals)."""
    wf = store.workflow(wf_id)
    totals = store.usage_totals(wf_id)
    head = Table.grid(padding=(0, 2))
    head.add_row("workflow", str(wf.id))
    head.add_row("task", text(wf.description))
    head.add_row("status", _status(wf.status))
    from supervisor.degradation import label

    if wf.context.get("degraded"):
        head.add_row("degraded", text(label(wf.context).removeprefix("degraded: "), "yellow"))
    approval = store.latest_approval(wf_id)
    if wf.status == "awaiting_approval":
        waiting = str(wf.context.get("approval_step") or (approval.step if approval else "?"))
        head.add_row(
            "current step",
            text(f"{waiting} (awaiting approval); then: {wf.current_step or 'the end'}"),
        )
    else:
        head.add_row("current step", _one(shown_step(wf)))
    head.add_row(
        "branch",
        text(f"{wf.task_branch} (from {wf.base_branch or 'detached'} {wf.base_sha[:10]})"),
    )
    head.add_row(
        "usage",
        f"{totals['input_tokens']} in / {totals['output_tokens']} out tokens, "
        f"${totals['cost_usd']:.4f}",
    )
    from supervisor.policy.budgets import status_line

    budget = status_line(wf, totals)
    if budget:
        head.add_row("budget", text(budget, "yellow" if "paused" in budget else ""))
    if wf.error:
        head.add_row("error", text(wf.error, "red"))
    if wf.status == "rate_limited" and wf.context.get("waiting_until"):
        from datetime import datetime

        until = datetime.fromtimestamp(float(wf.context["waiting_until"]))
        head.add_row(
            "waiting", Text(f"rate limited until {until:%H:%M:%S}; retries then", style="yellow")
        )
    for cli, gone in (wf.context.get("unavailable") or {}).items():
        from datetime import datetime

        until = gone.get("until")
        if until is not None and float(until) <= time.time():
            continue  # its reset has passed: steps use it again
        when = f"until {datetime.fromtimestamp(float(until)):%H:%M:%S}" if until else "for now"
        head.add_row("failover", text(f"{cli} passed over {when} ({gone.get('cause')})", "yellow"))
    for cid, entry in (wf.context.get("components") or {}).items():
        if entry.get("status") == "waiting":
            from datetime import datetime

            until = entry.get("until")
            when = f"until {datetime.fromtimestamp(float(until)):%H:%M:%S}" if until else "to retry"
            head.add_row(
                "waiting",
                text(f"component {cid} waits {when}: {entry.get('reason', '')[:120]}", "yellow"),
            )
    for cid, node in ((wf.context.get("decomposition") or {}).get("nodes") or {}).items():
        if node.get("status") == "blocked":  # a split that went as far as it could
            said = "; ".join(node.get("failures") or [])[-600:]
            why = f"component {cid} (depth {node.get('depth')}): {node.get('problem')}. {said}"
            head.add_row("needs you", text(why, "yellow"))
    if wf.status == "budget_exceeded":
        head.add_row("waiting for", text("\n".join(pending or ["a budget extension"]), "yellow"))
    if wf.status == "awaiting_approval" and approval is not None:
        head.add_row("waiting for", text(f"approval of '{approval.step}' ({approval.status})"))
        head.add_row("to approve", text("\n".join(pending or ["-"])))
        head.add_row(
            "decide",
            f"supervisor approve {wf_id}  |  supervisor reject {wf_id} --reason '...'",
        )
        from supervisor.policy.approvals import pending_request

        request = pending_request(wf, approval)
        if request:
            head.add_row(
                "dependencies", text(f"changed by '{request['producer']}': {request['diff']}")
            )
    steps = Table(title="Steps", title_justify="left")
    rows = store.steps(wf_id)
    steps.add_column("#")
    _id_column(steps, "step", [r["name"] for r in rows])
    steps.add_column("attempt")
    _id_column(steps, "role", [r["role"] or "(gate)" for r in rows])
    for column in ("status", "started", "took"):
        steps.add_column(column)
    for row in rows:
        took = ""
        if row["finished_at"] is not None:
            took = f"{(row['finished_at'] - row['started_at']).total_seconds():.1f}s"
        steps.add_row(
            str(row["id"]),
            _one(row["name"]),
            str(row["attempt"]),
            _one(row["role"] or "(gate)"),
            _status(row["status"]),
            row["started_at"].strftime("%H:%M:%S"),
            took,
        )
    work = WorkGraph.of_workflow(wf.context)
    if work is None:
        return Group(head, steps)
    return Group(head, work_tree(wf.description, work), steps)


def work_tree(task: str, work: WorkGraph) -> Tree:
    """Feature → phases → components, each with its rolled-up status."""
    feature = ("feature ", _status(work.feature_status()), visible(f"  {task[:70]}", lines=False))
    tree = Tree(Text.assemble(*feature))
    for phase in work.phases:
        shown = visible(f"phase {phase} ", lines=False)
        branch = tree.add(Text.assemble(shown, _status(work.phase_status(phase))))
        placed: dict[str, Tree] = {}
        for comp in work.in_phase(phase):  # a sub-component under its parent (flatten's order)
            after = [d for d in comp.depends_on if work.components[d].parent != comp.id]
            shown = f"  after {', '.join(after)}" if after else ""
            kind = "sub-component " * (comp.parent is not None)
            placed[comp.id] = placed.get(comp.parent or "", branch).add(
                Text.assemble(
                    visible(f"{kind}{comp.id} ", lines=False),
                    _status(comp.status),
                    (visible(f"  {', '.join(comp.files)}{shown}", lines=False), "dim"),
                )
            )
    return tree


def events_view(events: list[Event], width: int) -> RenderableType:
    """A table on a wide terminal; one event per block below NARROW columns, where a table
    of eight columns would squeeze each to a few letters."""
    return events_table(events) if width >= NARROW else events_blocks(events)


def _tokens(e: Event) -> str:
    if e.input_tokens or e.output_tokens:
        return f"{e.input_tokens or 0}/{e.output_tokens or 0}"
    return ""


def events_table(events: list[Event]) -> Table:
    table = Table(title="Events", title_justify="left")
    table.add_column("#")
    table.add_column("time")
    _id_column(table, "type", [e.type for e in events])
    _id_column(table, "step", [e.step or "" for e in events])
    _id_column(table, "role", [e.role or "" for e in events])
    for column in ("status", "tokens", "details"):
        table.add_column(column)
    for e in events:
        table.add_row(
            str(e.id),
            e.timestamp.strftime("%H:%M:%S"),
            _one(e.type),
            _one(e.step or ""),
            _one(e.role or ""),
            _status(e.status),
            _tokens(e),
            text(json.dumps(e.payload, default=str)[:120]),
        )
    return table


def events_blocks(events: list[Event]) -> RenderableType:
    """`#12 13:55:01 implementation succeeded  implement · implementer  1200/300 tokens`, and
    the details indented on the lines below it."""
    blocks: list[RenderableType] = [Text("Events", style="italic")]
    for e in events:
        where = visible(" · ".join(x for x in (e.step, e.role) if x), lines=False)
        tokens = _tokens(e)
        head = Text.assemble(
            (f"#{e.id} ", "bold"),
            f"{e.timestamp:%H:%M:%S} ",
            (visible(e.type, lines=False), "bold"),
            " ",
            _status(e.status),
            f"  {where}" if where else "",
            (f"  {tokens} tokens" if tokens else "", "dim"),
        )
        blocks.append(head)
        if e.payload:
            details = json.dumps(e.payload, default=str)
            if len(details) > 300:
                details = details[:299] + "…"
            shown = Text(visible(details), style="dim", overflow="fold")
            blocks.append(Padding(shown, (0, 0, 0, 4)))
    return Group(*blocks)


def roles_rows(files: list[RoleFile]) -> list[dict[str, object]]:
    """Every role file, in lookup order; `shadowed` when an earlier layer has the same name."""
    import yaml

    rows: list[dict[str, object]] = []
    seen: set[str] = set()
    for f in files:
        data = yaml.safe_load(f.path.read_text()) or {}
        data = data if isinstance(data, dict) else {}
        rows.append(
            {
                "role": f.name,
                "layer": "built-in" if f.layer == "package" else f.layer,
                "extends": str(data.get("extends") or ""),
                "description": str(data.get("description") or ""),
                "file": str(f.path),
                "shadowed": f.name in seen,
            }
        )
        seen.add(f.name)
    return rows


def roles_table(files: list[RoleFile]) -> Table:
    table = Table(
        title="Roles (the first of a name wins: project > user > built-in)", title_justify="left"
    )
    rows = roles_rows(files)
    _id_column(table, "role", [str(r["role"]) for r in rows])
    table.add_column("layer", no_wrap=True)
    _id_column(table, "extends", [str(r["extends"]) for r in rows])
    table.add_column("description")
    table.add_column("file", overflow="fold")
    for r in rows:
        table.add_row(
            text(r["role"], "dim strike" if r["shadowed"] else "bold", lines=False),
            str(r["layer"]),
            _one(r["extends"]),
            text(r["description"]),
            text(_short(str(r["file"]))),
        )
    return table


def role_detail(resolved: ResolvedRole) -> RenderableType:
    chain = " → ".join(f"{f.name} ({f.layer})" for f in resolved.chain)
    table = Table(title=text(f"Role {resolved.role.name}: {chain}"), title_justify="left")
    table.add_column("field")
    table.add_column("value")
    table.add_column("from")
    flat = _flat(resolved.role.model_dump())
    for key, value in flat.items():
        source = resolved.provenance.get(key, "(default)")
        table.add_row(_one(key), text(str(value)[:200]), text(_short(source.lstrip(" +"))))
    return table


def config_table(settings: Settings, provenance: dict[str, str]) -> Table:
    table = Table(title="Effective configuration", title_justify="left")
    flat = _flat(settings.model_dump())
    _id_column(table, "key", list(flat))
    table.add_column("value", overflow="fold")
    table.add_column("from", overflow="fold")
    for key, value in flat.items():
        table.add_row(_one(key), text(value), text(_short(provenance.get(key, "(default)"))))
    return table


def _short(text: str) -> str:
    """Paths as a person reads them: package files relative, the home directory as ~."""
    from pathlib import Path

    from supervisor.config import PACKAGE_ROOT

    return text.replace(f"{PACKAGE_ROOT}/", "").replace(f"{Path.home()}/", "~/")


def _flat(data: dict[str, object], prefix: str = "") -> dict[str, object]:
    out: dict[str, object] = {}
    for key, value in data.items():
        if isinstance(value, dict) and value:
            out.update(_flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out
