"""The engine's side of a failover: whether a failed worker step moves to its role's next CLI,
and what that move writes into the workflow's state.

Part of the engine (only the engine writes workflow progress): `Engine._failover` calls `plan`
when a step failed in a way that may be its CLI's fault (supervisor/routing/failover.py says
which), then `apply` and commits the result in one transition. The step then runs again from the
same checkpoint: the same base (the candidate is unchanged by a failed run), the same feedback,
the same output schema; only the CLI differs, chosen by supervisor/routing/select.py.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from supervisor.roles import load_role
from supervisor.routing import failover
from supervisor.state.store import EventSpec

if TYPE_CHECKING:
    from pathlib import Path

    from supervisor.config import Settings, StepDef
    from supervisor.recovery import Classification
    from supervisor.state.store import Workflow
    from supervisor.workflow.state import WorkflowState


def plan(
    repo: Path,
    settings: Settings,
    wf: Workflow,
    step: StepDef,
    state: WorkflowState,
    cli: str | None,
    cause: failover.Cause,
    why: Classification | None,
    reason: str,
    now: float,
) -> failover.Failover | None:
    """The failover for a one-role step (or a component fan-out, whose waiting components run
    again) that failed on `cli` for `cause`, or None: a step with no fallback available goes on
    as before (it waits, retries or fails)."""
    if cli is None or not step.role:
        return None
    clis = failover.chain(load_role(step.role, repo).clis, wf.cli)
    until = failover.until_for(cause, why, now, settings.failover)
    return failover.decide(clis, cli, cause, reason, until, state.unavailable, now)


def apply(state: WorkflowState, name: str, moved: failover.Failover, now: float) -> EventSpec:
    """Remember the CLI left as unavailable, give the step fresh transient retries on the next
    one, and say so in a `failover` event."""
    kept = failover.current_unavailable(state.unavailable, now)
    state.unavailable = {**kept, moved.from_cli: moved.unavailable}
    state.transient.pop(name, None)
    state.waiting_until = None
    return EventSpec("failover", step=name, status=moved.cause, payload=moved.payload())


def shorter_wait(
    repo: Path,
    wf: Workflow,
    step: StepDef,
    state: WorkflowState,
    cli: str | None,
    why: Classification,
    delay: float,
    now: float,
) -> float:
    """The wait for a step whose CLI is limited past the configured wait while every other CLI
    of its role is unavailable too: until the first of them is back, if that is sooner than this
    CLI's reset (this CLI is then remembered as unavailable until its own reset, so that the step
    runs on the one that is back)."""
    if cli is None or not step.role:
        return delay
    clis = failover.chain(load_role(step.role, repo).clis, wf.cli)
    resets = [
        gone.until
        for other, gone in state.unavailable.items()
        if other != cli and other in clis and gone.until is not None and gone.until > now
    ]
    if not resets or min(resets) - now >= delay:
        return delay
    state.unavailable[cli] = failover.Unavailable(
        cause="rate_limited", since=now, until=now + delay, reason=why.reason[:500]
    )
    return min(resets) - now
