"""How deep a task goes: simple (no planner), planned (the fixed pipeline) or researched.

Why: one fixed depth made a one-line fix pay for a planner and its plan, and gave an unfamiliar,
risky change no more thought than a typo. `start-task --depth auto` (the command's default) runs
the `analyzer` role first; its verdict (schemas.AnalysisOutput) scores the task 1-10 and names a
path. The engine then chooses the path here, from the score and the thresholds (limits.yaml
`depth`, a template's `depth.researched_min`), so a computed score is never ignored:

- the score sets the least depth: up to `simple_max` simple, from `researched_min` researched,
  planned between;
- the analyzer's own `path` may only make the task deeper than its score says, never shallower
  (going deeper costs one model conversation; going too shallow costs a failed task);
- a template whose plan waits for a person's sign-off (enterprise) is never simple by score: the
  analyzer is a worker, and a low score must not skip a person's check.

Both the score's path and the analyzer's are recorded (event `depth_chosen`, WorkflowState.depth).
`--depth simple|planned|researched` skips the analyzer; `planned` is exactly the fixed pipeline.

The depth is a property of the task's pinned definition: `prepare` adds the `analyze` and
`research` steps it needs in front of the template's planner step at start-task, and `route` (called
by the engine's decision, workflow/decide.py) sends the workflow from `analyze` to the path's
first step. The simple path writes a one-component plan covering the whole task, so the component
step, its gates, the review and the approval policy run unchanged.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from supervisor.core.config import StepDef, WorkflowDef
from supervisor.core.errors import ConfigError
from supervisor.state.records import EventSpec
from supervisor.workflow.state import Asked, DepthState, PathName

__all__ = ["Asked", "DepthState", "PathName"]

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from supervisor.core.config import DepthSettings
    from supervisor.workflow.state import WorkflowState

ASKED: tuple[Asked, ...] = ("auto", "simple", "planned", "researched")
ORDER: dict[str, int] = {"simple": 0, "planned": 1, "researched": 2}
ANALYZE, RESEARCH = "analyze", "research"
SIMPLE_COMPONENT = "task"


def choose(
    complexity: int, suggested: PathName, simple_max: int, researched_min: int
) -> tuple[PathName, PathName, str]:
    """(path taken, path by the score alone, why): the score gates, the analyzer may only go
    deeper."""
    by_score: PathName = (
        "simple"
        if complexity <= simple_max
        else "researched"
        if complexity >= researched_min
        else "planned"
    )
    rule = f"simple up to {simple_max}, researched from {researched_min}"
    if ORDER[suggested] > ORDER[by_score]:
        why = (
            f"complexity {complexity} gives {by_score} ({rule}); the analyzer asked for the "
            f"deeper {suggested}, which wins"
        )
        return suggested, by_score, why
    if suggested != by_score:
        why = (
            f"complexity {complexity} gives {by_score} ({rule}); the analyzer's shallower "
            f"{suggested} is overruled by the threshold"
        )
        return by_score, by_score, why
    return by_score, by_score, f"complexity {complexity} ({rule})"


def prepare(
    definition: WorkflowDef,
    asked: Asked,
    settings: DepthSettings,
    description: str,
    plans: Callable[[str], bool],
) -> tuple[WorkflowDef, dict[str, Any], list[EventSpec]]:
    """The definition the task pins for depth `asked`, its initial context and events.
    `plans(role)`: whether a role answers with a plan (its first step must be a planner's for
    any depth but the fixed one)."""
    plan_step = definition.initial_step
    first = definition.steps[plan_step]
    if not first.role or first.for_each or not plans(first.role):
        if asked in ("auto", "planned"):
            return definition, {}, []  # a workflow of its own shape: its depth is fixed
        raise ConfigError(
            f"--depth {asked} needs a workflow that starts with a planner step; this one starts "
            f"with '{plan_step}'.",
            "Use --depth planned (or auto), or a template that starts with `plan`.",
        )
    researched_min = definition.depth.researched_min if definition.depth else None
    pin = DepthState(
        asked=asked,
        simple_max=settings.simple_max,
        researched_min=researched_min or settings.researched_min,
        plan_step=plan_step,
        simple_step=_simple_step(definition, plan_step),
        plan_signed_off=first.human_approval,
    )
    steps = dict(definition.steps)
    added: dict[str, StepDef] = {}
    if asked == "auto":
        pin.analyze_step = _free(ANALYZE, steps)
        added[pin.analyze_step] = StepDef(role="analyzer", next=plan_step, max_retries=2)
    if asked in ("auto", "researched"):
        pin.research_step = _free(RESEARCH, steps)
        added[pin.research_step] = StepDef(role="investigator", next=plan_step, max_retries=2)
    context: dict[str, Any] = {}
    events: list[EventSpec] = []
    initial = pin.analyze_step or plan_step
    if asked != "auto":
        pin.path = asked
        pin.why = f"start-task --depth {asked} (no analyzer)"
        initial = {"simple": pin.simple_step, "researched": pin.research_step or plan_step}.get(
            asked, plan_step
        )
        if asked == "simple":
            context.update(simple_start(description, []))
        events.append(chosen_event(pin, None))
    context["depth"] = pin.model_dump(mode="json")
    pinned = definition.model_copy(
        update={"initial_step": initial, "steps": {**added, **steps}}  # shown first
    )
    return pinned, context, events


def route(name: str, state: WorkflowState, description: str) -> tuple[str, EventSpec] | None:
    """After the analyzer's step passed: the path's first step, and the event recording the
    choice; None for any other step. Writes the choice (and a simple path's plan) to `state`."""
    pin = state.depth
    if pin is None or name != pin.analyze_step or state.analysis is None:
        return None
    verdict = state.analysis
    pin.path, pin.by_score, pin.why = choose(
        verdict.complexity, verdict.path, pin.simple_max, pin.researched_min
    )
    pin.suggested = verdict.path
    if pin.path == "simple" and pin.plan_signed_off:
        pin.path = "planned"
        pin.why += "; planned: the plan waits for a person's sign-off, which no score skips"
    if pin.path == "simple":
        start = simple_start(description, verdict.expected_files)
        state.plan, state.planned_by = start["plan"], start["planned_by"]
        state.components, state.integrated, state.claims = {}, None, {}
    following = {"simple": pin.simple_step, "researched": pin.research_step or pin.plan_step}
    return following.get(pin.path, pin.plan_step), chosen_event(pin, verdict.model_dump())


def chosen_event(pin: DepthState, verdict: dict[str, Any] | None) -> EventSpec:
    payload: dict[str, Any] = {
        "asked": pin.asked,
        "path": pin.path,
        "by_score": pin.by_score,
        "suggested": pin.suggested,
        "why": pin.why,
        "simple_max": pin.simple_max,
        "researched_min": pin.researched_min,
    }
    if verdict is not None:
        payload["verdict"] = verdict
    return EventSpec("depth_chosen", step=pin.analyze_step, status=pin.path, payload=payload)


def simple_start(description: str, files: list[str]) -> dict[str, Any]:
    """The simple path's plan: one component, the whole task, the files the analyzer expects
    (a hint for the implementer's context, not a limit: no other component owns any file)."""
    plan = {
        "status": "COMPLETE",
        "summary": "Simple path: one implementer does the whole task (no planner).",
        "phases": [
            {
                "id": "simple",
                "description": "the whole task",
                "components": [
                    {
                        "id": SIMPLE_COMPONENT,
                        "description": description[:2000],
                        "files": sorted(set(files))[:50],
                        "depends_on": [],
                    }
                ],
            }
        ],
        "dependencies": [],
        "estimated_components": 1,
        "risks": [],
    }
    return {"plan": plan, "planned_by": "depth"}


def research_document(context: Mapping[str, Any]) -> str:
    """The investigator's report as the planner reads it; '' when the task was not researched."""
    report = context.get("research")
    return json.dumps(report, indent=2) if report else ""


def original(definition: WorkflowDef, context: Mapping[str, Any]) -> WorkflowDef:
    """`definition` without the steps `prepare` added: the template's own, to compare."""
    pin = DepthState.model_validate(context["depth"]) if context.get("depth") else None
    if pin is None:
        return definition
    added = {pin.analyze_step, pin.research_step} - {None}
    steps = {k: v for k, v in definition.steps.items() if k not in added}
    return definition.model_copy(update={"initial_step": pin.plan_step, "steps": steps})


def _simple_step(definition: WorkflowDef, plan_step: str) -> str:
    """The first component step after the planner (past an interfaces step, say), else the
    planner's `next`: where a task without a plan starts."""
    seen: set[str] = set()
    current = definition.steps[plan_step].next
    while current is not None and current not in seen:
        seen.add(current)
        if definition.steps[current].for_each == "component":
            return current
        current = definition.steps[current].next
    following = definition.steps[plan_step].next
    if following is None:
        raise ConfigError(
            f"The workflow's planner step '{plan_step}' has no `next`.", "Give it a next step."
        )
    return following


def _free(name: str, steps: Mapping[str, StepDef]) -> str:
    """`name`, or `depth_<name>` when the template has a step of that name already."""
    return name if name not in steps else f"depth_{name}"
