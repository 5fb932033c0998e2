"""The activities a `supervisor worker` runs, on this host's clone of the repository and its
local Docker engine (no remote Docker socket):

- RUN_STEP, the engine's next step of a task: `supervisor resume` limited to one step
  (`tasks.resume(one_step=True)`), with the same crash clean-up (a previous attempt's
  containers, worktrees and running steps, e.g. of a worker killed mid-step), the same
  decisions, one transaction per transition. A component fan-out hands its ready components
  back to the workflow instead of running them (status "dispatched");
- RUN_COMPONENT, one of those components' worker and gates (supervisor/temporal/components.py),
  any number at once on any hosts.

- RECORD_FAILURE, the workflow's last word when a step gave up: the reason, written to the
  state, so the task is `failed` there too and `supervisor resume` hands it back;
- RECORD_FALLBACK, the event of a step whose preferred pool had no worker within its wait.

Worker pools (supervisor/temporal/routes.py): each step and component records where it ran (pool
and worker), each step's result names the next step's pool, and a step sent to a worker outside
its pool comes back "routed", not run.

Each runs in a thread while the activity heartbeats, so Temporal retries it elsewhere when this
host stops answering. A task another process holds (its lease, supervisor/state/leases.py) is
waited for, never failed: the holder finishes, or stops answering and loses its lease (issue 58:
a busy refusal once ended the workflow as failed, with nothing in the events). A step that ends
in a failure the engine did not record (the state still says `running`) records it here, with
an event saying why, so the workflow never ends while the state says the task runs. A task of
another repository is refused (`OtherRepository`): its ids mean other tasks in this clone.

A step or component that Temporal gave to another worker while this one was silent (paused,
cut off) may still finish here once woken: its lease is gone, so it commits, writes and pushes
nothing (the fence: supervisor/state/leases.py), and what it ends with is one line in the
worker's output, not a traceback (`_ended_elsewhere`).
"""

from __future__ import annotations

import asyncio
import functools
import os
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from temporalio import activity
from temporalio.exceptions import ApplicationError

from supervisor.core.errors import (
    ApprovalRequired,
    DatabaseLockedError,
    DiskFullError,
    GitError,
    RemoteNotUpdatedError,
    StateUnavailableError,
    SupervisorError,
    WorkflowBusyError,
)
from supervisor.state import leases
from supervisor.temporal import routes
from supervisor.temporal.cache import ProjectCache
from supervisor.temporal.identity import repository_id
from supervisor.temporal.workflow import (
    RECORD_FAILURE,
    RECORD_FALLBACK,
    RUN_COMPONENT,
    RUN_STEP,
    ComponentInput,
    FailureInput,
    FallbackInput,
    StepResult,
    TaskInput,
)
from supervisor.workflow.steps.dispatched import ComponentsDispatched
from supervisor.workspace import remote

if TYPE_CHECKING:
    from collections.abc import Callable

    from supervisor.lifecycle.tasks import Kept
T = TypeVar("T")


class TaskCount:
    """`--max-tasks`: the distinct tasks whose steps ran here; `done` once there are `limit`
    of them and none of their steps still runs (a step handed on to its pool does not count)."""

    def __init__(self, limit: int | None) -> None:
        self.limit = limit
        self.tasks: set[int] = set()
        self.running = 0
        self.done = asyncio.Event()

    def started(self) -> None:
        self.running += 1

    def ended(self, wf_id: int, ran: bool) -> None:
        self.running -= 1
        if ran:
            self.tasks.add(wf_id)
        if self.limit is not None and len(self.tasks) >= self.limit and self.running == 0:
            self.done.set()

    def said(self) -> str:
        return f"{len(self.tasks)} task(s) ({', '.join(map(str, sorted(self.tasks)))})"


HEARTBEAT_EVERY = 1.0  # cheap (a local call the SDK batches); keeps short timeouts usable
BUSY_POLL = 2.0  # how often a step waiting for another holder's lease tries again


