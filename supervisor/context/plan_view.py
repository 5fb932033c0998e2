"""What of the plan a worker's prompt carries.

A component's implementer gets its own component (in its task text), the interfaces of the
components it depends on (their descriptions and files) and one line about the rest; not the whole
plan. With the whole plan in every component's prompt, prompt volume grew with N² (23 KB per prompt
at 20 components, 44 KB at 40); this way a component's prompt does not grow with N. Steps that work
on the whole task (a single implementer, reviewers) still get the whole plan.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from supervisor.core.dag import Component

MAX_DEPENDENCIES = 12
MAX_TEXT = 300


def plan_for_prompt(plan: dict[str, Any] | None, component: Component | None) -> str:
    """The plan as the prompt's THE PLAN section: whole for a whole-task step, a component's view
    (see component_view) for one component's worker."""
    if not plan:
        return ""
    if component is None:
        return json.dumps(plan, indent=2)
    return component_view(plan, component)


def component_view(plan: dict[str, Any], component: Component) -> str:
    """The plan's summary, the interfaces `component` builds on, and one line about the rest."""
    phases = plan.get("phases") or []
    by_id = {
        c["id"]: (phase.get("id", "?"), c) for phase in phases for c in phase.get("components", [])
    }
    lines = []
    summary = _one_line(str(plan.get("summary") or ""))
    if summary:
        lines.append(f"Summary: {summary}")
    deps = [d for d in component.depends_on if d in by_id]
    if deps:
        lines.append(
            "It builds on these components, done and merged into your working directory before "
            "it started: use their interfaces, and leave their files to them."
        )
        for dep in deps[:MAX_DEPENDENCIES]:
            phase, c = by_id[dep]
            files = ", ".join(c.get("files") or []) or "(no files named)"
            lines.append(f"- {dep} (phase {phase}): {_one_line(c.get('description', ''))}")
            lines.append(f"  files: {files}")
        if len(deps) > MAX_DEPENDENCIES:
            rest = deps[MAX_DEPENDENCIES:]
            lines.append(f"- and {len(rest)} more: {', '.join(rest)}")
    others = len(by_id) - 1 - len(deps)
    lines.append(
        f"The rest of the plan: {others} other component(s) across {len(phases)} phase(s), "
        "built by other workers; leave their files to them."
    )
    return "\n".join(lines)


def _one_line(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= MAX_TEXT else flat[: MAX_TEXT - 1] + "…"


def plan_files(plan: dict[str, Any] | None) -> list[str]:
    """The files the plan's components name: the implementer's targets (steps/worker.py), and
    the targets its pack is gathered for ahead (steps/prepare.py)."""
    files: list[str] = []
    for phase in (plan or {}).get("phases", []):
        for component in phase.get("components", []):
            files += [f for f in component.get("files", []) if f not in files]
    return files
