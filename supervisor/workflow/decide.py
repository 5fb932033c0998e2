"""What follows a step's outcome: the engine's next move, decided without acting.

`decide` turns an Outcome into one Move: advance (perhaps to a person's approval), send the work
back with feedback, hold a step that stopped at its budget, run the same step again after a
backoff or a rate limit's reset, move it to its role's next CLI, or fail. It writes nothing and
waits for nothing; the engine commits the Move in one transaction (Store.transition) and then
sleeps, waits or raises as it says. What a decision
needs from outside (the clock, the breaker's threshold, the role's CLIs, the approval policy's
verdict on a change about to be committed) comes in as `Facts`, so the same decisions run in the
embedded runner, in a Temporal activity, and in millisecond specs (tests/test_decide.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from supervisor.core import plural
from supervisor.core.config import DecompositionLimits
from supervisor.core.errors import (
    CredentialsError,
    SpecConflictError,
    StepFailedError,
    SupervisorError,
)
from supervisor.policy.budgets import HELD
from supervisor.routing import failover
from supervisor.state.store import EventSpec
from supervisor.workflow import continuity, decompose, degrade, depth, retries
from supervisor.workflow.state import WorkflowState
from supervisor.workflow.steps.base import err, message

if TYPE_CHECKING:
    from supervisor.core.config import FailoverSettings, StepDef, WorkflowDef
    from supervisor.policy.recovery import Classification
    from supervisor.state.store import Workflow
    from supervisor.workflow.steps.base import Outcome

Judge = Callable[[dict[str, Any], list[EventSpec]], tuple[bool, EventSpec]]
"""The approval policy on what is about to be committed (supervisor/policy/risk.py): whether a
person
must approve, and the event that says why; it records its verdict in the state it is given. Its
second argument is the step's own outcome (the events of the runs it just finished, not yet
committed): the review that just approved is a fact the policy must see."""


@dataclass
class Facts:
    now: float
    breaker_threshold: int
    max_continuation_turns: int
    retry_policy: str  # the project's default, for steps that name none
    failover: FailoverSettings
    role_clis: list[str]  # the step's CLIs, preferred first (failover.chain)
    judge: Judge
    decomposition: DecompositionLimits = field(default_factory=DecompositionLimits)


@dataclass
class Move:
    """One transition, as Store.transition records it, and what the engine does after it."""

    next_step: str | None
    state: WorkflowState
    events: list[EventSpec]
    status: str = "running"
    checkpoint_status: str = "completed"
    git_sha: str | None = None
    request_approval: bool = False
    error: SupervisorError | None = None  # the task fails: raised once the move is committed
    sleep_s: float = 0.0  # the same step again after this backoff
    wait: bool = False  # rate limited: the same step again at state.waiting_until
    info: list[str] = field(default_factory=list)  # what the person watching is told


def decide(
    wf: Workflow, definition: WorkflowDef, name: str, step: StepDef, outcome: Outcome, facts: Facts
) -> Move:
    state = WorkflowState.load(wf.context).merged(outcome.context)
    events = list(outcome.events)
    if outcome.escalate is not None:
        if isinstance(outcome.escalate, SpecConflictError):
            return ask_about_spec(name, state, events, outcome.escalate)
        if isinstance(outcome.escalate, CredentialsError):  # refused or missing: next CLI
            why = message(outcome.escalate)
            moved = _failover(name, state, events, outcome, facts, "credentials", None, why)
            if moved is not None:
                return moved
        return fail(name, state, events, outcome.escalate, outcome.resume_at)
    if outcome.result == decompose.EXPAND:  # the fan-out's tree changes: one transition
        return _expand(name, state, events, facts)
    if outcome.result == HELD:
        # Stopped dispatching at a budget, its running work done and kept: the same step once
        # the budget allows (the engine's check before it pauses the task with the figures).
        return Move(name, state, events, checkpoint_status=HELD)
    breaker = state.breaker
    if outcome.result != "passed":
        breaker[name] = breaker.get(name, 0) + 1
        if breaker[name] >= facts.breaker_threshold:
            last = outcome.feedback or getattr(outcome.transient, "reason", "") or ""
            error = StepFailedError(
                f"Circuit breaker open for step '{name}': {breaker[name]} consecutive "
                f"failures (threshold {facts.breaker_threshold}); last: {last[:600]}",
                f"Look at `supervisor events {wf.id}`, fix the cause, then `supervisor "
                f"resume {wf.id}` (a resume after a failure closes the breaker).",
            )
            return fail(name, state, events, error)
    if outcome.transient is not None:
        return _same_again(wf, name, step, state, events, outcome.transient, outcome, facts)
    if outcome.result == "passed":
        return _advance(wf, definition, name, step, state, events, outcome, facts)
    return _send_back(wf, definition, name, step, state, events, outcome, facts)


def fail(
    name: str,
    state: WorkflowState,
    events: list[EventSpec],
    error: SupervisorError,
    resume_at: str | None = None,
) -> Move:
    """The task fails; a later `resume` starts again at `resume_at` (default: this step). Kept
    CLI sessions end with it (the engine removes their homes), so a resume starts them afresh."""
    at = resume_at or name
    continuity.end_all(state)
    failed = EventSpec("workflow_failed", step=at, status="failed", payload=err(error))
    return Move(at, state, [*events, failed], "failed", "failed", error=error)


def _advance(
    wf: Workflow,
    definition: WorkflowDef,
    name: str,
    step: StepDef,
    state: WorkflowState,
    events: list[EventSpec],
    outcome: Outcome,
    facts: Facts,
) -> Move:
    continuity.forget(state, name)
    state.breaker.pop(name, None)
    state.transient.pop(name, None)
    state.feedback.pop(name, None)
    next_step = step.next
    routed = depth.route(name, state, wf.description)  # the analyzer's verdict, gated
    if routed is not None:
        next_step = routed[0]
        events.append(routed[1])
    status = "running" if next_step is not None else "completed"
    ask = step.human_approval
    if next_step and definition.steps[next_step].action == "commit":
        # The approval policy judges what is about to be committed (supervisor/policy/risk.py).
        judged = state.dump()
        stops, assessed = facts.judge(judged, own_events(outcome))
        stops = degrade.hold_for_a_person(judged) or stops  # stubs: never unseen
        state = WorkflowState.load(judged)
        ask, events = ask or stops, [*events, assessed]
    if ask:
        status = "awaiting_approval"
        state.approval_step, state.decision = name, None
        events.append(EventSpec("approval_requested", step=name, status="pending"))
    if name in state.degraded:
        events.append(EventSpec("degraded_result", step=name, status=state.degraded[name]))
    if status == "completed":
        events.append(EventSpec("workflow_completed", status="completed"))
    return Move(next_step, state, events, status, git_sha=outcome.git_sha, request_approval=ask)


def _expand(name: str, state: WorkflowState, events: list[EventSpec], facts: Facts) -> Move:
    """A component split, a sub-plan installed or sent back, a retry on another CLI; or, when
    none of these is left, the task waits for a person (exit 10, as for an approval)."""
    limits, clis = facts.decomposition, facts.role_clis
    done = decompose.settle(state.decomposition, state.components, name, limits, clis)
    events = [*events, *done.events]
    if not done.human:
        return Move(name, state, events, checkpoint_status=decompose.EXPAND, info=done.info)
    state.approval_step = name
    events.append(EventSpec("approval_requested", step=name, status="pending"))
    return Move(
        name,
        state,
        events,
        "awaiting_approval",
        checkpoint_status="awaiting_approval",
        request_approval=True,
        info=done.info,
    )


def ask_about_spec(
    name: str, state: WorkflowState, events: list[EventSpec], conflict: SpecConflictError
) -> Move:
    """A worker says the task contradicts the base's tests: a person decides whether the
    specification changes (exit 10, as for an approval); the step runs again after `approve`
    or `reject`, told what was decided (workflow/resuming.py). No retry is spent."""
    state.spec_conflict = conflict.record()
    state.approval_step = name
    asked = EventSpec("approval_requested", step=name, status="pending", payload=conflict.record())
    return Move(
        name,
        state,
        [*events, asked],
        "awaiting_approval",
        checkpoint_status="awaiting_approval",
        request_approval=True,
        info=[f"{conflict.message} {conflict.hint}"],
    )


def own_events(outcome: Outcome) -> list[EventSpec]:
    """What the step that just ended recorded, in order: its finished runs' events, then the
    rest of its outcome's. They commit with the move, so no read of the store sees them yet."""
    finished = [r.event for r in outcome.records if r.event is not None]
    return [*finished, *outcome.events]


