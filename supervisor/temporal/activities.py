"""The activity a `supervisor worker` runs: the engine's next step of a task, on this host's
clone of the repository and its local Docker engine (no remote Docker socket).

It is `supervisor resume` limited to one step (`tasks.resume(one_step=True)`): the same crash
clean-up (a previous attempt's containers, worktrees and running steps, e.g. of a worker killed
mid-step), the same decisions, one transaction per transition. The step runs in a thread while
the activity heartbeats, so Temporal retries it elsewhere when this host stops answering.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from temporalio import activity
from temporalio.exceptions import ApplicationError

from supervisor.errors import ApprovalRequired, GitError, SupervisorError, WorkflowBusyError
from supervisor.temporal import remote
from supervisor.temporal.cache import ProjectCache
from supervisor.temporal.workflow import RUN_STEP, StepResult, TaskInput

HEARTBEAT_EVERY = 1.0  # cheap (a local call the SDK batches); keeps short timeouts usable


class StepActivities:
    def __init__(self, repo: Path, max_parallel: int) -> None:
        self.repo = repo
        self.pool = ThreadPoolExecutor(max_parallel, thread_name_prefix="supervisor-step")
        self.projects = ProjectCache()  # settings read once per configuration, not per step

    @activity.defn(name=RUN_STEP)
    async def run_step(self, task: TaskInput) -> StepResult:
        running = asyncio.get_running_loop().run_in_executor(self.pool, self._step, task.wf_id)
        while True:
            done, _ = await asyncio.wait({running}, timeout=HEARTBEAT_EVERY)
            if done:
                return running.result()
            activity.heartbeat()

    def _step(self, wf_id: int) -> StepResult:
        from supervisor import tasks

        opened = self.projects.open(self.repo)
        shared = opened[0].settings.temporal.remote
        publish = None
        try:
            if shared:  # this host's clone takes the task's refs from the shared remote
                with opened[0].store() as store:
                    row = store.workflow(wf_id)
                try:
                    remote.fetch(opened[0].root, shared, row)
                except GitError as e:  # the remote out of reach: Temporal tries again later
                    raise ApplicationError(e.message, type="RemoteUnavailable") from e

                def publish(_: int) -> None:
                    remote.push(opened[0].root, shared, row)

            wf = tasks.resume(wf_id, self.repo, one_step=True, opened=opened, before_commit=publish)
        except ApprovalRequired:
            return StepResult("awaiting_approval")
        except WorkflowBusyError as e:
            # Another process still holds the task (e.g. start-task finishing its set-up).
            raise ApplicationError(e.message, type="WorkflowBusy") from e
        except SupervisorError as e:
            # Recorded by the engine (the task failed); a person decides what next.
            return StepResult("failed", error=e.message)
        waiting = wf.context.get("waiting_until")
        return StepResult(wf.status, float(waiting) if waiting else None, wf.error)
