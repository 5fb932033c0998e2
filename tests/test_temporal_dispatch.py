"""A component fan-out under the Temporal runner, in the workflow's own code (the real dev
server, scripted activities, no Docker): the step hands its components over, the workflow runs
one activity per component at once, and runs the step again with every component's result; a
component no worker could run comes back as that component's failure, not the task's end.
And the plain data a component's result travels as keeps what the step decides on."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import pytest
from temporal_support import DevServer
from temporalio import activity
from temporalio.client import Client
from temporalio.exceptions import ApplicationError
from temporalio.worker import Replayer, Worker

from supervisor.core.config import Settings, StepDef
from supervisor.core.dag import WorkGraph
from supervisor.core.errors import SpecConflictError, StepFailedError
from supervisor.core.schemas import PlanOutput
from supervisor.policy.recovery import Action, Category, Classification
from supervisor.state.records import Workflow
from supervisor.temporal.workflow import (
    RUN_COMPONENT,
    RUN_STEP,
    WORKFLOW_NAME,
    ComponentInput,
    StepResult,
    TaskInput,
    TaskWorkflow,
)
from supervisor.workflow.steps import dispatched
from supervisor.workflow.steps.base import Outcome, StepContext
from supervisor.workflow.steps.components import ComponentFanOut

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.xdist_group("temporal")


def test_handed_over_components_run_at_once_and_come_back_to_the_step(temporal: DevServer) -> None:
    asyncio.run(_scenario(temporal.address))


async def _scenario(address: str) -> None:
    steps: list[TaskInput] = []
    started: list[str] = []
    all_started = asyncio.Event()

    @activity.defn(name=RUN_STEP)
    async def step(task: TaskInput) -> StepResult:
        steps.append(task)
        if len(steps) == 1:
            return StepResult("dispatched", components=["a", "b", "c"])
        return StepResult("completed")

    @activity.defn(name=RUN_COMPONENT)
    async def build(task: ComponentInput) -> dict[str, Any]:
        assert task.wf_id == 7
        started.append(task.component)
        if len(started) == 3:
            all_started.set()
        await asyncio.wait_for(all_started.wait(), 20)  # none returns before all have started
        if task.component == "c":
            raise ApplicationError("no Docker engine here", non_retryable=True)
        return {"component": task.component, "entry": {"status": "gated", "sha": "1" * 40}}

    client = await Client.connect(address)
    queue = f"spec-{uuid.uuid4().hex[:8]}"
    async with Worker(
        client,
        task_queue=queue,
        workflows=[TaskWorkflow],
        activities=[step, build],
        max_concurrent_activities=4,
    ):
        handle = await client.start_workflow(
            WORKFLOW_NAME, TaskInput(7, 5.0), id=f"wf-{queue}", task_queue=queue,
            result_type=StepResult,
        )  # fmt: skip
        result = await handle.result()
    assert result.status == "completed"
    assert sorted(started) == ["a", "b", "c"]
    assert steps[0].components is None
    back = {r["component"]: r for r in steps[1].components or []}
    assert back["a"]["entry"]["status"] == back["b"]["entry"]["status"] == "gated"
    failed = dispatched.outcome_from(back["c"]["outcome"])
    assert failed.result == "failed" and isinstance(failed.escalate, StepFailedError)
    assert "Component 'c' could not run on any worker" in failed.escalate.message
    history = await handle.fetch_history()
    await Replayer(workflows=[TaskWorkflow]).replay_workflow(history)  # deterministic


def test_a_components_outcome_survives_the_trip_as_plain_data() -> None:
    waiting = Outcome(
        "failed",
        cli="codex",
        transient=Classification(Category.RESOURCE, Action.WAIT, "429 slow down", 30.0),
    )
    data = dispatched.outcome_to(waiting)
    back = dispatched.outcome_from(data or {})
    assert back.transient == waiting.transient and back.cli == "codex"
    strayed = Outcome("failed", feedback="keep to a.py", context={"out_of_scope": {"b.py": ["b"]}})
    back = dispatched.outcome_from(dispatched.outcome_to(strayed) or {})
    assert back.feedback == "keep to a.py" and back.context == strayed.context
    assert dispatched.outcome_to(Outcome("passed", git_sha="1" * 40)) is None
    conflict = SpecConflictError(
        "contradicts", "decide", step="implement/a", reason="5 vs 6", tests=["test_add"]
    )
    back = dispatched.outcome_from(
        dispatched.outcome_to(Outcome("failed", escalate=conflict)) or {}
    )
    assert isinstance(back.escalate, SpecConflictError)  # a person's decision on any host
    assert back.escalate.record() == conflict.record() and back.escalate.message == "contradicts"


def test_components_that_ran_at_once_elsewhere_cannot_both_claim_one_undeclared_file(
    tmp_path: Path,
) -> None:
    """Each host checks its component's files against the claims it saw when it started; two
    components running at once on two hosts both see `shared.py` unclaimed. The step taking
    their results gives it to the first; the second is out of scope, as it would be locally."""

    saved: list[tuple[dict[str, Any], list[Any]]] = []

    def checkpoint(wf_id: int, step: str, context: dict[str, Any], events: list[Any], _: Any):
        saved.append((context, events))

    plan = {
        "status": "COMPLETE",
        "phases": [{"id": "p", "description": "two", "components": [
            {"id": cid, "description": cid, "files": [f"{cid}.py"], "depends_on": []}
            for cid in ("a", "b")
        ]}],
        "estimated_components": 2,
    }  # fmt: skip
    running = {"status": "running", "attempts": 0}
    now = datetime.now(UTC)
    wf = Workflow(
        1, "two", "running", "implement", "claude", "main", "0" * 40, "supervisor/t1", {},
        {"plan": plan, "components": {"a": dict(running), "b": dict(running)}}, None, now, now,
    )  # fmt: skip
    c = StepContext(tmp_path, Settings(), None, None, None, None, checkpoint)  # type: ignore[arg-type]
    fan = ComponentFanOut(c, wf, "implement", StepDef(role="implementer", for_each="component"))
    fan.work = WorkGraph.from_plan(PlanOutput.model_validate(plan))
    gated = {"status": "gated", "sha": "1" * 40, "base": "0" * 40}
    results = [
        {"component": "a", "entry": gated, "claims": ["shared.py"], "outcome": None},
        {"component": "b", "entry": {**gated, "sha": "2" * 40}, "claims": ["shared.py"]},
        {"component": "a", "entry": gated, "claims": [], "outcome": None},  # a repeat: ignored
    ]
    failed = dispatched.take(fan, results)

    assert fan.claims == {"shared.py": "a"}
    assert fan.state["a"]["status"] == "gated"
    assert fan.state["b"]["status"] == "implemented"  # not merged
    [(cid, outcome)] = failed
    assert cid == "b" and outcome.result == "failed"
    assert outcome.context == {"out_of_scope": {"shared.py": ["a"]}}
    assert "shared.py (belongs to component 'a')" in (outcome.feedback or "")
    events = [e for _, evs in saved for e in evs]
    assert [e.type for e in events] == ["component_out_of_scope"]


def test_a_fan_out_at_its_budget_hands_no_component_over_to_the_temporal_workflow(
    tmp_path: Path,
) -> None:
    """Under the Temporal runner the step hands its ready components over instead of running
    them; past the task's budget it hands over none and holds the step, as the local runner
    does (issue 50, item 5): the engine then pauses the task with the figures."""
    from supervisor.policy import budgets
    from supervisor.state.store import EventSpec, Store

    store = Store(tmp_path / "state.db")
    created = store.create_workflow(
        description="two",
        cli="claude",
        base_branch="main",
        base_sha="0" * 40,
        branch_for_id=lambda i: f"ai/{i}-two",
        definition={},
        first_step="implement",
    )
    store.add_event(created.id, EventSpec("plan", step="plan", input_tokens=150, output_tokens=60))
    plan = {
        "status": "COMPLETE",
        "phases": [{"id": "p", "description": "two", "components": [
            {"id": cid, "description": cid, "files": [f"{cid}.py"], "depends_on": []}
            for cid in ("a", "b")
        ]}],
        "estimated_components": 2,
    }  # fmt: skip
    budget = {"task": {"usd": None, "tokens": 200}, "step": {"usd": None, "tokens": None}}
    context = {"plan": plan, "integrated": "0" * 40, budgets.KEY: budget}
    now = datetime.now(UTC)
    wf = Workflow(
        created.id, "two", "running", "implement", "claude", "main", "0" * 40, "ai/1-two", {},
        context, None, now, now,
    )  # fmt: skip

    def checkpoint(*_: Any) -> None: ...

    c = StepContext(tmp_path, Settings(), store, None, None, None, checkpoint, dispatch=[])  # type: ignore[arg-type]
    fan = ComponentFanOut(c, wf, "implement", StepDef(role="implementer", for_each="component"))

    outcome = fan.run()  # would raise ComponentsDispatched were the budget not checked

    assert outcome.result == budgets.HELD
    [held] = outcome.events
    assert held.type == "components_held" and held.payload["components"] == ["a", "b"]
    assert (held.payload["scope"], held.payload["over"]) == ("task", ["tokens"])
    store.close()
