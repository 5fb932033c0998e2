"""The Temporal workflow's own behaviour, on the real dev server without Docker: the engine's
step (the activity) is replaced by a scripted one that returns the statuses the engine would
leave. A rate limit is a durable timer to its reset; an approval waits for the signal; the
workflow replays deterministically from its history."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import TYPE_CHECKING

import pytest
from temporal_support import DevServer
from temporalio import activity
from temporalio.client import Client
from temporalio.worker import Replayer, Worker

from supervisor.temporal.workflow import (
    DECIDED_SIGNAL,
    RUN_STEP,
    WORKFLOW_NAME,
    StepResult,
    TaskInput,
    TaskWorkflow,
)

if TYPE_CHECKING:
    pass

pytestmark = pytest.mark.xdist_group("temporal")


def test_rate_limit_waits_on_a_timer_and_approval_on_the_signal(temporal: DevServer) -> None:
    asyncio.run(_scenario(temporal.address))


async def _scenario(address: str) -> None:
    reset = time.time() + 2.0
    script = [
        StepResult("rate_limited", waiting_until=reset),
        StepResult("awaiting_approval"),
        StepResult("completed"),
    ]
    calls: list[float] = []

    @activity.defn(name=RUN_STEP)
    async def scripted(task: TaskInput) -> StepResult:
        assert task.wf_id == 7
        calls.append(time.time())
        return script[len(calls) - 1]

    client = await Client.connect(address)
    queue = f"spec-{uuid.uuid4().hex[:8]}"
    async with Worker(client, task_queue=queue, workflows=[TaskWorkflow], activities=[scripted]):
        handle = await client.start_workflow(
            WORKFLOW_NAME,
            TaskInput(7, 5.0),
            id=f"wf-{queue}",
            task_queue=queue,
            result_type=StepResult,
        )
        deadline = time.monotonic() + 120  # the second call ends it, loaded or not
        while len(calls) < 2 and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        assert len(calls) == 2
        assert calls[1] >= reset - 0.05  # not run again before the rate limit's reset
        await asyncio.sleep(1.5)
        assert len(calls) == 2  # waiting for a person: nothing runs
        await handle.signal(DECIDED_SIGNAL)
        result = await handle.result()
    assert result.status == "completed"
    assert len(calls) == 3
    history = await handle.fetch_history()
    await Replayer(workflows=[TaskWorkflow]).replay_workflow(history)  # raises if not deterministic


def test_a_long_task_continues_as_a_new_run_with_a_short_history_and_keeps_its_decision(
    temporal: DevServer,
) -> None:
    """Past its history limit the workflow continues as a new run of itself (a worker that
    replays it replays a short history); a decision signalled while a step ran is carried into
    the new run, so the approval that follows does not wait for a second one."""
    asyncio.run(_long_task(temporal.address))


async def _long_task(address: str) -> None:
    steps = 12
    calls: list[int] = []
    handle_box: list[object] = []

    @activity.defn(name=RUN_STEP)
    async def scripted(task: TaskInput) -> StepResult:
        calls.append(task.wf_id)
        if len(calls) == 3:  # a person decides early, while a step runs
            await handle_box[0].signal(DECIDED_SIGNAL)  # type: ignore[attr-defined]
        if len(calls) == steps - 1:
            return StepResult("awaiting_approval")
        return StepResult("completed" if len(calls) == steps else "running")

    client = await Client.connect(address)
    queue = f"spec-{uuid.uuid4().hex[:8]}"
    async with Worker(client, task_queue=queue, workflows=[TaskWorkflow], activities=[scripted]):
        handle = await client.start_workflow(
            WORKFLOW_NAME,
            TaskInput(9, 5.0, history_limit=20),
            id=f"wf-{queue}",
            task_queue=queue,
            result_type=StepResult,
        )
        handle_box.append(handle)
        result = await asyncio.wait_for(handle.result(), timeout=60)
    assert result.status == "completed"
    assert calls == [9] * steps
    runs = [w async for w in client.list_workflows(f"WorkflowId = 'wf-{queue}'")]
    assert len(runs) >= 3  # 12 steps of ~6 events each, 20 events a run
    for run in runs:
        history = await client.get_workflow_handle(run.id, run_id=run.run_id).fetch_history()
        assert len(history.events) <= 20 + 8  # the limit, and the step that crossed it
        await Replayer(workflows=[TaskWorkflow]).replay_workflow(history)
