"""The Temporal workflow of one task: run the engine's next step as an activity, then wait the
way the engine left the task: for a person's decision (a signal) or a rate limit's reset (a
durable timer). Which step runs, and what its outcome leads to, the engine decides inside the
activity (supervisor/workflow/engine.py, the same `_transition` the embedded runner uses), and
records it in the state database; this code only reads the status it returns. A component
fan-out step returns "dispatched" with its ready components: each runs as an activity of its
own (on any worker), and their results go back to the step, which decides what they lead to.

It must be deterministic (Temporal replays it): no I/O, no clock but `workflow.now()`, and it
imports nothing outside temporalio and the standard library.
"""

from __future__ import annotations

import asyncio
import dataclasses
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError

WORKFLOW_NAME = "supervisor-task"  # as supervisor/temporal/service.py, which starts it
RUN_STEP = "supervisor-run-step"
RUN_COMPONENT = "supervisor-run-component"
RECORD_FAILURE = "supervisor-record-failure"
DECIDED_SIGNAL = "decided"

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
class StepResult:
    status: str  # the workflow's status after the step: running | rate_limited | ...
    waiting_until: float | None = None  # epoch seconds, for rate_limited
    error: str | None = None
    components: list[str] | None = None  # status "dispatched": run these, then the step again


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
        activity that gave up, on any worker), so the task never stays `running` there while
        Temporal has given it up; `supervisor resume` hands it back."""
        self.decisions += task.decided
        try:
            return await self._steps(task)
        except ActivityError as e:
            reason = _reason(e)
            await workflow.execute_activity(
                RECORD_FAILURE,
                FailureInput(task.wf_id, reason, task.repository),
                start_to_close_timeout=timedelta(minutes=2),
                retry_policy=RetryPolicy(
                    maximum_interval=timedelta(seconds=30),
                    maximum_attempts=0,  # until a worker of the task's repository writes it
                ),
            )
            return StepResult("failed", error=reason)

    async def _steps(self, task: TaskInput) -> StepResult:
        relayed: list[dict[str, Any]] | None = None
        while True:
            if relayed is None and self._history_full(task):
                workflow.continue_as_new(
                    dataclasses.replace(task, decided=self.decisions - self.handled)
                )
            step = dataclasses.replace(task, components=relayed)
            result: StepResult = await workflow.execute_activity(
                RUN_STEP,
                step,
                result_type=StepResult,
                start_to_close_timeout=STEP_TIMEOUT,
                heartbeat_timeout=timedelta(seconds=task.heartbeat_timeout_s),
                retry_policy=_retries(task.max_attempts),
            )
            relayed = None
            if result.status == "dispatched":  # one activity per component, on any worker
                relayed = await self._components(task, result.components or [])
                continue
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

    async def _components(self, task: TaskInput, ids: list[str]) -> list[dict[str, Any]]:
        """Run the handed-over components at once; a component no worker could run comes back
        as a failure of that component (the step counts it like any other)."""
        runs = [
            workflow.execute_activity(
                RUN_COMPONENT,
                ComponentInput(task.wf_id, cid, task.repository),
                result_type=dict,
                start_to_close_timeout=STEP_TIMEOUT,
                heartbeat_timeout=timedelta(seconds=task.heartbeat_timeout_s),
                retry_policy=_retries(task.max_attempts),
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
