"""The activities a `supervisor worker` runs, on this host's clone of the repository and its
local Docker engine (no remote Docker socket):

- RUN_STEP, the engine's next step of a task: `supervisor resume` limited to one step
  (`tasks.resume(one_step=True)`), with the same crash clean-up (a previous attempt's
  containers, worktrees and running steps, e.g. of a worker killed mid-step), the same
  decisions, one transaction per transition. A component fan-out hands its ready components
  back to the workflow instead of running them (status "dispatched");
- RUN_COMPONENT, one of those components' worker and gates (supervisor/temporal/components.py),
  any number at once on any hosts.

Each runs in a thread while the activity heartbeats, so Temporal retries it elsewhere when this
host stops answering.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from temporalio import activity
from temporalio.exceptions import ApplicationError

from supervisor.errors import (
    ApprovalRequired,
    GitError,
    RemoteNotUpdatedError,
    SupervisorError,
    WorkflowBusyError,
)
from supervisor.temporal import remote
from supervisor.temporal.cache import ProjectCache
from supervisor.temporal.workflow import (
    RUN_COMPONENT,
    RUN_STEP,
    ComponentInput,
    StepResult,
    TaskInput,
)
from supervisor.workflow.steps.dispatched import ComponentsDispatched

if TYPE_CHECKING:
    from collections.abc import Callable

T = TypeVar("T")

HEARTBEAT_EVERY = 1.0  # cheap (a local call the SDK batches); keeps short timeouts usable


class StepActivities:
    def __init__(self, repo: Path, max_parallel: int) -> None:
        self.repo = repo
        self.pool = ThreadPoolExecutor(max_parallel, thread_name_prefix="supervisor-step")
        self.projects = ProjectCache()  # settings read once per configuration, not per step

    @activity.defn(name=RUN_STEP)
    async def run_step(self, task: TaskInput) -> StepResult:
        return await self._heartbeating(self._step, task)

    @activity.defn(name=RUN_COMPONENT)
    async def run_component(self, task: ComponentInput) -> dict[str, Any]:
        return await self._heartbeating(self._component, task)

    async def _heartbeating(self, work: Callable[[Any], T], task: Any) -> T:
        running = asyncio.get_running_loop().run_in_executor(self.pool, work, task)
        while True:
            done, _ = await asyncio.wait({running}, timeout=HEARTBEAT_EVERY)
            if done:
                return running.result()
            activity.heartbeat()

    def _component(self, task: ComponentInput) -> dict[str, Any]:
        from supervisor.temporal.components import run_component

        project = self.projects.open(self.repo)[0]
        shared = project.settings.temporal.remote
        try:
            return run_component(project, task.wf_id, task.component, shared)
        except GitError as e:  # the remote out of reach: Temporal tries again later
            raise ApplicationError(e.message, type="RemoteUnavailable") from e

    def _step(self, task: TaskInput) -> StepResult:
        from supervisor import tasks

        wf_id = task.wf_id
        opened = self.projects.open(self.repo)
        shared = opened[0].settings.temporal.remote
        spread = opened[0].settings.temporal.spread_components
        publish = None
        try:
            if shared:  # this host's clone takes the task's refs from the shared remote
                with opened[0].store() as store:
                    row = store.workflow(wf_id)
                try:
                    lease = remote.fetch(opened[0].root, shared, row)
                except GitError as e:  # the remote out of reach: Temporal tries again later
                    raise ApplicationError(e.message, type="RemoteUnavailable") from e

                def publish(_: int) -> None:
                    remote.push(opened[0].root, shared, row, lease)

            wf = tasks.resume(
                wf_id, self.repo, one_step=True, opened=opened, before_commit=publish,
                dispatch=(task.components or []) if spread else None,
            )  # fmt: skip
        except ComponentsDispatched as handed:
            return StepResult("dispatched", components=handed.ids)
        except ApprovalRequired:
            return StepResult("awaiting_approval")
        except RemoteNotUpdatedError as e:
            # Nothing of the step was committed: Temporal runs it again, after a fresh fetch.
            raise ApplicationError(e.message, type="RemoteUnavailable") from e
        except WorkflowBusyError as e:
            # Another process still holds the task (e.g. start-task finishing its set-up).
            raise ApplicationError(e.message, type="WorkflowBusy") from e
        except SupervisorError as e:
            # Recorded by the engine (the task failed); a person decides what next.
            return StepResult("failed", error=e.message)
        waiting = wf.context.get("waiting_until")
        return StepResult(wf.status, float(waiting) if waiting else None, wf.error)