class StepActivities:
    def __init__(self, repo: Path, max_parallel: int, identity: str | None = None,
                 on_run: TaskCount | None = None) -> None:  # fmt: skip
        self.repo = repo
        self.on_run = on_run  # `worker --max-tasks`: told when a step or component starts, ends
        self.identity = identity or f"{leases.host()}-{os.getpid()}"  # named in `step_worker`
        self.pool = ThreadPoolExecutor(max_parallel, thread_name_prefix="supervisor-step")
        self.projects = ProjectCache()  # settings read once per configuration, not per step
        self.given_up: set[int] = set()  # tasks whose waiting step Temporal cancelled
        # Per task, what its last step here left open, for the settings it was opened with.
        self.kept: dict[int, tuple[object, Kept]] = {}
        self._kept_lock = threading.Lock()

    @activity.defn(name=RUN_STEP)
    async def run_step(self, task: TaskInput) -> StepResult:
        queue = activity.info().task_queue  # a pool's: `<queue>@<pool>` (the thread has no info)
        return await self._counted(task.wf_id, functools.partial(self._step, queue=queue), task)

    @activity.defn(name=RUN_COMPONENT)
    async def run_component(self, task: ComponentInput) -> dict[str, Any]:
        queue = activity.info().task_queue
        work = functools.partial(self._component, queue=queue)
        return await self._counted(task.wf_id, work, task)

    @activity.defn(name=RECORD_FAILURE)
    async def record_failure(self, task: FailureInput) -> None:
        return await self._heartbeating(self._record, task)

    @activity.defn(name=RECORD_FALLBACK)
    async def record_fallback(self, task: FallbackInput) -> None:
        return await self._heartbeating(self._fallback, task)

    def activities(self) -> list[Callable[..., Any]]:
        """What a worker of the repository's own queue runs (a pool's queue: the first two)."""
        return [self.run_step, self.run_component, self.record_failure, self.record_fallback]

    def _fallback(self, task: FallbackInput) -> None:
        self._mine(task.repository)
        routes.record_fallback(self.projects.open(self.repo)[0], task.wf_id, task.route)

    def _mine(self, repository: str) -> None:
        """Refuse a task of another repository: its id names another task in this clone."""
        root, settings, _ = self.projects.settings(self.repo)
        own = repository_id(root, settings.temporal.remote)
        if repository and repository != own:
            raise ApplicationError(
                f"This worker serves repository {own} ({self.repo}); the task belongs to "
                f"repository {repository}. Give each repository its own task queue (the default) "
                "and its own state database.",
                type="OtherRepository",
                non_retryable=True,
            )

    def _record(self, task: FailureInput, only_running: bool = False) -> None:
        """The failure, in the state, with an event saying why. `only_running`: unless the
        engine recorded an end itself (the state no longer says `running`)."""
        from supervisor.state.runner_view import FAILED
        from supervisor.state.store import EventSpec

        self._mine(task.repository)
        project = self.projects.open(self.repo)[0]
        with project.store() as store:
            if not only_running:  # the workflow's RECORD_FAILURE, not a step's own end
                _until_let_go(store, task.wf_id)
            wf = store.workflow(task.wf_id)
            if wf.status in ("completed", "abandoned"):
                return
            if only_running and wf.status != "running":
                return
            store.set_status(
                task.wf_id,
                "failed",
                error=f"Failed in Temporal: {task.reason}",
                event=EventSpec(
                    FAILED,
                    step=wf.current_step,
                    status="failed",
                    payload={
                        "reason": task.reason,
                        "hint": f"`supervisor resume {task.wf_id}` hands it back to Temporal.",
                    },
                ),
            )

    async def _counted(self, wf_id: int, work: Callable[[Any], T], task: Any) -> T:
        if self.on_run is None:
            return await self._heartbeating(work, task)
        self.on_run.started()
        ran = True
        try:
            result = await self._heartbeating(work, task)
            ran = getattr(result, "status", None) != "routed"  # handed on to its pool, not run
            return result
        finally:
            self.on_run.ended(wf_id, ran)

    async def _heartbeating(self, work: Callable[[Any], T], task: Any) -> T:
        running = asyncio.get_running_loop().run_in_executor(self.pool, work, task)
        try:
            while True:
                done, _ = await asyncio.wait({running}, timeout=HEARTBEAT_EVERY)
                if done:
                    if _taken_over(running.exception()):  # before Temporal told this worker
                        _ended_elsewhere(task, running)
                    return running.result()
                activity.heartbeat()
        except asyncio.CancelledError:
            if isinstance(task, TaskInput):
                self.given_up.add(task.wf_id)  # a step waiting for a lease stops waiting
            # The thread cannot be stopped: what it ends with is said once it does.
            running.add_done_callback(lambda done: _ended_elsewhere(task, done))
            gone = activity.cancellation_details()
            if gone is not None and (gone.not_found or gone.timed_out):
                # This worker was silent past its heartbeat timeout (paused, cut off): Temporal
                # knows this attempt no more. A failure of an expected kind is one line in the
                # worker's log (worker.py); a cancellation there was a traceback.
                raise ApplicationError(
                    "Temporal no longer knows this attempt (this worker was silent past its "
                    "heartbeat timeout); another worker runs it now.",
                    type="WorkflowBusy",
                ) from None
            raise

    def _component(self, task: ComponentInput, queue: str = "") -> dict[str, Any]:
        from supervisor.temporal.components import run_component

        self._mine(task.repository)
        project = self.projects.open(self.repo)[0]
        routes.record_ran(project, task.wf_id, queue, self.identity, task.component)
        shared = project.settings.temporal.remote
        name = leases.component_name(task.wf_id, task.component)
        doing = f"component {task.component}"
        with project.store() as store:
            while True:  # a silent earlier attempt's lease: wait for it to expire
                try:
                    held = leases.acquire(store.engine, name, task.wf_id, doing)
                    break
                except leases.LeaseBusyError:
                    time.sleep(BUSY_POLL)
            held.start()
            try:
                with leases.held_here(task.wf_id, held):  # its state writes check the lease
                    return run_component(project, task.wf_id, task.component, shared, held.check)
            except GitError as e:  # the remote out of reach: Temporal tries again later
                raise ApplicationError(e.message, type="RemoteUnavailable") from e
            finally:
                held.release()

    def _step(self, task: TaskInput, queue: str = "") -> StepResult:
        self._mine(task.repository)
        project = self.projects.open(self.repo)[0]
        route = routes.misrouted(project, task.wf_id, task.route)
        if route is not None:  # another pool's step (the next one changed after a decision)
            return StepResult("routed", route=route.data())
        routes.record_ran(project, task.wf_id, queue, self.identity)
        self.given_up.discard(task.wf_id)
        while True:
            try:
                return self._one_step(task)
            except WorkflowBusyError as e:
                # Another process holds the task: it finishes, or stops renewing its lease and
                # loses it (supervisor/state/leases.py). Not an attempt spent.
                if task.wf_id in self.given_up:
                    raise ApplicationError(e.message, type="WorkflowBusy") from e
                time.sleep(BUSY_POLL)

    def _kept(self, wf_id: int, settings: object) -> Kept:
        """The task's open sandbox and clean-up state, unless the settings changed since."""
        from supervisor.lifecycle.tasks import Kept

        with self._kept_lock:
            found = self.kept.get(wf_id)
            if found is not None and found[0] is settings:
                return found[1]
            self.kept[wf_id] = (settings, Kept())
        if found is not None:
            found[1].close()
        return self.kept[wf_id][1]

    def _forget(self, wf_id: int) -> None:
        """The task left this worker's hands (ended, waits for a person, failed)."""
        with self._kept_lock:
            found = self.kept.pop(wf_id, None)
        if found is not None:
            found[1].close()

    def _one_step(self, task: TaskInput) -> StepResult:
        result = self._one_step_kept(task)
        if result.status != "running":
            self._forget(task.wf_id)
        return result

    def _one_step_kept(self, task: TaskInput) -> StepResult:
        from supervisor.lifecycle import tasks

        wf_id = task.wf_id
        opened = self.projects.open(self.repo)
        kept = self._kept(wf_id, opened[0].settings)
        shared = opened[0].settings.temporal.remote
        spread = opened[0].settings.temporal.spread_components
        lease: remote.Lease | None = None

        def publish(_: int) -> None:
            held = leases.current(wf_id)
            if held is not None:
                held.check()  # another worker took the task over while this one was silent
            if shared and lease is not None:
                remote.push(opened[0].root, shared, row, lease)

        try:
            if shared:  # this host's clone takes the task's refs from the shared remote
                with opened[0].store() as store:
                    row = store.workflow(wf_id)
                try:
                    lease = remote.fetch(opened[0].root, shared, row)
                except GitError as e:  # the remote out of reach: Temporal tries again later
                    raise ApplicationError(e.message, type="RemoteUnavailable") from e
            wf = tasks.resume(
                wf_id, self.repo, one_step=True, opened=opened, before_commit=publish,
                dispatch=(task.components or []) if spread else None, kept=kept,
            )  # fmt: skip
        except ComponentsDispatched as handed:
            return StepResult("dispatched", components=handed.ids, route=task.route)
        except ApprovalRequired:
            return StepResult("awaiting_approval")
        except WorkflowBusyError:
            raise  # another process holds the task: `_step` waits for its lease
        except RemoteNotUpdatedError as e:
            # Nothing of the step was committed: Temporal runs it again, after a fresh fetch.
            raise ApplicationError(e.message, type="RemoteUnavailable") from e
        except StateUnavailableError as e:
            # This host cannot reach the state: nothing was recorded; another worker tries.
            # Without its causes: the driver's error quotes the statement and its parameters
            # (a task's whole context), past what Temporal keeps of a failure ("Failure exceeds
            # size limit." instead of the reason).
            raise ApplicationError(e.message, type="StateUnavailable") from None
        except SupervisorError as e:
            if _state_refused(e):
                # The state database refused the step's end, and so its failure (locked past
                # the busy timeout, or full): a failure it never recorded would leave the task
                # `running` there while Temporal gave it up. Temporal tries the step again
                # (temporal.max_attempts; then RECORD_FAILURE writes why).
                raise ApplicationError(e.message, type="StateUnavailable") from None
            # Recorded by the engine (the task failed), unless it failed before the engine
            # ran (the state still says `running`): then here, with why. A person decides.
            self._record(FailureInput(wf_id, e.message, task.repository), only_running=True)
            return StepResult("failed", error=e.message)
        waiting = wf.context.get("waiting_until")
        route = routes.next_route(opened[0], wf)
        return StepResult(wf.status, float(waiting) if waiting else None, wf.error, route=route)


