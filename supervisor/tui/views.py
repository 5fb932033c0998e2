"""What the TUI's panes show, as rich renderables built from supervisor.views.monitor's records.

Names (steps, roles, statuses, components) are laid out one entry a line, each name an unbroken
word: at 80×24 a table of four columns in a 36-column pane folded `implementer` into `implem` /
`enter`, so here a line too long for its pane wraps between names, never inside one. Everything a
worker or the repository wrote goes through supervisor.guard.textsafe.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text

from supervisor.guard.textsafe import text as as_text
from supervisor.guard.textsafe import visible
from supervisor.views.render import STATUS_STYLE

if TYPE_CHECKING:
    from rich.console import RenderableType

    from supervisor.views.monitor import Detail

STYLE = {
    **STATUS_STYLE,
    "approved": "green",
    "budget_exceeded": "yellow",
    "running (no supervisor)": "red",  # supervisor.state.status_label's words for a killed task
}
STEPS_SHOWN = 15


def status_text(value: str) -> Text:
    return as_text(value, STYLE.get(value, ""), lines=False)


def tree_view(detail: Detail) -> RenderableType:
    """The plan's components (when there is a plan) above the latest steps."""
    from rich.console import Group

    from supervisor.core.dag import WorkGraph
    from supervisor.views.render import work_tree

    wf = detail.workflow
    steps = Text()
    steps.append(f"workflow {wf.id}: ", style="bold")
    steps.append_text(status_text(detail.status))
    steps.append("\n")
    if detail.decided or (wf.status == "running" and not detail.supervised):
        steps.append(f"r resumes it (supervisor resume {wf.id})\n", style="bold")
    steps.append("steps", style="bold")
    steps.append(f"{_depth(wf.context)}\n", style="dim")
    for row in detail.steps[-STEPS_SHOWN:]:
        steps.append(visible(str(row["name"]), lines=False))
        if row["attempt"] and int(row["attempt"]) > 1:
            steps.append(f" #{row['attempt']}", style="dim")
        steps.append("  ")
        steps.append(visible(str(row["role"] or "(gate)"), lines=False), style="dim")
        steps.append("  ")
        steps.append_text(status_text(str(row["status"])))
        steps.append("\n")
    if not detail.steps:
        steps.append("(none yet)\n", style="dim")
    work = WorkGraph.of_workflow(wf.context)
    if work is None:
        return steps
    from supervisor.views.detail import projects_gated, verdicts

    return Group(work_tree(wf.description, work, verdicts(projects_gated(wf.context))), steps)


def events_view(detail: Detail, resume_note: str | None = None) -> Text:
    """The task, its error if any, then its latest events, oldest first: the pane scrolls to
    the bottom, so the newest is where the eye lands."""
    text = Text()
    wf = detail.workflow
    text.append(f"{visible(wf.description)}\n", style="bold")
    if wf.error:
        text.append(f"error: {visible(wf.error)}\n", style="red")
    if resume_note:
        text.append(f"{resume_note}\n", style="cyan")
    for e in detail.events:
        text.append(f"{e.timestamp:%H:%M:%S} ", style="dim")
        text.append(visible(e.type, lines=False), style="bold")
        if e.step:
            text.append(visible(f" {e.step}", lines=False))
        if e.status:
            text.append(" ")
            text.append_text(status_text(e.status))
        summary = (e.payload or {}).get("output", {}) if isinstance(e.payload, dict) else {}
        said = summary.get("summary") if isinstance(summary, dict) else None
        error = (e.payload or {}).get("error") if isinstance(e.payload, dict) else None
        if said or error:
            text.append(f"  {visible(str(said or error)[:160])}", style="dim")
        elif e.type == "step_worker" and isinstance(e.payload, dict):  # team mode's pools
            ran = f"pool {e.payload.get('pool', 'any')}, worker {e.payload.get('worker', '?')}"
            text.append(f"  {visible(ran[:160], lines=False)}", style="dim")
        text.append("\n")
    return text


def _depth(context: dict[str, object]) -> str:
    """The depth on the steps' heading line, short (`status <id>` has it in full): at 80×24 a
    line of its own would push the latest step out of the pane."""
    from supervisor.core.depth_view import summary

    found = summary(context)
    if found is None:
        return ""
    score = f" {found['complexity']}/10" if found["complexity"] is not None else ""
    return f" · depth {found['path'] or found['asked'] + '…'}{score}"
