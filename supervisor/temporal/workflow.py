"""The Temporal workflow of one task: run the engine's next step as an activity, then wait the
way the engine left the task: for a person's decision (a signal) or a rate limit's reset (a
durable timer). Which step runs, and what its outcome leads to, the engine decides inside the
activity (supervisor/workflow/engine.py, the same `_transition` the embedded runner uses), and
records it in the state database; this code only reads the status it returns. A component
fan-out step returns "dispatched" with its ready components: each runs as an activity of its
own (on any worker), and their results go back to the step, which decides what they lead to.

Worker pools (docs/worker-pools.md): each result carries the next step's route (its role's pool,
supervisor/routing/pools.py), and the activity goes to that pool's queue (`<queue>@<pool>`):
waited for when the pool is required, else for the route's wait, then to its fallback. A step
that reaches a worker outside its pool (after a person's decision changed the next step) comes
back "routed", not run, with its route.

It must be deterministic (Temporal replays it): no I/O, no clock but `workflow.now()`, and it
imports nothing outside temporalio and the standard library.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import (
    ActivityError,
    ApplicationError,
    TimeoutError,
    TimeoutType,
    is_cancelled_exception,
)

WORKFLOW_NAME = "supervisor-task"  # as supervisor/temporal/service.py, which starts it
RUN_STEP = "supervisor-run-step"
RUN_COMPONENT = "supervisor-run-component"
RECORD_FAILURE = "supervisor-record-failure"
RECORD_FALLBACK = "supervisor-record-fallback"
DECIDED_SIGNAL = "decided"
CANCELLED = (
    "its Temporal workflow was cancelled (`temporal workflow cancel` or the Temporal UI); "
    "`supervisor resume` hands it back"
)

# A step may run for most of an hour (limits.step_timeout_seconds plus gates); the activity
# heartbeats every few seconds, so a dead worker is noticed after the task's heartbeat timeout
# (temporal.heartbeat_timeout_seconds) and the step is retried on another one.
STEP_TIMEOUT = timedelta(hours=3)
# Events of one run (a step adds about six): a worker that did not keep the workflow in its cache
# (restarted, or evicted it) replays the whole history before the next step, so it stays short.
HISTORY_LIMIT = 2000


@dataclass
class TaskInput:
    wf_id: int
    heartbeat_timeout_s: float = 30.0
    # What the components the last step handed over came back with (plain data, applied by
    # that step when it runs again: supervisor/workflow/steps/dispatched.py).
    components: list[dict[str, Any]] | None = None
    # The repository's identity (supervisor/temporal/identity.py): a worker of another
    # repository refuses the task instead of running it in its own clone.
    repository: str = ""
    max_attempts: int = 10  # of a step or component (temporal.max_attempts)
    # A long task's history is cut here: the workflow continues as a new run of itself (see
    # TaskWorkflow._steps), carrying what it owes: decisions signalled but not yet waited for.
    history_limit: int = HISTORY_LIMIT
    decided: int = 0
    # The pool of workers this step goes to (supervisor/routing/pools.py `Route.data()`; None:
    # any worker of the queue): the first step's from the submission, then each step's result.
    route: dict[str, Any] | None = None


@dataclass
class ComponentInput:
    wf_id: int
    component: str
    repository: str = ""


@dataclass
class FailureInput:
    wf_id: int
    reason: str
    repository: str = ""


@dataclass
class FallbackInput:
    wf_id: int
    route: dict[str, Any]
    repository: str = ""


@dataclass
class StepResult:
    status: str  # the workflow's status after the step: running | rate_limited | ...
    waiting_until: float | None = None  # epoch seconds, for rate_limited
    error: str | None = None
    components: list[str] | None = None  # status "dispatched": run these, then the step again
    # The next step's pool; with "dispatched", the components'; with "routed" (the step was not
    # run: it belongs to another pool), the step's own.
    route: dict[str, Any] | None = None


@workflow.defn(name=WORKFLOW_NAME)
class TaskWorkflow:
    def __init__(self) -> None:
        self.decisions = 0  # signals received
        self.handled = 0  # decisions the last wait consumed

    @workflow.signal(name=DECIDED_SIGNAL)
    def decided(self) -> None:
        """A person approved or rejected (the decision itself is in the state database)."""
        self.decisions += 1

    @workflow.run
    async def run(self, task: TaskInput) -> StepResult:
        """Every way this ends in failure is written to the state database first (a step's
        activity that gave up, on any worker; the workflow cancelled), so the task never stays
        `running` there while Temporal has given it up; `supervisor resume` hands it back.
        A termination runs no code here: `status` and `resume` ask Temporal (client.py)."""
        self.decisions += task.decided
        try:
            return await self._steps(task)
        except (ActivityError, asyncio.CancelledError) as e:
            if is_cancelled_exception(e):
                # Someone cancelled this workflow (Temporal's CLI or UI): the state says why
                # before it ends as cancelled (issue 58: it said `running`, with no event).
                await self._record_failure(task, CANCELLED)
                raise
            assert isinstance(e, ActivityError)
            reason = _reason(e)
            await self._record_failure(task, reason)
            return StepResult("failed", error=reason)

    @staticmethod
    async def _record_failure(task: TaskInput, reason: str) -> None:
        await workflow.execute_activity(
            RECORD_FAILURE,
            FailureInput(task.wf_id, reason, task.repository),
            start_to_close_timeout=timedelta(minutes=2),
            retry_policy=RetryPolicy(
                maximum_interval=timedelta(seconds=30),
                maximum_attempts=0,  # until a worker of the task's repository writes it
            ),
        )

    async def _steps(self, task: TaskInput) -> StepResult:
        relayed: list[dict[str, Any]] | None = None
        route = task.route
        while True:
            if relayed is None and self._history_full(task):
                workflow.continue_as_new(
                    dataclasses.replace(task, decided=self.decisions - self.handled, route=route)
                )
            step = dataclasses.replace(task, components=relayed, route=route)
            result: StepResult = await self._routed(task, route, RUN_STEP, step, StepResult)
            relayed = None
            if result.status == "routed":  # the step is another pool's: run it there
                route = result.route
                continue
            if result.status == "dispatched":  # one activity per component, on its pool
                relayed = await self._components(task, result.components or [], result.route)
                continue
            route = result.route
            if result.status == "running":
                continue
            if result.status == "rate_limited":
                now = workflow.now().timestamp()
                await workflow.sleep(max(0.0, (result.waiting_until or now) - now))
                continue
            if result.status == "awaiting_approval":
                await workflow.wait_condition(lambda: self.decisions > self.handled)
                self.handled = self.decisions
                continue
            return result  # completed, failed, budget_exceeded, interrupted: a person's turn

    @staticmethod
    def _history_full(task: TaskInput) -> bool:
        info = workflow.info()
        return (
            info.is_continue_as_new_suggested()
            or info.get_current_history_length() >= task.history_limit
        )

    async def _components(
        self, task: TaskInput, ids: list[str], route: dict[str, Any] | None
    ) -> list[dict[str, Any]]:
        """Run the handed-over components at once; a component no worker could run comes back
        as a failure of that component (the step counts it like any other)."""
        runs = [
            self._routed(
                task, route, RUN_COMPONENT, ComponentInput(task.wf_id, cid, task.repository), dict
            )
            for cid in ids
        ]
        done = await asyncio.gather(*runs, return_exceptions=True)
        results: list[dict[str, Any]] = []
        for cid, got in zip(ids, done, strict=True):
            if isinstance(got, BaseException):
                message = f"Component '{cid}' could not run on any worker: {got}"
                hint = "See the workers' output; `supervisor resume` runs it again."
                got = {
                    "component": cid,
                    "outcome": {"result": "failed", "escalate": [message, hint]},
                }
            results.append(got)
        return results

    async def _routed(
        self, task: TaskInput, route: dict[str, Any] | None, name: str, arg: Any, kind: type
    ) -> Any:
        """Activity `name` on the queue of `route`'s pool (the workflow's own: none). A required
        pool is waited for; a preferred one for `wait_s`, after which the activity goes to the
        fallback (the workflow's queue: any worker), with an event saying so."""
        options: dict[str, Any] = {
            "result_type": kind,
            "start_to_close_timeout": STEP_TIMEOUT,
            "heartbeat_timeout": timedelta(seconds=task.heartbeat_timeout_s),
            "retry_policy": _retries(task.max_attempts),
        }
        if not route:
            return await workflow.execute_activity(name, arg, **options)
        base = workflow.info().task_queue
        pool_queue = f"{base}@{route['pool']}"
        if route.get("required"):
            return await workflow.execute_activity(name, arg, task_queue=pool_queue, **options)
        try:
            return await workflow.execute_activity(
                name, arg, task_queue=pool_queue,
                schedule_to_start_timeout=timedelta(seconds=float(route.get("wait_s") or 0.001)),
                **options,
            )  # fmt: skip
        except ActivityError as e:
            if not _never_started(e):
                raise
        with contextlib.suppress(ActivityError):  # the event says it; the step runs anyway
            await workflow.execute_activity(
                RECORD_FALLBACK,
                FallbackInput(task.wf_id, route, task.repository),
                start_to_close_timeout=timedelta(minutes=2),
                retry_policy=RetryPolicy(maximum_attempts=3),
            )
        fallback = route.get("fallback")
        queue = f"{base}@{fallback}" if fallback else base
        return await workflow.execute_activity(name, arg, task_queue=queue, **options)


def _never_started(error: ActivityError) -> bool:
    """No worker of the pool took the activity within its wait (schedule-to-start timeout)."""
    cause = error.cause
    return isinstance(cause, TimeoutError) and cause.type == TimeoutType.SCHEDULE_TO_START


def _retries(attempts: int) -> RetryPolicy:
    """A busy task is not a failure here: the activity waits for the holder's lease itself
    (supervisor/state/leases.py), so the attempts count real failures only."""
    return RetryPolicy(
        initial_interval=timedelta(seconds=1),
        maximum_interval=timedelta(seconds=30),
        maximum_attempts=attempts,
        non_retryable_error_types=["OtherRepository"],
    )


def _reason(error: ActivityError) -> str:
    """The activity's own words (its ApplicationError's message: what supervisor said), on one
    line; Temporal's wrapper otherwise."""
    cause = error.cause
    said = cause.message if isinstance(cause, ApplicationError) else str(cause or error)
    return " ".join(said.split())[:2000]
