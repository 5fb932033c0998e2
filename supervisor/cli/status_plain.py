"""`supervisor status <id>` for a pipe or a file: the terminal view's contents as plain lines.

A script or `watch` reading it gets no table borders to strip, and the command starts as fast as
the interpreter: nothing here imports rich (tests/test_cli_imports.py). Every value is made
visible (supervisor/guard/visible.py): worker and repository text never reaches the reader as
terminal control.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from supervisor.guard.visible import visible

if TYPE_CHECKING:
    from collections.abc import Mapping

    from supervisor.core.dag import WorkGraph
    from supervisor.views.detail import Detail


def detail_lines(shown: Detail) -> list[str]:
    width = max(len(row.label) for row in shown.rows)
    lines: list[str] = []
    for row in shown.rows:
        first, *more = visible(row.value).split("\n")
        lines.append(f"{row.label:<{width}}  {first}")
        lines.extend(f"{'':<{width}}  {line}" for line in more)
    if shown.work is not None:
        lines += ["", *tree_lines(shown.workflow.description, shown.work, shown.verdicts())]
    lines += [
        "",
        "Steps",
        *columns(
            ["#", "step", "attempt", "role", "status", "started", "took"],
            [
                [str(r.id), r.name, str(r.attempt), r.role, r.status, r.started, r.took]
                for r in shown.steps
            ],
        ),
    ]
    return lines


def tree_lines(task: str, work: WorkGraph, verdicts: Mapping[str, str] | None = None) -> list[str]:
    """Feature → phases → components → sub-components, indented, each with its rolled-up
    status; in a monorepo, feature → project (with its latest gates' verdict) → phase → ..."""
    lines = [f"feature {work.feature_status()}  {visible(task[:70], lines=False)}"]
    projects, verdicts = work.projects(), verdicts or {}
    if not projects:
        return lines + _phase_lines(work, None, 1)
    for project in projects:
        verdict = verdicts.get(project, "")
        said = f"  {verdict}" if verdict else ""
        name = visible(project, lines=False)
        lines.append(f"  project {name} {work.project_status(project)}{said}")
        lines += _phase_lines(work, project, 2)
    return lines


def _phase_lines(work: WorkGraph, project: str | None, level: int) -> list[str]:
    from supervisor.core.dag import depth, rollup

    lines: list[str] = []
    for phase in work.phases:
        comps = work.in_phase(phase, project)
        if project is not None and not comps:
            continue
        status = rollup([c.status for c in comps]) if project else work.phase_status(phase)
        lines.append(f"{'  ' * level}phase {visible(phase, lines=False)} {status}")
        for comp in comps:  # a sub-component under its parent, indented
            after = [d for d in comp.depends_on if work.components[d].parent != comp.id]
            shown = f"  after {', '.join(after)}" if after else ""
            where = visible(f"{', '.join(comp.files)}{shown}", lines=False)
            indent = "  " * (level + 1 + depth(work, comp.id))
            kind = "sub-component " * (comp.parent is not None)
            lines.append(f"{indent}{kind}{visible(comp.id, lines=False)} {comp.status}  {where}")
    return lines


def columns(header: list[str], rows: list[list[str]]) -> list[str]:
    """Left-aligned columns two spaces apart; no cell is ever cut."""
    cells = [header, *([visible(c, lines=False) for c in row] for row in rows)]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    return [
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells
    ]
