"""The workflow engine: walks the state machine one step at a time, checkpointing every move.

The engine decides, step modules act (supervisor.workflow.steps): it runs the current step through
`steps.run`, then turns the Outcome into the next move (advance, retry with feedback, retry the
same step after a backoff or a rate limit's reset, wait for a human, fail) and is the only writer
of workflow progress. Each move commits in one transaction with the step runs the Outcome
finished and their events (`Store.transition`), so after a crash `resume` re-runs at most the
step that was interrupted, never a completed one.

Where work lives between steps: a worker's changes become a *candidate* commit (kept alive by the
ref `refs/supervisor/wf<id>/candidate`), gates and reviews run on throwaway worktrees of that
candidate, and only the `commit` action moves the task branch, to a candidate that passed every
gate before it.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, NoReturn

from supervisor import budgets, recovery, risk
from supervisor.config import Settings, StepDef, WorkflowDef
from supervisor.dependency_review import DependencyApprovalRequired
from supervisor.errors import (
    ApprovalRequired,
    ConfigError,
    CredentialsError,
    StepFailedError,
    SupervisorError,
)
from supervisor.routing import route
from supervisor.routing.failover import Cause, cause_of
from supervisor.state.store import EventSpec, StepRecord
from supervisor.workers import continuation
from supervisor.workflow import continuity, degrade, failovers, resuming, retries
from supervisor.workflow.state import WorkflowState
from supervisor.workflow.steps import registry as steps
from supervisor.workflow.steps.base import (
    LineSplitter,
    Outcome,
    Reporter,
    StepContext,
    candidate_ref,
    component_branch,
    err,
    message,
)

if TYPE_CHECKING:
    from pathlib import Path

    from supervisor.recovery import Classification
    from supervisor.sandbox.base import Sandbox
    from supervisor.state.store import Store, Workflow
    from supervisor.workspace import Workspace

__all__ = [
    "Engine",
    "LineSplitter",
    "Outcome",
    "Reporter",
    "candidate_ref",
    "component_branch",
]


class Engine:
    # The Temporal runner (supervisor/temporal/) runs the engine one step per activity and owns
    # the waits: `one_step` returns after one transition, `external_waits` leaves a rate limit's
    # wait to a durable timer instead of sleeping here. The decisions are the same code.
    one_step = False
    external_waits = False

    def __init__(
        self,
        repo: Path,
        settings: Settings,
        store: Store,
        workspace: Workspace,
        sandbox: Sandbox,
        reporter: Reporter | None = None,
    ) -> None:
        self.repo = repo
        self.settings = settings
        self.store = store
        self.ws = workspace
        self.sandbox = sandbox
        self.reporter = reporter or Reporter()
        self.steps = StepContext(
            repo, settings, store, workspace, sandbox, self.reporter, self._checkpoint
        )

    # -- the loop --------------------------------------------------------------------------

    def run(self, wf_id: int) -> Workflow:
        """Run until the workflow completes, fails, or waits for a human."""
        while True:
            wf = self.store.workflow(wf_id)
            if wf.status == "awaiting_approval" and risk.timed_wait(self, wf):
                # A notify_and_timeout approval, decided or timed out: applied as resume would.
                resuming.prepare(self.store, self.store.workflow(wf_id), self.settings)
                continue
            if wf.status == "awaiting_approval":
                raise ApprovalRequired(
                    f"Workflow {wf_id} waits for approval of step '{_pending_step(wf)}'"
                    f"{risk.summary(wf)}.",
                    f"Approve with `supervisor approve {wf_id}` or reject with `supervisor reject "
                    f'{wf_id} --reason "..."`, then run `supervisor resume {wf_id}`.',
                )
            if wf.status == "rate_limited":
                if self._wait(wf):
                    continue
                return wf
            if wf.status != "running" or wf.current_step is None:
                return wf
            definition = WorkflowDef.model_validate(wf.definition)
            name = wf.current_step
            step = definition.steps[name]
            self._budget(wf, name)  # past its budget, the task waits (budget_exceeded)
            wf = self.store.workflow(wf_id)
            try:
                outcome = self._routed(wf, name, step)
            except DependencyApprovalRequired as stop:  # a rebuild waits for a person
                self._await_dependencies(stop)
            self._transition(wf, definition, name, step, outcome)
            if self.one_step:
                return self.store.workflow(wf_id)

    def _routed(self, wf: Workflow, name: str, step: StepDef) -> Outcome:
        """Choose each role's CLI (supervisor.routing), run the step on it, and keep the choices
        as events of the step's transition."""
        try:
            chosen = route.for_step(self.repo, self.settings, self.store, wf.cli, step)
        except ConfigError as e:
            return Outcome("failed", escalate=e)
        self.steps.routes = {c.role: c.cli for c in chosen}
        outcome = steps.run(self.steps, wf, name, step)
        outcome.events[:0] = [c.event(name) for c in chosen if route.worth_recording(c)]
        return outcome

    # -- transitions -----------------------------------------------------------------------

    def _budget(self, wf: Workflow, name: str) -> None:
        """Commit what `budgets.check` decided before step `name`: the limits pinned on first
        sight, and past a limit the wait in `budget_exceeded` (then raise BudgetExceeded)."""
        verdict = budgets.check(self.settings, self.store, wf, name)
        if verdict.events:
            self.store.update_workflow(
                wf.id,
                status=budgets.EXCEEDED if verdict.exceeded else wf.status,
                current_step=wf.current_step,
                context=verdict.context,
                events=verdict.events,
            )
        if verdict.exceeded is not None:
            raise budgets.exceeded_error(wf.id, verdict.exceeded)

    def _await_dependencies(self, stop: DependencyApprovalRequired) -> NoReturn:
        """Commit the wait a dependency change asked for (supervisor/dependency_review.py): the
        workflow awaits approval, the runs that wanted the image close as waiting; then raise."""
        wait = stop.wait
        current = self.store.workflow(wait.wf_id)
        if current.status != "awaiting_approval":
            state = WorkflowState.load(current.context)
            state.approval_step, state.dependency_request = wait.producer, wait.request
            self.store.transition(
                wait.wf_id,
                step=wait.producer,
                next_step=wait.waiting,
                records=wait.records(self.store),
                context=state.dump(),
                status="awaiting_approval",
                checkpoint_status="awaiting_approval",
                request_approval=True,
                events=[wait.event],
            )
        raise stop

    def _transition(
        self, wf: Workflow, definition: WorkflowDef, name: str, step: StepDef, outcome: Outcome
    ) -> None:
        state = WorkflowState.load(wf.context).merged(outcome.context)
        events = list(outcome.events)
        if outcome.escalate is not None:
            if isinstance(outcome.escalate, CredentialsError):  # refused or missing: next CLI
                why = message(outcome.escalate)
                if self._failover(wf, name, step, state, events, outcome, "credentials", None, why):
                    return
            self._fail(
                wf, name, state, events, outcome.escalate, outcome.resume_at, outcome.records
            )
        breaker = state.breaker
        if outcome.result != "passed":
            breaker[name] = breaker.get(name, 0) + 1
            _, threshold = recovery.load_policies()
            if breaker[name] >= threshold:
                outcome.escalate = StepFailedError(
                    f"Circuit breaker open for step '{name}': {breaker[name]} consecutive "
                    f"failures (threshold {threshold}); last: "
                    f"{(outcome.feedback or getattr(outcome.transient, 'reason', '') or '')[:600]}",
                    f"Look at `supervisor events {wf.id}`, fix the cause, then `supervisor "
                    f"resume {wf.id}` (a resume after a failure closes the breaker).",
                )
                self._fail(wf, name, state, events, outcome.escalate, None, outcome.records)
        if outcome.transient is not None:
            self._retry_same(wf, name, step, state, events, outcome.transient, outcome)
            return
        if outcome.result == "passed":
            continuity.forget(state, name)
            breaker.pop(name, None)
            state.transient.pop(name, None)
            state.feedback.pop(name, None)
            next_step = step.next
            status = "running" if next_step is not None else "completed"
            ask = step.human_approval
            if next_step and definition.steps[next_step].action == "commit":
                # The approval policy judges what is about to be committed (supervisor/risk.py).
                judged = state.dump()
                stops, assessed = risk.assess(self, wf, name, judged, step.human_approval)
                stops = degrade.hold_for_a_person(judged) or stops  # stubs: never unseen
                state = WorkflowState.load(judged)
                ask, events = ask or stops, [*events, assessed]
            if ask:
                status = "awaiting_approval"
                state.approval_step = name
                events.append(EventSpec("approval_requested", step=name, status="pending"))
            if name in state.degraded:
                level = state.degraded[name]
                events.append(EventSpec("degraded_result", step=name, status=level))
            if status == "completed":
                events.append(EventSpec("workflow_completed", status="completed"))
            self.store.transition(
                wf.id,
                step=name,
                next_step=next_step,
                records=outcome.records,
                context=state.dump(),
                status=status,
                git_sha=outcome.git_sha,
                events=events,
                request_approval=ask,
            )
            return
        # A failure or a rejection: go back to the step that can fix it, with feedback.
        target = name
        if outcome.goto is not None:
            target = outcome.goto
        elif outcome.result == "failed" and step.on_fail:
            target = step.on_fail
        elif outcome.result == "rejected" and step.on_reject:
            target = step.on_reject
        limit = definition.steps[target].max_retries
        counted = retries.with_feedback(
            state.attempts, target, limit, state.feedback, outcome.feedback
        )
        stepped = None
        if counted.exhausted:  # the step's retries are spent: a smaller job, if it opted in
            problem = outcome.feedback or outcome.result
            stepped = degrade.step_down(
                state, target, definition.steps[target], name, limit, problem
            )
        if stepped is not None:
            events.append(stepped)
            self.reporter.info(f"'{target}' degrades to a {stepped.status} attempt")
        elif counted.exhausted:
            error = StepFailedError(
                f"Step '{target}' of workflow {wf.id} failed {counted.failures} times (limit "
                f"{limit}); last problem: {(outcome.feedback or outcome.result)[:800]}",
                f"The task branch {wf.task_branch} keeps its last good state. Fix the cause "
                f"(see `supervisor events {wf.id}`), then `supervisor resume {wf.id}` tries "
                "again.",
            )
            # After a gate failure, `resume` re-runs that gate on the candidate first: the cause
            # may have been the gate's configuration, fixed meanwhile.
            at = name if step.gate else target
            self._fail(wf, name, state, events, error, at, outcome.records)
        if target == name and outcome.result == "failed":  # sent back to itself: continue?
            limit_turns = self.settings.continuity.max_continuation_turns
            turn = continuity.after_send_back(state, name, outcome.session, limit_turns)
            events += [turn] if turn is not None else []
        events.append(
            EventSpec(
                "retry",
                step=target,
                status=outcome.result,
                payload={
                    "from_step": name,
                    "attempt": counted.next_attempt,
                    "limit": limit + 1,
                    **({"degraded": stepped.status} if stepped is not None else {}),
                },
            )
        )
        self.store.transition(
            wf.id,
            step=name,
            next_step=target,
            records=outcome.records,
            context=state.dump(),
            checkpoint_status=outcome.result,
            events=events,
        )

    def _fail(
        self,
        wf: Workflow,
        name: str,
        state: WorkflowState,
        events: list[EventSpec],
        error: SupervisorError,
        resume_at: str | None = None,
        records: list[StepRecord] = (),  # type: ignore[assignment]
    ) -> NoReturn:
        """Record the failure (a later `resume` starts again at `resume_at`) and raise it."""
        at = resume_at or name
        continuation.discard_all(self.repo / ".supervisor", wf.id)  # kept CLI homes...
        continuity.end_all(state)  # ...so a `resume` starts their sessions afresh
        events.append(EventSpec("workflow_failed", step=at, status="failed", payload=err(error)))
        self.store.transition(
            wf.id,
            records=records,
            step=name,
            next_step=at,
            context=state.dump(),
            status="failed",
            checkpoint_status="failed",
            events=events,
            error=message(error),
        )
        raise error

    def _retry_same(
        self,
        wf: Workflow,
        name: str,
        step: StepDef,
        state: WorkflowState,
        events: list[EventSpec],
        why: Classification,
        outcome: Outcome,
    ) -> None:
        """Run the same step again after the policy's backoff, or the rate limit's reset; or on
        the role's next CLI when this one is limited for too long or down (a failover)."""
        records = outcome.records
        again = retries.same_again(
            state.transient,
            name,
            step.retry_policy or self.settings.retry_policy,
            why,
        )
        cause = cause_of(why, exhausted=again.exhausted, settings=self.settings.failover)
        if cause and self._failover(wf, name, step, state, events, outcome, cause, why, why.reason):
            return
        if again.exhausted:
            self._fail(
                wf,
                name,
                state,
                events,
                StepFailedError(
                    f"Step '{name}' failed {again.failures} times in a row ({why.category}): "
                    f"{why.reason[:600]}",
                    "Check the model API and the CLI (`supervisor doctor`), then "
                    f"`supervisor resume {wf.id}`.",
                ),
                None,
                records,
            )
        delay, waiting = again.delay, again.waiting
        if waiting and cause == "rate_limited":  # every CLI limited: wait for the first back
            args = (self.repo, wf, step, state, outcome.cli, why, delay, time.time())
            delay = failovers.shorter_wait(*args)
        if waiting:
            state.waiting_until = time.time() + delay
        events.append(
            EventSpec(
                "retry_scheduled",
                step=name,
                status=str(why.action),
                payload={
                    "category": str(why.category),
                    "reason": why.reason[:1000],
                    "delay_s": round(delay, 2),
                    "attempt": again.failures + 1,
                    "max_attempts": again.max_attempts,
                },
            )
        )
        self.store.transition(
            wf.id,
            records=records,
            step=name,
            next_step=name,
            context=state.dump(),
            status="rate_limited" if waiting else "running",
            checkpoint_status=str(why.category),
            events=events,
        )
        if waiting:
            self.reporter.info(f"rate limited: waiting {delay:.0f} s before retrying '{name}'")
            self._wait(self.store.workflow(wf.id))
        else:
            self.reporter.info(f"{why.category}: retrying '{name}' in {delay:.1f} s")
            time.sleep(delay)

    def _failover(
        self,
        wf: Workflow,
        name: str,
        step: StepDef,
        state: WorkflowState,
        events: list[EventSpec],
        outcome: Outcome,
        cause: Cause,
        why: Classification | None,
        reason: str,
    ) -> bool:
        """Move the step to its role's next available CLI (supervisor/workflow/failovers.py);
        False when it has none, and the caller goes on as without failover."""
        now = time.time()
        args = (self.repo, self.settings, wf, step, state, outcome.cli, cause, why, reason, now)
        moved = failovers.plan(*args)
        if moved is None:
            return False
        events.append(failovers.apply(state, name, moved, now))
        self.store.transition(
            wf.id,
            records=outcome.records,
            step=name,
            next_step=name,
            context=state.dump(),
            status="running",
            checkpoint_status="failover",
            events=events,
        )
        self.reporter.info(
            f"{moved.from_cli} unavailable ({cause}): step '{name}' runs again on {moved.to_cli}"
        )
        return True

    def _wait(self, wf: Workflow) -> bool:
        """A rate limit is a waiting state, not a failure: sleep to the reset, then run again.
        False: the wait is left to the runner (`external_waits`), the workflow still waits."""
        until = float(wf.context.get("waiting_until") or 0)
        if self.external_waits and until > time.time():
            return False
        time.sleep(max(0.0, until - time.time()))
        state = WorkflowState.load(wf.context)
        state.waiting_until = None
        self.store.update_workflow(
            wf.id,
            status="running",
            current_step=wf.current_step,
            context=state.dump(),
            events=[EventSpec("rate_limit_over", step=wf.current_step)],
        )
        return True

    def _checkpoint(
        self,
        wf_id: int,
        step: str,
        context: dict[str, Any],
        events: list[EventSpec],
        records: list[StepRecord],
    ) -> None:
        """Progress inside a running step (the component fan-out's moves), one transaction."""
        valid = WorkflowState.load(context).dump()
        self.store.checkpoint(wf_id, step=step, context=valid, events=events, records=records)


def _pending_step(wf: Workflow) -> str:
    return str(wf.context.get("approval_step") or wf.current_step)