def _until_let_go(store: Any, wf_id: int) -> None:
    """Wait while a live process holds the task: a step Temporal cancelled (the workflow was
    cancelled) runs on in its thread until it ends, and writes its end; the failure is written
    after it, never under it. A silent holder's lease expires (supervisor/state/leases.py)."""
    name = leases.task_name(wf_id)
    while True:
        held = leases.read(store.engine, name)
        if held is None or held.expired() or held.dead_here():
            return
        time.sleep(BUSY_POLL)


def _ended_elsewhere(task: TaskInput | ComponentInput | FailureInput, done: Any) -> None:
    """What a step or component given to another worker (this one was silent past its heartbeat
    timeout or its lease) ended with here: one line on the worker's output, once, whether
    Temporal told this worker first (the activity cancelled; else asyncio's "exception was
    never retrieved" traceback) or its lease's fence refused it first. Nothing of it was
    committed or pushed: the fence refused it, or it ended before anything."""
    if done.cancelled() or done.exception() is None:
        return
    error = done.exception()
    said = getattr(error, "message", None) or f"{type(error).__name__}: {error}"
    what = f"component {task.component} of task" if isinstance(task, ComponentInput) else "task"
    print(
        f"supervisor worker: {what} {task.wf_id} was given to another worker while this one "
        f"was silent; its run here stopped: {' '.join(str(said).split())[:500]}",
        file=sys.stderr,
        flush=True,
    )


def _taken_over(error: BaseException | None) -> bool:
    """Whether `error` (or what caused it) is a lease another process took over."""
    while error is not None:
        if isinstance(error, leases.LeaseLostError):
            return True
        error = error.__cause__
    return False


def _state_refused(error: SupervisorError) -> bool:
    """A fault of the state database itself (supervisor/core/host_faults.py): nothing of the step's
    end, nor of its failure, may have been written."""
    return isinstance(error, DatabaseLockedError) or (
        isinstance(error, DiskFullError) and error.database
    )
