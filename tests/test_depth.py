"""Adaptive depth as pure decisions (supervisor/workflow/depth.py): the analyzer's verdict is a
strict schema, the path comes from the score and the thresholds (the analyzer may only go
deeper), the definition a task pins for each depth, and the engine's decision after the analyzer.
The same on the real CLI, sandbox and scripted API: tests/test_depth_e2e.py."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from supervisor.core import depth_view
from supervisor.core.config import (
    DepthSettings,
    FailoverSettings,
    StepDef,
    TemplateDepth,
    WorkflowDef,
)
from supervisor.core.errors import ConfigError, ParsingError
from supervisor.core.parsing import parse_worker_output
from supervisor.core.schemas import AnalysisOutput, PlanOutput, ResearchOutput
from supervisor.fakeapi.script import ScriptPlayer, load_script
from supervisor.state.records import Workflow
from supervisor.state.store import EventSpec
from supervisor.workflow import depth
from supervisor.workflow.decide import Facts, decide
from supervisor.workflow.state import WorkflowState
from supervisor.workflow.steps.base import Outcome

BASE = WorkflowDef(
    initial_step="plan",
    steps={
        "plan": StepDef(role="planner", next="implement"),
        "implement": StepDef(role="implementer", for_each="component", next="test"),
        "test": StepDef(gate="test", next="review", on_fail="implement"),
        "review": StepDef(role="reviewer", next="commit", on_reject="implement"),
        "commit": StepDef(action="commit"),
    },
)
TASK = "Fix multiply() in calc.py"


def plans(role: str) -> bool:
    return role == "planner"


def verdict(**changes: Any) -> dict[str, Any]:
    return {
        "complexity": 2,
        "path": "simple",
        "reasons": ["one function"],
        "expected_files": ["calc.py"],
        "recommended_components": 1,
        **changes,
    }


def fenced(data: dict[str, Any]) -> str:
    import json

    return "```json\n" + json.dumps(data) + "\n```"


# -- the verdict's schema ------------------------------------------------------------------------


def test_a_complete_verdict_is_read() -> None:
    read = parse_worker_output(fenced(verdict()), AnalysisOutput)
    assert (read.complexity, read.path, read.expected_files) == (2, "simple", ["calc.py"])


@pytest.mark.parametrize(
    ("bad", "named"),
    [
        ({"complexity": 11}, "complexity"),
        ({"complexity": 0}, "complexity"),
        ({"path": "quick"}, "path"),
        ({"reasons": []}, "reasons"),
        ({"recommended_components": 0}, "recommended_components"),
        ({"mood": "sure"}, "mood"),
    ],
)
def test_a_verdict_out_of_range_or_unknown_is_refused_with_the_field_named(
    bad: dict[str, Any], named: str
) -> None:
    with pytest.raises(ParsingError, match=named):
        parse_worker_output(fenced(verdict(**bad)), AnalysisOutput)


@pytest.mark.parametrize("missing", ["complexity", "path", "reasons", "expected_files"])
def test_a_verdict_missing_a_field_is_refused(missing: str) -> None:
    data = verdict()
    del data[missing]
    with pytest.raises(ParsingError, match=missing):
        parse_worker_output(fenced(data), AnalysisOutput)


def test_a_research_report_needs_findings_and_every_list() -> None:
    good = {"findings": ["f"], "files": ["a.py"], "risks": [], "open_questions": []}
    assert ResearchOutput.model_validate(good).files == ["a.py"]
    with pytest.raises(ParsingError, match="findings"):
        parse_worker_output(fenced({**good, "findings": []}), ResearchOutput)
    with pytest.raises(ParsingError, match="open_questions"):
        parse_worker_output(fenced({"findings": ["f"], "files": [], "risks": []}), ResearchOutput)


# -- the choice ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("score", "path"),
    [
        (1, "simple"),
        (3, "simple"),
        (4, "planned"),
        (6, "planned"),
        (7, "researched"),
        (10, "researched"),
    ],
)
def test_the_score_and_the_thresholds_give_the_path(score: int, path: str) -> None:
    taken, by_score, _ = depth.choose(score, path, 3, 7)  # type: ignore[arg-type]
    assert taken == by_score == path


def test_a_high_score_is_never_ignored_for_the_analyzers_shallower_path() -> None:
    taken, by_score, why = depth.choose(8, "simple", 3, 7)
    assert (taken, by_score) == ("researched", "researched")
    assert "overruled by the threshold" in why


def test_the_analyzer_may_ask_for_a_deeper_path_than_its_score() -> None:
    taken, by_score, why = depth.choose(2, "planned", 3, 7)
    assert (taken, by_score) == ("planned", "simple")
    assert "deeper planned, which wins" in why


def test_thresholds_that_overlap_are_a_config_error() -> None:
    with pytest.raises(ValueError, match="simple_max"):
        DepthSettings(simple_max=7, researched_min=7)


# -- the definition each depth pins --------------------------------------------------------------


def prepared(asked: depth.Asked, definition: WorkflowDef = BASE) -> Any:
    return depth.prepare(definition, asked, DepthSettings(), TASK, plans)


def test_planned_is_the_fixed_pipeline_unchanged() -> None:
    pinned, context, events = prepared("planned")
    assert pinned == BASE
    assert context["depth"]["path"] == "planned" and "plan" not in context
    assert [e.type for e in events] == ["depth_chosen"]


def test_auto_puts_the_analyzer_first_and_keeps_research_for_the_decision() -> None:
    pinned, context, events = prepared("auto")
    assert pinned.initial_step == "analyze" and list(pinned.steps)[:2] == ["analyze", "research"]
    assert pinned.steps["analyze"].role == "analyzer" and pinned.steps["analyze"].next == "plan"
    assert pinned.steps["research"].role == "investigator"
    assert context["depth"]["path"] is None and events == []


def test_simple_starts_at_the_component_step_with_one_component_covering_the_task() -> None:
    pinned, context, _ = prepared("simple")
    assert pinned.initial_step == "implement" and set(pinned.steps) == set(BASE.steps)
    plan = PlanOutput.model_validate(context["plan"])
    [component] = plan.phases[0].components
    assert component.description == TASK and context["planned_by"] == "depth"


def test_simple_skips_an_interfaces_step_between_the_planner_and_the_components() -> None:
    steps = dict(BASE.steps)
    steps["plan"] = StepDef(role="planner", next="interfaces")
    steps["interfaces"] = StepDef(role="tech_lead", interfaces=True, next="implement")
    pinned, _, _ = prepared("simple", BASE.model_copy(update={"steps": steps}))
    assert pinned.initial_step == "implement"


def test_researched_runs_the_investigator_before_the_planner() -> None:
    pinned, _, _ = prepared("researched")
    assert pinned.initial_step == "research" and pinned.steps["research"].next == "plan"
    assert "analyze" not in pinned.steps


def test_a_templates_own_threshold_wins_over_the_limits() -> None:
    own = BASE.model_copy(update={"depth": TemplateDepth(researched_min=5)})
    _, context, _ = prepared("auto", own)
    assert context["depth"]["researched_min"] == 5


def test_a_workflow_without_a_planner_first_keeps_its_shape_or_refuses_a_forced_depth() -> None:
    flow = WorkflowDef(
        initial_step="implement",
        steps={"implement": StepDef(role="implementer", next=None)},
    )
    assert prepared("auto", flow) == (flow, {}, [])
    with pytest.raises(ConfigError, match="--depth simple needs a workflow"):
        prepared("simple", flow)


def test_a_template_step_named_analyze_is_left_alone() -> None:
    steps = {"analyze": StepDef(gate="lint", next="plan"), **BASE.steps}
    flow = WorkflowDef(initial_step="plan", steps=steps)
    pinned, context, _ = prepared("auto", flow)
    assert pinned.initial_step == "depth_analyze" and pinned.steps["analyze"].gate == "lint"
    assert depth.original(pinned, context) == flow


# -- the engine's decision after the analyzer ----------------------------------------------------


def decided(score: int, path: str) -> Any:
    pinned, context, _ = prepared("auto")
    stamp = datetime.now(UTC)
    wf = Workflow(
        1, TASK, "running", "analyze", "claude", "main", "a" * 40, "ai/1-t",
        pinned.model_dump(), context, None, stamp, stamp,
    )  # fmt: skip

    def judge(judged: dict[str, Any], own: list[EventSpec]) -> tuple[bool, EventSpec]:
        return False, EventSpec("risk_assessed")

    facts = Facts(0.0, 6, 3, "default", FailoverSettings(), [], judge)
    outcome = Outcome("passed", context={"analysis": verdict(complexity=score, path=path)})
    return decide(wf, pinned, "analyze", pinned.steps["analyze"], outcome, facts)


def test_a_low_score_goes_to_the_component_step_with_the_analyzers_files() -> None:
    move = decided(2, "simple")
    assert move.next_step == "implement"
    assert move.state.depth is not None and move.state.depth.path == "simple"
    [component] = move.state.plan["phases"][0]["components"]  # type: ignore[index]
    assert component["files"] == ["calc.py"]
    [chosen] = [e for e in move.events if e.type == "depth_chosen"]
    assert chosen.status == "simple" and chosen.payload["verdict"]["complexity"] == 2


def test_a_middle_score_goes_to_the_planner_and_a_high_one_to_research() -> None:
    assert decided(5, "planned").next_step == "plan"
    assert decided(8, "planned").next_step == "research"


def test_the_choice_is_typed_state_and_survives_a_reload() -> None:
    move = decided(8, "simple")
    again = WorkflowState.load(move.state.dump())
    assert again.depth is not None and again.analysis is not None
    assert (again.depth.path, again.depth.suggested, again.analysis.complexity) == (
        "researched",
        "simple",
        8,
    )


def test_status_says_the_path_the_score_and_what_the_analyzer_said() -> None:
    move = decided(8, "simple")
    line = depth_view.label(move.state.dump())
    assert line is not None and line.startswith("researched (complexity 8/10; analyzer: simple)")
    summary = depth_view.summary(move.state.dump())
    assert summary is not None and summary["by_score"] == "researched"


# -- the scripted API's analyzer -----------------------------------------------------------------


def test_the_scripted_api_answers_an_unscripted_analyzer_without_spending_a_conversation() -> None:
    player = ScriptPlayer(load_script({"conversations": [{"turns": [{"text": "plan"}]}]}))
    choice = player.choose("a", "ROLE: analyzer\nTASK: x", 0)
    assert choice.outcome == "default"
    read = parse_worker_output(choice.turn.text or "", AnalysisOutput)
    assert read.path == "planned"
    assert player.choose("b", "ROLE: planner", 0).turn.text == "plan"


def test_a_script_that_names_the_analyzer_answers_it() -> None:
    script = {"conversations": [{"when": "ROLE: analyzer", "turns": [{"text": "mine"}]}]}
    player = ScriptPlayer(load_script(script))
    assert player.choose("a", "ROLE: analyzer", 0).turn.text == "mine"


@pytest.mark.parametrize("path", ["../outside.py", "/etc/passwd", "src/../../x", "\\\\host\\share"])
def test_a_verdict_or_report_naming_a_file_outside_the_repository_is_refused(path: str) -> None:
    """The analyzer and the investigator are workers: their file lists steer context packing
    and the simple path's plan, so a path out of the repository is refused with the reason."""
    with pytest.raises(ParsingError, match="inside it"):
        parse_worker_output(fenced(verdict(expected_files=["calc.py", path])), AnalysisOutput)
    report = {"findings": ["f"], "files": [path], "risks": [], "open_questions": []}
    with pytest.raises(ParsingError, match="inside it"):
        parse_worker_output(fenced(report), ResearchOutput)


