"""Submitting a task to Temporal and telling its workflow about a person's decision.

The submission is recorded as a `temporal_submitted` event (address, namespace, queue, workflow
id), so that `approve` and `reject`, from any machine with the shared state database, know where
to send the signal without any configuration of their own.
"""

from __future__ import annotations

import asyncio
import hashlib
from typing import TYPE_CHECKING, Any

from supervisor.errors import RunnerUnavailableError

if TYPE_CHECKING:
    from pathlib import Path

    from supervisor.config import TemporalSettings
    from supervisor.state.store import Store, Workflow

SUBMITTED = "temporal_submitted"


def workflow_id(repo: Path, wf_id: int) -> str:
    """Unique per repository and task (two repositories' task 1 are two workflows)."""
    digest = hashlib.sha256(str(repo.resolve()).encode()).hexdigest()[:12]
    return f"supervisor-{digest}-{wf_id}"


async def connect(address: str, namespace: str) -> Any:
    from temporalio.client import Client

    try:
        return await Client.connect(address, namespace=namespace)
    except Exception as e:  # the SDK raises RuntimeError for every connection failure
        raise RunnerUnavailableError(
            f"Cannot reach the Temporal server at {address} (namespace {namespace}): {e}",
            "Start it (`temporal server start-dev`, or bash scripts/setup-scaleout.sh --trial) or "
            "set temporal.address in your config; `--backend embedded` runs the task here.",
        ) from e


def submit_task(store: Store, repo: Path, wf: Workflow, settings: TemporalSettings) -> str:
    """Start the task's Temporal workflow; its id. The workers run it from here on."""
    from supervisor.state.store import EventSpec
    from supervisor.temporal.workflow import WORKFLOW_NAME, TaskInput

    wid = workflow_id(repo, wf.id)
    if settings.remote:  # the worker hosts' clones take the task from there
        from supervisor.temporal import remote

        remote.publish(repo, settings.remote, wf)

    async def start() -> None:
        client = await connect(settings.address, settings.namespace)
        await client.start_workflow(
            WORKFLOW_NAME,
            TaskInput(wf.id, settings.heartbeat_timeout_seconds),
            id=wid,
            task_queue=settings.task_queue,
        )

    asyncio.run(start())
    payload = {
        "address": settings.address,
        "namespace": settings.namespace,
        "task_queue": settings.task_queue,
        "workflow_id": wid,
    }
    store.add_event(wf.id, EventSpec(SUBMITTED, status="submitted", payload=payload))
    return wid


def submission(store: Any, wf_id: int) -> dict[str, Any] | None:
    """Where the task was submitted, or None when this process's runner runs it."""
    found = [e for e in store.events(wf_id) if e.type == SUBMITTED]
    return dict(found[-1].payload) if found else None


def signal_decided(where: dict[str, Any]) -> None:
    """Wake the workflow waiting for a decision (already recorded in the state database)."""
    from supervisor.temporal.workflow import DECIDED_SIGNAL

    async def send() -> None:
        client = await connect(where["address"], where["namespace"])
        await client.get_workflow_handle(where["workflow_id"]).signal(DECIDED_SIGNAL)

    asyncio.run(send())


def submitter(repo: Path) -> Any:
    """The `submit` callback of `tasks.start_task` for this repository's Temporal settings."""
    from supervisor.opening import open_project

    project = open_project(repo)

    def submit(wf: Workflow) -> None:
        with project.store() as store:
            submit_task(store, project.root, wf, project.settings.temporal)

    return submit
