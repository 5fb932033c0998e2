"""Failover: which CLI a step runs on when the role's preferred CLI cannot serve it.

A role may name its CLIs in order (`cli: [claude, codex]`): the first is preferred, the rest are
fallbacks. When the step's CLI is rate-limited for longer than `failover.max_wait_seconds`, its
API stays down after the retry policy's attempts, or its credentials are refused, the engine
remembers that CLI as unavailable (until its reset, for a while, or for the rest of the task) and
runs the same step again from the same checkpoint; the step then runs on the first CLI of the
role's list that is not unavailable. Once a reset time has passed, later steps are back on the
preferred CLI.

Why pure functions over plain values: the decision is the part worth pinning down case by case
(tests/test_routing_failover.py); the engine decides with it (supervisor/workflow/decide.py), is
the only writer of what is remembered, the worker step only asks `choose` where to run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from supervisor.core.strict_model import StrictModel
from supervisor.policy import recovery

if TYPE_CHECKING:
    from supervisor.core.config import FailoverSettings

Cause = Literal["rate_limited", "api_down", "credentials"]


class Unavailable(StrictModel):
    """A CLI the task does not use for now, and why (stored in the workflow's state)."""

    cause: Cause
    since: float
    until: float | None = None
    """When it may be used again (a rate limit's reset); None: not in this run of the task
    (refused credentials: `supervisor resume` after a new login clears it)."""
    reason: str = ""

    def over(self, now: float) -> bool:
        return self.until is not None and self.until <= now


@dataclass(frozen=True)
class Failover:
    """The engine's move: run the step again on `to_cli`, remembering `from_cli` as unavailable."""

    from_cli: str
    to_cli: str
    cause: Cause
    unavailable: Unavailable

    def payload(self) -> dict[str, Any]:
        return {
            "from": self.from_cli,
            "to": self.to_cli,
            "cause": self.cause,
            "until": self.unavailable.until,
            "reason": self.unavailable.reason[:500],
        }


def chain(role_clis: Sequence[str], default: str) -> list[str]:
    """The CLIs a step may run on, preferred first: the role's list, or the task's CLI."""
    return list(role_clis) or [default]


def choose(clis: Sequence[str], unavailable: Mapping[str, Unavailable], now: float) -> str:
    """The first CLI of the list not unavailable at `now`; the preferred one if none is (the
    engine then waits for it as it always did)."""
    for cli in clis:
        gone = unavailable.get(cli)
        if gone is None or gone.over(now):
            return cli
    return clis[0]


def cause_of(
    why: recovery.Classification, *, exhausted: bool, settings: FailoverSettings
) -> Cause | None:
    """Whether a transient failure is a reason to leave its CLI, and which.

    A rate limit whose reset is further off than `max_wait_seconds` is; a shorter one is waited
    out as before. A network or API error is only once the retry policy's attempts are spent, and
    so is a rate limit without a reset time. A crashed or hung CLI is not: the next CLI would not
    fix what the step asked of it."""
    if why.action == recovery.Action.WAIT:
        if why.wait_seconds is not None and why.wait_seconds > settings.max_wait_seconds:
            return "rate_limited"
        return "rate_limited" if exhausted else None
    if why.category == recovery.Category.NETWORK and exhausted:
        return "api_down"
    return None


def until_for(
    cause: Cause, why: recovery.Classification | None, now: float, settings: FailoverSettings
) -> float | None:
    """When a CLI left for `cause` may be tried again."""
    if cause == "credentials":
        return None
    if cause == "rate_limited" and why is not None and why.wait_seconds is not None:
        return now + why.wait_seconds
    return now + settings.down_seconds


def decide(
    clis: Sequence[str],
    current: str,
    cause: Cause,
    reason: str,
    until: float | None,
    unavailable: Mapping[str, Unavailable],
    now: float,
) -> Failover | None:
    """The failover for a step that failed on `current` for `cause`: to the first other CLI of the
    list that is available now; None when there is none (no fallback configured, every fallback
    unavailable too, or `current` is not in the role's list), and the engine goes on as without
    failover."""
    if current not in clis:
        return None
    gone = Unavailable(cause=cause, since=now, until=until, reason=reason)
    others = {**unavailable, current: gone}
    for cli in clis:
        if cli == current:
            continue
        held = others.get(cli)
        if held is None or held.over(now):
            return Failover(current, cli, cause, gone)
    return None


def current_unavailable(
    unavailable: Mapping[str, Unavailable], now: float
) -> dict[str, Unavailable]:
    """What is still unavailable at `now` (expired entries dropped when the engine writes)."""
    return {cli: gone for cli, gone in unavailable.items() if not gone.over(now)}