def _send_back(
    wf: Workflow,
    definition: WorkflowDef,
    name: str,
    step: StepDef,
    state: WorkflowState,
    events: list[EventSpec],
    outcome: Outcome,
    facts: Facts,
) -> Move:
    """A failure or a rejection: back to the step that can fix it, with feedback."""
    target = name
    if outcome.goto is not None:
        target = outcome.goto
    elif outcome.result == "failed" and step.on_fail:
        target = step.on_fail
    elif outcome.result == "rejected" and step.on_reject:
        target = step.on_reject
    limit = definition.steps[target].max_retries
    counted = retries.with_feedback(state.attempts, target, limit, state.feedback, outcome.feedback)
    stepped = None
    info = []
    if counted.exhausted:  # the step's retries are spent: a smaller job, if it opted in
        problem = outcome.feedback or outcome.result
        stepped = degrade.step_down(state, target, definition.steps[target], name, limit, problem)
    if stepped is not None:
        events.append(stepped)
        info.append(f"'{target}' degrades to a {stepped.status} attempt")
    elif counted.exhausted:
        error = StepFailedError(
            f"Step '{target}' of workflow {wf.id} failed {counted.failures} times, its limit of "
            f"{plural.counted(limit + 1, 'attempt')} (the first and "
            f"{plural.counted(limit, 'retry', 'retries')}); last problem: "
            f"{(outcome.feedback or outcome.result)[:800]}",
            f"The task branch {wf.task_branch} keeps its last good state. Fix the cause "
            f"(see `supervisor events {wf.id}`), then `supervisor resume {wf.id}` tries again.",
        )
        # After a gate failure, `resume` re-runs that gate on the candidate first: the cause
        # may have been the gate's configuration, fixed meanwhile.
        return fail(name, state, events, error, name if step.gate else target)
    if target == name and outcome.result == "failed":  # sent back to itself: continue?
        turn = continuity.after_send_back(
            state, name, outcome.session, facts.max_continuation_turns
        )
        events += [turn] if turn is not None else []
    payload = {"from_step": name, "attempt": counted.next_attempt, "limit": limit + 1}
    if stepped is not None:
        payload["degraded"] = stepped.status
    events.append(EventSpec("retry", step=target, status=outcome.result, payload=payload))
    return Move(target, state, events, checkpoint_status=outcome.result, info=info)


