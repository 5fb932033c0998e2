"""The one recovery path: how a failed run is counted, and whether it runs again.

Two kinds of failure, the same for a plain step and for a component inside a fan-out:
- with feedback (a gate failed, a reviewer rejected, the answer was wrong): the step (or the
  component) runs again with the problem in its prompt, until its `max_retries` are spent;
- the same again (a network error, a crash, a rate limit): the step runs again unchanged after
  the retry policy's backoff or the limit's reset, until the policy's `max_attempts`.

Why one module: the engine's transitions and the component fan-out used to count these each their
own way (the fan-out's fix-up attempts restarted at 1). Both now count here; the engine alone
writes the result into the workflow's state.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from supervisor.policy import recovery

if TYPE_CHECKING:
    from supervisor.policy.recovery import Classification


@dataclass(frozen=True)
class FeedbackRetry:
    """A failure counted against a step's (or a component's) retries."""

    failures: int
    """Failures so far, this one included: the next run is attempt `failures + 1`."""
    limit: int
    """Retries allowed (`max_retries`): `limit + 1` runs in all."""

    @classmethod
    def after(cls, previous: int, limit: int) -> FeedbackRetry:
        """One more failure after `previous` ones."""
        return cls(previous + 1, limit)

    @property
    def exhausted(self) -> bool:
        return self.failures > self.limit

    @property
    def next_attempt(self) -> int:
        return self.failures + 1


def with_feedback(
    counts: dict[str, int],
    key: str,
    limit: int,
    feedback: dict[str, list[str]] | None = None,
    problem: str | None = None,
) -> FeedbackRetry:
    """Count one failure of `key` in `counts` (and keep its problem for the next prompt)."""
    counted = FeedbackRetry.after(counts.get(key, 0), limit)
    counts[key] = counted.failures
    if feedback is not None and problem:
        feedback.setdefault(key, []).append(problem)
    return counted


@dataclass(frozen=True)
class SameAgain:
    """A transient failure: run the same step again after `delay` seconds, or give up."""

    failures: int
    max_attempts: int
    delay: float
    waiting: bool
    """A rate limit: a waiting state until its reset (`status` shows it), not a sleep."""

    @property
    def exhausted(self) -> bool:
        return self.failures >= self.max_attempts


def same_again(
    counts: dict[str, int], key: str, policy_name: str, why: Classification
) -> SameAgain:
    """Count one transient failure of `key` and read the policy's delay for the next run."""
    policy = recovery.policy(policy_name)
    counts[key] = counts.get(key, 0) + 1
    delay = why.wait_seconds if why.wait_seconds is not None else policy.delay(counts[key])
    return SameAgain(counts[key], policy.max_attempts, delay, why.action == recovery.Action.WAIT)
