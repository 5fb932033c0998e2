"""The fix-up after a later gate or review sent a fanned-out step's integrated result back: one
worker on the whole result, not a second round of components (see components.py)."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import TYPE_CHECKING

from supervisor.workflow.steps.worker import run_worker

if TYPE_CHECKING:
    from supervisor.core.dag import WorkGraph
    from supervisor.state.store import Workflow
    from supervisor.workflow.steps.base import Outcome, StepContext


def fix_up(c: StepContext, wf: Workflow, name: str, work: WorkGraph, role: str) -> Outcome:
    """The fix-up after a later gate or review sent the integrated result back. It is the
    next attempt of the component it concerns, under that component's name and attempt
    count: the only one, or the one whose files the latest feedback names. When the feedback
    names several or none, it is a fix of them all (`implement/a+b`), its attempts counted
    on from theirs."""
    ctx = wf.context
    feedback = ctx.get("feedback", {}).get(name, [])
    comps = list(work.components.values())
    if len(comps) > 1:
        named = [c for c in comps if _names_a_file(feedback[-1] if feedback else "", c.files)]
        comps = named if len(named) == 1 else comps
    step_name = f"{name}/{'+'.join(comp.id for comp in comps)}"
    attempt = None
    if len(comps) > 1:
        earlier = max(c.store.count_steps(wf.id, f"{name}/{comp.id}") for comp in comps)
        attempt = earlier + c.store.count_steps(wf.id, step_name) + 1
    view = replace(wf, context={**ctx, "feedback": {**ctx["feedback"], step_name: feedback}})
    component = comps[0] if len(comps) == 1 else None
    return run_worker(c, view, step_name, role, component=component, attempt=attempt)


def _names_a_file(text: str, files: list[str]) -> bool:
    """Whether `text` (a gate's output, a review) names one of `files` as a whole path."""
    return any(re.search(rf"(?<![\w./-]){re.escape(f)}(?![\w/-])", text) for f in files if f)
