"""Resuming a task: the workflow's state after a crash, a decision or a failure, made ready for
the engine to carry on. Part of the engine (it writes workflow progress, as only the engine may):
`supervisor resume` and a timed-out approval (supervisor/policy/risk.py, via the engine) both use
it, and a completed task's next round (`supervisor pr sync`) is reopened here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from supervisor.core.errors import ApprovalRequired, StateError
from supervisor.guard import protected
from supervisor.policy import risk
from supervisor.policy.approvals import REQUEST_KEY
from supervisor.state.store import EventSpec
from supervisor.workflow.state import WorkflowState

if TYPE_CHECKING:
    from supervisor.core.config import Settings, WorkflowDef
    from supervisor.state.store import Store, Workflow


def repin_gates(ctx: dict[str, Any], settings: Settings) -> list[EventSpec]:
    """A person resuming a failed task may have fixed a gate command in their own
    configuration: the pinned gates follow it. This reads the user's checkout and config, never
    a candidate, so a worker still cannot define its own check."""
    pins = ctx.get(protected.PINNED_KEY)
    now = dict(settings.gates)
    if not pins or pins.get("gates") == now:
        return []
    ctx[protected.PINNED_KEY] = {**pins, "gates": now}
    payload = {"gates": now, "before": pins.get("gates"), "reason": "resume after a failure"}
    return [EventSpec("checks_pinned", status="repinned", payload=payload)]


def spec_decision(conflict: dict[str, Any], status: str, reason: str | None) -> str:
    """What the worker that reported a conflict with the base's tests is told of the person's
    decision, at its next attempt."""
    tests = ", ".join(conflict.get("tests") or []) or "the tests you named"
    if status == "approved":
        return (
            f"A person read your report that the task contradicts existing tests ({tests}) and "
            "approved changing them: change those tests as the task requires, and only those; "
            "every other existing test stays as it is. The changed tests are shown to the "
            "person again before anything is committed."
            + (f" Their note: {reason}" if reason else "")
        )
    return (
        f"A person read your report that the task contradicts existing tests ({tests}) and "
        f"decided the tests stay as they are: {reason or '(no reason given)'}. Do the task "
        "without changing them."
    )


def prepare(store: Store, wf: Workflow, settings: Settings) -> None:
    """Apply what happened while no supervisor ran the task (a person's decision, a fix after a
    failure, a raised budget) before the engine carries on; the context written is validated
    as the engine's typed state."""
    ctx = dict(wf.context)
    if wf.status == "awaiting_approval":
        approval = store.latest_approval(wf.id)
        if approval is not None and approval.status == "pending" and risk.times_out(wf):
            return  # the engine waits out the rest of the policy's timeout (policy/risk.py)
        if approval is None or approval.status == "pending":
            raise ApprovalRequired(
                f"Workflow {wf.id} waits for approval of step '{ctx.get('approval_step')}'.",
                f"Approve with `supervisor approve {wf.id}` or reject with `supervisor reject "
                f'{wf.id} --reason "..."`, then resume.',
            )
        ctx.pop("decision", None)  # acted on now (supervisor/state/status_label.py)
        step = wf.current_step
        events = [EventSpec("resumed", status=approval.status, payload={"approval": approval.id})]
        conflict = ctx.pop("spec_conflict", None)
        if conflict and approval.step == step:  # the worker's report on the base's tests
            told = spec_decision(conflict, approval.status, approval.reason)
            ctx.setdefault("feedback", {}).setdefault(conflict["step"], []).append(told)
        elif approval.status == "rejected":
            step = approval.step
            reason = approval.reason or "(no reason given)"
            ctx.setdefault("feedback", {}).setdefault(step, []).append(
                f"A human reviewer rejected the previous result of this step: {reason}"
            )
            if (ctx.get(REQUEST_KEY) or {}).get("producer") == step:
                # A rejected dependency change is not built on: the step starts over from the
                # last state that needed no approval (the rejected candidate stays in refs).
                ctx.pop(REQUEST_KEY, None)
                ctx["candidate"] = None
        store.update_workflow(
            wf.id,
            status="running",
            current_step=step,
            context=WorkflowState.load(ctx).dump(),
            events=events,
        )
    elif wf.status in ("failed", "interrupted"):
        # A fresh set of retries, and a closed breaker, for the step that failed: a human chose
        # to resume, presumably after fixing the cause. (A crash leaves the status `running`, so
        # a kill and resume keeps the breaker's count.)
        for counter in ("transient", "breaker"):
            ctx.setdefault(counter, {}).pop(wf.current_step, None)
        # Every step's retry count starts afresh: a resume at a gate must leave the step its
        # failure goes back to some attempts.
        for memory in ("attempts", "trees", "noops"):
            ctx.pop(memory, None)
        # A CLI left for its credentials is tried again: the person may have logged in since.
        gone = ctx.get("unavailable") or {}
        ctx["unavailable"] = {c: u for c, u in gone.items() if u.get("until") is not None}
        events = [EventSpec("resumed", step=wf.current_step, status=wf.status)]
        events += repin_gates(ctx, settings)
        store.update_workflow(
            wf.id,
            status="running",
            current_step=wf.current_step,
            context=WorkflowState.load(ctx).dump(),
            events=events,
        )
    elif wf.status == "budget_exceeded":
        from supervisor.policy import budgets

        ctx = budgets.resume_check(wf)  # still over: stays paused, says so
        events = [EventSpec("resumed", step=wf.current_step, status=wf.status)]
        store.update_workflow(
            wf.id,
            status="running",
            current_step=wf.current_step,
            context=WorkflowState.load(ctx).dump(),
            events=events,
        )
    else:  # running (after a crash) or rate_limited: carry on where it stood
        store.add_event(wf.id, EventSpec("resumed", step=wf.current_step, status=wf.status))


def fix_up_step(definition: WorkflowDef) -> str | None:
    """Where a completed task's next round starts: the step a review's rejection sends the work
    back to (the implementer), else the one a failed gate does; None when the workflow has
    neither."""
    steps = list(definition.steps.values())
    for field in ("on_reject", "on_fail"):
        for step in reversed(steps):
            target = getattr(step, field)
            if target is not None:
                return str(target)
    return None


def reopen(store: Store, wf: Workflow, step: str, feedback: str, events: list[EventSpec]) -> None:
    """A completed task's next round (`supervisor pr sync`): back at `step` with `feedback` in
    its prompt, as a review's rejection sends work back, with a fresh count of retries; the
    run that follows (`resume`) gates, reviews and commits it like any round. `events` commit
    in the same transaction."""
    if wf.status != "completed":
        raise StateError(
            f"Workflow {wf.id} is {wf.status}: only a completed task takes a next round.",
            f"Finish this round first (`supervisor status {wf.id}` says what it waits for).",
        )
    ctx = dict(wf.context)
    for memory in ("attempts", "trees", "noops", "transient", "breaker", "decision"):
        ctx.pop(memory, None)
    ctx["feedback"] = {step: [feedback]}
    ctx["candidate"] = None  # the round starts from the branch's gated tip
    reopened = EventSpec("reopened", step=step, status="running", payload={"step": step})
    store.update_workflow(
        wf.id,
        status="running",
        current_step=step,
        context=WorkflowState.load(ctx).dump(),
        events=[*events, reopened],
    )
