"""What to do when a step fails: the six error categories, retry policies, and the breaker.

Every failure is classified into one category, and the category decides the action: retry the
same step (transient: the network, a crashed or hung CLI), wait and retry (a rate limit, with its
reset time when the CLI reports one), retry with feedback (the worker's answer or its code was
wrong: the feedback says exactly what), or escalate to a human (credentials, out of memory,
anything retrying cannot fix).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from enum import StrEnum
from functools import lru_cache
from typing import TYPE_CHECKING

from pydantic import Field

from supervisor.core.config import read_yaml, validate
from supervisor.core.errors import CommandTimeoutError, ConfigError, ParsingError, SandboxError
from supervisor.core.resources import CONFIG_DIR
from supervisor.core.strict_model import StrictModel

if TYPE_CHECKING:
    from supervisor.workers.base import WorkerResult


class Category(StrEnum):
    NETWORK = "network"
    CLI_ERROR = "cli_error"
    VALIDATION = "validation"
    PARSING = "parsing"
    LOGIC = "logic"
    RESOURCE = "resource"


class Action(StrEnum):
    RETRY_SAME = "retry_same"
    WAIT = "wait"
    RETRY_WITH_FEEDBACK = "retry_with_feedback"
    ESCALATE = "escalate"


@dataclass(frozen=True)
class Classification:
    category: Category
    action: Action
    reason: str
    wait_seconds: float | None = None


def classify_worker(result: WorkerResult) -> Classification:
    """A worker run that did not succeed, by the error kind its adapter read."""
    reason = result.error or "the worker failed"
    match result.error_kind:
        case "auth":
            return Classification(Category.CLI_ERROR, Action.ESCALATE, reason)
        case "rate_limit":
            return Classification(Category.RESOURCE, Action.WAIT, reason, result.retry_after)
        case "api":
            return Classification(Category.NETWORK, Action.RETRY_SAME, reason)
        case "max_turns":
            return Classification(Category.LOGIC, Action.RETRY_WITH_FEEDBACK, reason)
        case _:
            return Classification(Category.CLI_ERROR, Action.RETRY_SAME, reason)


def classify_exception(error: Exception) -> Classification:
    message = getattr(error, "message", str(error))
    if isinstance(error, ParsingError):
        schema_problem = "does not match" in message
        category = Category.VALIDATION if schema_problem else Category.PARSING
        return Classification(category, Action.RETRY_WITH_FEEDBACK, message)
    if isinstance(error, CommandTimeoutError):
        return Classification(Category.RESOURCE, Action.RETRY_SAME, message)
    if isinstance(error, SandboxError) and "out of memory" in message:
        return Classification(Category.RESOURCE, Action.ESCALATE, message)
    if isinstance(error, SandboxError):
        return Classification(Category.CLI_ERROR, Action.ESCALATE, message)
    return Classification(Category.CLI_ERROR, Action.ESCALATE, message)


class RetryPolicy(StrictModel):
    max_attempts: int = Field(3, ge=1)
    initial_delay: float = Field(2.0, ge=0)
    backoff_multiplier: float = Field(2.0, ge=1)
    max_delay: float = Field(60.0, ge=0)
    jitter: float = Field(0.1, ge=0, le=1)

    def delay(self, attempt: int, rng: random.Random | None = None) -> float:
        """Seconds before retry number `attempt` (1-based), with ± jitter."""
        base = min(self.initial_delay * self.backoff_multiplier ** (attempt - 1), self.max_delay)
        spread = base * self.jitter
        return max(0.0, base + (rng or random).uniform(-spread, spread))


class _Breaker(StrictModel):
    failure_threshold: int = Field(6, ge=1)


class _PolicyFile(StrictModel):
    policies: dict[str, RetryPolicy]
    circuit_breaker: _Breaker = Field(default_factory=_Breaker)


@lru_cache(maxsize=1)
def load_policies() -> tuple[dict[str, RetryPolicy], int]:
    """The package's retry policies, read and validated once per process (they are package
    data, not per-project config, so they cannot change during a run)."""
    path = CONFIG_DIR / "retry_policies.yaml"
    parsed: _PolicyFile = validate(_PolicyFile, read_yaml(path), path)
    return parsed.policies, parsed.circuit_breaker.failure_threshold


def policy(name: str) -> RetryPolicy:
    policies, _ = load_policies()
    if name not in policies:
        raise ConfigError(
            f"Unknown retry policy '{name}'.",
            f"Use one of {', '.join(policies)} (config/retry_policies.yaml).",
        )
    return policies[name]
