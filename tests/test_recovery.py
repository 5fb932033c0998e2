"""Error handling: the six categories drive the action; policies back off with jitter."""

from __future__ import annotations

import random

import pytest

from supervisor.core.errors import CommandTimeoutError, ParsingError, SandboxError
from supervisor.policy.recovery import (
    Action,
    Category,
    RetryPolicy,
    classify_exception,
    classify_worker,
    load_policies,
    policy,
)
from supervisor.workers.base import WorkerResult, classify_message, retry_after_seconds


@pytest.mark.parametrize(
    ("kind", "category", "action"),
    [
        ("api", Category.NETWORK, Action.RETRY_SAME),
        ("rate_limit", Category.RESOURCE, Action.WAIT),
        ("auth", Category.CLI_ERROR, Action.ESCALATE),
        ("cli", Category.CLI_ERROR, Action.RETRY_SAME),
        ("max_turns", Category.LOGIC, Action.RETRY_WITH_FEEDBACK),
    ],
)
def test_worker_failures_are_classified_by_kind(
    kind: str, category: Category, action: Action
) -> None:
    result = WorkerResult(ok=False, text="", error="x", error_kind=kind, retry_after=7.0)
    found = classify_worker(result)
    assert (found.category, found.action) == (category, action)
    if action is Action.WAIT:
        assert found.wait_seconds == 7.0


def test_exceptions_are_classified() -> None:
    no_block = classify_exception(ParsingError("The answer holds no JSON block."))
    schema = classify_exception(ParsingError("The JSON block does not match the X schema: a"))
    hung = classify_exception(CommandTimeoutError("printed nothing for 10 s"))
    oom = classify_exception(SandboxError("The container ran out of memory (limit 2g)."))
    assert (no_block.category, no_block.action) == (Category.PARSING, Action.RETRY_WITH_FEEDBACK)
    assert (schema.category, schema.action) == (Category.VALIDATION, Action.RETRY_WITH_FEEDBACK)
    assert (hung.category, hung.action) == (Category.RESOURCE, Action.RETRY_SAME)
    assert (oom.category, oom.action) == (Category.RESOURCE, Action.ESCALATE)


@pytest.mark.parametrize(
    ("text", "status", "kind"),
    [
        ("Failed to authenticate. API Error: 401", None, "auth"),
        ("API Error: 429 rate_limit_error", None, "rate_limit"),
        ("RESOURCE_EXHAUSTED", None, "rate_limit"),
        ("We're currently experiencing high demand", None, "api"),
        ("stream disconnected before completion: error sending request", None, "api"),
        ("boom", 500, "api"),
        ("segfault", None, "cli"),
        # An address is not what the CLI says about the error: a port holding 401, a gateway
        # host named .internal.
        ("API Error: 503 down. Gateway: model-api.supervisor.internal:34015.", None, "api"),
        ("exited: see https://api.example.com:4010/v1/x?code=401", None, "cli"),
        ("listening on localhost:44290", None, "cli"),
        ("HTTP 401 from 127.0.0.1:4290", None, "auth"),
        ("API Error: 429 at model-api.supervisor.internal:35030", None, "rate_limit"),
    ],
)
def test_what_a_cli_says_maps_to_a_kind(text: str, status: int | None, kind: str) -> None:
    assert classify_message(text, status) == kind


def test_a_reported_reset_time_is_read() -> None:
    assert retry_after_seconds("Rate limited. Please try again in 20s.") == 20
    assert retry_after_seconds("retry-after: 1500 ms") == 1.5
    assert retry_after_seconds("no hint here") is None


def test_backoff_grows_is_capped_and_jittered() -> None:
    p = RetryPolicy(max_attempts=5, initial_delay=1, backoff_multiplier=2, max_delay=5, jitter=0.1)
    rng = random.Random(1)
    delays = [p.delay(n, rng) for n in range(1, 6)]
    assert 0.9 <= delays[0] <= 1.1
    assert 1.8 <= delays[1] <= 2.2
    assert all(d <= 5.5 for d in delays)
    assert len({round(d, 6) for d in delays}) == 5  # jitter: no two alike


def test_the_shipped_policies_load() -> None:
    policies, threshold = load_policies()
    assert {"default", "aggressive", "conservative"} <= set(policies)
    assert threshold >= 1
    assert policy("conservative").initial_delay > policy("aggressive").initial_delay


def test_retry_policies_are_read_once_per_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every transition asks for its policy; the YAML is parsed and validated only the first
    time."""
    import supervisor.policy.recovery as recovery

    load_policies()
    reads: list[object] = []
    monkeypatch.setattr(recovery, "read_yaml", lambda path: reads.append(path) or {})
    assert load_policies() is load_policies()
    assert policy("default").max_attempts >= 1
    assert reads == []
