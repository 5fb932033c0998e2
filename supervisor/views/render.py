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
from typing import TYPE_CHECKING

from rich.console import Group
from rich.padding import Padding
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from supervisor.core.dag import WorkGraph
from supervisor.guard.textsafe import text, visible
from supervisor.views import detail, listings
from supervisor.views.listing import Listing
from supervisor.views.listings import STATUS_STYLE as STATUS_STYLE
from supervisor.views.tables import fitted

if TYPE_CHECKING:
    from collections.abc import Mapping

    from rich.console import Console, RenderableType

    from supervisor.context.roles import ResolvedRole
    from supervisor.core.config import Settings
    from supervisor.state.reader import StateReader
    from supervisor.state.records import Event, Workflow
    from supervisor.state.store import Store

PIPE_WIDTH = 1000
"""Width for output that is not a terminal: lines as long as they need, nothing cut."""
NARROW = 120
"""Below this many columns, events print one per block instead of as a table."""


def fit(console: Console, renderable: RenderableType) -> RenderableType:
    """`renderable` as it is: every listing fits itself to the width it is drawn at
    (supervisor/views/tables.py). Kept for the callers that still wrap their views in it."""
    del console
    return renderable


def _status(value: str | None, shown: str | None = None) -> Text:
    value = value or ""
    return text(shown or value, STATUS_STYLE.get(value, ""), lines=False)


def _one(value: object) -> Text:
    """An identifier's cell (a step, a role, a branch): one line, shown as text."""
    return text(value, lines=False)


_shown_status = listings.shown_status
shown_step = listings.shown_step


def workflows_table(
    workflows: list[Workflow], supervisors: dict[int, int | None] | None = None
) -> RenderableType:
    """`supervisors`: the pid running each running task (None: no supervisor runs it)."""
    return fitted(listings.workflows(workflows, supervisors))


def workflow_detail(
    store: Store | StateReader,
    wf_id: int,
    pending: list[str] | None = None,
    supervisors: dict[int, int | None] | None = None,
    runner: str | None = None,
) -> RenderableType:
    """One workflow (supervisor/views/detail.py says what is in it), drawn for a terminal;
    `supervisors` as for `workflows_table`; `runner`, who runs it across hosts
    (supervisor/state/runner_view.py)."""
    return detail_view(detail.workflow_detail(store, wf_id, pending, supervisors, runner))


def detail_view(shown: detail.Detail) -> RenderableType:
    head = Table.grid(padding=(0, 2))
    for row in shown.rows:
        value = _status(row.value) if row.style == detail.STATUS else text(row.value, row.style)
        head.add_row(row.label, value)
    steps = fitted(listings.steps(shown.steps))
    if shown.work is None:
        return Group(head, steps)
    return Group(head, work_tree(shown.workflow.description, shown.work, shown.verdicts()), steps)


def work_tree(task: str, work: WorkGraph, verdicts: Mapping[str, str] | None = None) -> Tree:
    """Feature → phases → components, each with its rolled-up status; in a monorepo, feature →
    project (with its latest gates' verdict) → phase → component."""
    feature = ("feature ", _status(work.feature_status()), visible(f"  {task[:70]}", lines=False))
    tree = Tree(Text.assemble(*feature))
    projects, verdicts = work.projects(), verdicts or {}
    if not projects:
        _phases(tree, work, None)
    for project in projects:
        verdict = verdicts.get(project, "")
        said = (f"  {verdict}", "green" if verdict == "gates passed" else "red")
        head = Text.assemble(
            visible(f"project {project} ", lines=False),
            _status(work.project_status(project)),
            said if verdict else "",
        )
        _phases(tree.add(head), work, project)
    return tree


def _phases(tree: Tree, work: WorkGraph, project: str | None) -> None:
    from supervisor.core.dag import rollup

    for phase in work.phases:
        comps = work.in_phase(phase, project)
        if project is not None and not comps:
            continue
        status = rollup([c.status for c in comps]) if project else work.phase_status(phase)
        shown = visible(f"phase {phase} ", lines=False)
        branch = tree.add(Text.assemble(shown, _status(status)))
        placed: dict[str, Tree] = {}
        for comp in comps:  # a sub-component under its parent (flatten's order)
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


def events_view(events: list[Event], width: int) -> RenderableType:
    """A table where the terminal is wide enough for its identifiers whole; one event per block
    below that (or below NARROW columns, where the details would get a few letters)."""
    if width < NARROW:
        return events_blocks(events)
    return fitted(listings.events(events), lambda: events_blocks(events))


def events_blocks(events: list[Event]) -> RenderableType:
    """`#12 13:55:01 implementation succeeded  implement · implementer  1200/300 tokens`, and
    the details indented on the lines below it."""
    blocks: list[RenderableType] = [Text("Events", style="italic")]
    for e in events:
        where = visible(" · ".join(x for x in (e.step, e.role) if x), lines=False)
        tokens = listings.tokens(e)
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


def role_detail(resolved: ResolvedRole) -> RenderableType:
    return fitted(role_listing(resolved))


def role_listing(resolved: ResolvedRole) -> Listing:
    chain = " → ".join(f"{f.name} ({f.layer})" for f in resolved.chain)
    flat = _flat(resolved.role.model_dump(mode="json"))
    return listings.role_fields(f"Role {resolved.role.name}: {chain}", flat, resolved.provenance)


def config_listing(settings: Settings, provenance: dict[str, str]) -> Listing:
    return listings.settings(_flat(settings.model_dump(mode="json")), provenance)


_short = listings.short_path


def _flat(data: dict[str, object], prefix: str = "") -> dict[str, object]:
    out: dict[str, object] = {}
    for key, value in data.items():
        if isinstance(value, dict) and value:
            out.update(_flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out