@pytest.mark.parametrize(
    ("template", "researched_min"),
    [("_base", 7), ("mvp", 7), ("open_source", 6), ("enterprise", 5), ("security_critical", 4)],
)
def test_the_shipped_templates_research_from_their_own_threshold(
    template: str, researched_min: int
) -> None:
    from supervisor.core.config import TemplateChoice
    from supervisor.workflow import templates

    definition = WorkflowDef.model_validate(
        templates.build(TemplateChoice(template=template), None)
    )
    pinned, context, _ = prepared("auto", definition)
    assert context["depth"]["researched_min"] == researched_min
    state = WorkflowState.load(context).merged(
        {"analysis": verdict(complexity=researched_min, path="planned")}
    )
    routed = depth.route(pinned.initial_step, state, TASK)
    assert routed is not None and routed[0] == "research"
    assert pinned.steps["research"].next == "plan"


def test_a_low_score_never_skips_a_plan_that_waits_for_a_persons_sign_off() -> None:
    steps = {**BASE.steps, "plan": StepDef(role="planner", next="implement", human_approval=True)}
    signed = WorkflowDef(initial_step="plan", steps=steps)
    pinned, context, _ = prepared("auto", signed)
    state = WorkflowState.load(context).merged({"analysis": verdict(complexity=1)})
    routed = depth.route(pinned.initial_step, state, TASK)
    assert routed is not None and routed[0] == "plan"
    assert state.depth is not None and state.depth.path == "planned" and state.plan is None
    assert "sign-off" in state.depth.why
    forced, _, _ = prepared("simple", signed)  # a person asked for it
    assert forced.initial_step == "implement"
