"""The Temporal runner in the spec's own process, over the stand-in sandbox: the real dev server,
the real submission (`submit_task`), the real workflow code and the real activities
(supervisor/temporal/activities.py) of a worker polling the task's queue, the real engine, git
and state database; only the container is the stand-in's (supervisor/sandbox/standin.py).

What it buys: the team-mode parity specs (issue 50, item 5) run the same task as a local spec
through Temporal's dispatch (each component an activity of its own) in seconds, sharing one
dev server per file, instead of a real worker process, Docker and the real CLI per spec.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from typing import TYPE_CHECKING, Any

from supervisor.sandbox.standin import StandinSandbox

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable
    from pathlib import Path

    import pytest
    from temporal_support import DevServer

    from supervisor.state.records import Workflow

    Watch = Callable[[Any], Awaitable[None]]


class Sandbox(StandinSandbox):
    """The stand-in, with the keyword a component's activity passes (`run_dirs`)."""

    def remove_stale(self, labels: dict[str, str], **_: Any) -> list[str]:
        return []


def to_temporal(repo: Path, server: DevServer, heartbeat_s: float = 30) -> str:
    """Point the repository's config at `server`, on a task queue of this spec's own (trusted,
    as the spec's own); the queue. `heartbeat_s`: how long a silent worker keeps a step."""
    from supervisor.guard.trust import trust

    queue = f"spec-{uuid.uuid4().hex[:8]}"
    with (repo / ".supervisor" / "config.yaml").open("a") as config:
        config.write(
            f"temporal: {{address: '{server.address}', task_queue: {queue}, "
            f"heartbeat_timeout_seconds: {heartbeat_s}}}\n"
        )
    trust(repo)
    return queue


def use_sandbox(monkeypatch: pytest.MonkeyPatch, sandbox: StandinSandbox) -> None:
    """Every step's and every component's activity runs its workers in `sandbox`."""
    from supervisor.lifecycle import tasks
    from supervisor.temporal import components

    monkeypatch.setattr(tasks, "open_sandbox", lambda project, clis, **_: sandbox)
    monkeypatch.setattr(components, "open_sandbox", lambda project, clis, **_: sandbox)


def run_on_temporal(
    repo: Path, server: DevServer, queue: str, task: str, watch: Watch | None = None
) -> Workflow:
    """Submit `task` as `start-task --backend temporal` does, run a worker of the queue in this
    process until the task's workflow ends (done, failed, or waiting for a person), and return
    the task as the state database has it. `watch(handle)`: runs meanwhile, on the workflow's
    handle (to act once Temporal shows a moment, e.g. an activity's failed attempt)."""
    wf_id, wid = submit(repo, task)
    return work_until_done(repo, server, queue, wf_id, wid, watch)


def submit(repo: Path, task: str) -> tuple[int, str]:
    """`task` submitted as `start-task --backend temporal` does: its id and workflow id."""
    from supervisor.lifecycle.opening import reading
    from supervisor.temporal.submit import submit_task

    submitted = submit_task(task, repo)
    with reading(repo) as store:
        wid = next(
            e.payload["workflow_id"]
            for e in store.events(submitted.id)
            if e.type == "temporal_submitted"
        )
    return submitted.id, str(wid)


def work_until_done(
    repo: Path, server: DevServer, queue: str, wf_id: int, wid: str, watch: Watch | None = None
) -> Workflow:
    """A worker of the queue in this process until the task's workflow ends; the task."""
    from supervisor.lifecycle.opening import reading

    asyncio.run(_work_until_done(repo, server.address, queue, wid, watch))
    with reading(repo) as store:
        return store.workflow(wf_id)


def repository_queue(repo: Path, queue: str) -> str:
    """The queue a worker of `repo` polls when told `queue` (`worker --queue`): its name with the
    repository's identity appended (supervisor/temporal/identity.py), as the submission's."""
    from supervisor.lifecycle.opening import open_project
    from supervisor.temporal.identity import queue_for

    project = open_project(repo)
    return queue_for(project.root, project.settings.temporal, queue)


async def _work_until_done(
    repo: Path, address: str, queue: str, wid: str, watch: Watch | None
) -> None:
    from temporalio.client import Client
    from temporalio.worker import Worker

    from supervisor.temporal.activities import StepActivities
    from supervisor.temporal.workflow import StepResult, TaskWorkflow

    client = await Client.connect(address)
    steps = StepActivities(repo, 4)
    async with Worker(
        client,
        task_queue=repository_queue(repo, queue),
        workflows=[TaskWorkflow],
        activities=[steps.run_step, steps.run_component, steps.record_failure],
        max_concurrent_activities=4,
    ):
        handle = client.get_workflow_handle(wid, result_type=StepResult)
        watching = asyncio.ensure_future(watch(handle)) if watch is not None else None
        try:
            await asyncio.wait_for(handle.result(), 240)
        finally:
            if watching is not None:
                watching.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await watching
    steps.pool.shutdown(wait=True)
