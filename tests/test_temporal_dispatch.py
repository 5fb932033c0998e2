"""A component fan-out under the Temporal runner, in the workflow's own code (the real dev
server, scripted activities, no Docker): the step hands its components over, the workflow runs
one activity per component at once, and runs the step again with every component's result; a
component no worker could run comes back as that component's failure, not the task's end.
And the plain data a component's result travels as keeps what the step decides on."""

from __future__ import annotations

import asyncio
import uuid
from typing import TYPE_CHECKING, Any

import pytest
from temporal_support import DevServer
from temporalio import activity
from temporalio.client import Client
from temporalio.exceptions import ApplicationError
from temporalio.worker import Replayer, Worker

from supervisor.errors import StepFailedError
from supervisor.recovery import Action, Category, Classification
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
from supervisor.workflow.steps.base import Outcome

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.xdist_group("temporal")


def test_handed_over_components_run_at_once_and_come_back_to_the_step(tmp_path: Path) -> None:
    server = DevServer(tmp_path)
    try:
        asyncio.run(_scenario(server.address))
    finally:
        server.stop()


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