def _same_again(
    wf: Workflow,
    name: str,
    step: StepDef,
    state: WorkflowState,
    events: list[EventSpec],
    why: Classification,
    outcome: Outcome,
    facts: Facts,
) -> Move:
    """The same step again after the policy's backoff, or the rate limit's reset; or on the
    role's next CLI when this one is limited for too long or down (a failover)."""
    again = retries.same_again(state.transient, name, step.retry_policy or facts.retry_policy, why)
    cause = failover.cause_of(why, exhausted=again.exhausted, settings=facts.failover)
    if cause:
        moved = _failover(name, state, events, outcome, facts, cause, why, why.reason)
        if moved is not None:
            return moved
    if again.exhausted:
        error = StepFailedError(
            f"Step '{name}' failed {again.failures} times in a row ({why.category}): "
            f"{why.reason[:600]}",
            f"Check the model API and the CLI (`supervisor doctor`), then `supervisor resume "
            f"{wf.id}`.",
        )
        return fail(name, state, events, error)
    delay, waiting = again.delay, again.waiting
    if waiting and cause == "rate_limited":  # every CLI limited: wait for the first back
        delay = _shorter_wait(state, outcome.cli, why, delay, facts)
    if waiting:
        state.waiting_until = facts.now + delay
    payload = {
        "category": str(why.category),
        "reason": why.reason[:1000],
        "delay_s": round(delay, 2),
        "attempt": again.failures + 1,
        "max_attempts": again.max_attempts,
    }
    events.append(EventSpec("retry_scheduled", step=name, status=str(why.action), payload=payload))
    if waiting:
        told = f"rate limited: waiting {delay:.0f} s before retrying '{name}'"
    else:
        told = f"{why.category}: retrying '{name}' in {delay:.1f} s"
    status = "rate_limited" if waiting else "running"
    return Move(
        name,
        state,
        events,
        status,
        str(why.category),
        sleep_s=0.0 if waiting else delay,
        wait=waiting,
        info=[told],
    )


def _failover(
    name: str,
    state: WorkflowState,
    events: list[EventSpec],
    outcome: Outcome,
    facts: Facts,
    cause: failover.Cause,
    why: Classification | None,
    reason: str,
) -> Move | None:
    """The same step on its role's next available CLI, from the same checkpoint (same base,
    feedback and schema); None when it has none, and the step goes on as without failover."""
    if outcome.cli is None or not facts.role_clis:
        return None
    until = failover.until_for(cause, why, facts.now, facts.failover)
    moved = failover.decide(
        facts.role_clis, outcome.cli, cause, reason, until, state.unavailable, facts.now
    )
    if moved is None:
        return None
    kept = failover.current_unavailable(state.unavailable, facts.now)
    state.unavailable = {**kept, moved.from_cli: moved.unavailable}
    state.transient.pop(name, None)
    state.waiting_until = None
    moved_event = EventSpec("failover", step=name, status=moved.cause, payload=moved.payload())
    told = f"{moved.from_cli} unavailable ({cause}): step '{name}' runs again on {moved.to_cli}"
    return Move(name, state, [*events, moved_event], "running", "failover", info=[told])


def _shorter_wait(
    state: WorkflowState, cli: str | None, why: Classification, delay: float, facts: Facts
) -> float:
    """The wait for a step whose CLI is limited past the configured wait while every other CLI
    of its role is unavailable too: until the first of them is back, if that is sooner than this
    CLI's reset (this CLI is then remembered as unavailable until its own reset, so that the step
    runs on the one that is back)."""
    if cli is None or not facts.role_clis:
        return delay
    now = facts.now
    resets = [
        gone.until
        for other, gone in state.unavailable.items()
        if other != cli and other in facts.role_clis and gone.until is not None and gone.until > now
    ]
    if not resets or min(resets) - now >= delay:
        return delay
    state.unavailable[cli] = failover.Unavailable(
        cause="rate_limited", since=now, until=now + delay, reason=why.reason[:500]
    )
    return min(resets) - now
