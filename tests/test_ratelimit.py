"""A rate limit's reset, read with its units (supervisor/workers/ratelimit.py): the API's headers as
the credential proxy recorded them, and the messages the real CLIs print, in the formats their
sources and their vendors' APIs use. "Try again in 2 hours" is 7200 s, never 2."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from supervisor.workers import ratelimit
from supervisor.workers.base import retry_after_seconds

# 2026-11-25 12:00:00 UTC (07:00 in New York, which is on standard time then).
NOW = datetime(2026, 11, 25, 12, 0, tzinfo=UTC).timestamp()


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        # openai's 429 message, as codex passes it on
        ("Rate limit reached for gpt-5.5 on tokens per min. Please try again in 6.5s.", 6.5),
        ("Please try again in 1m30s. Visit https://platform.openai.com/account/rate-limits", 90),
        ("Please try again in 20ms.", 0.02),
        # codex's own usage-limit message
        ("You've hit your usage limit. Try again in 2 days 3 hours 5 minutes.", 183900),
        ("try again in 2 hours", 7200),
        ("try again in 1h 32m", 5520),
        ("Retry after 45 seconds", 45),
        ("retry-after: 1500 ms", 1.5),
        ("Rate limited. Please try again in 20s.", 20),
        ("rate limit, resets in 6m0s", 360),
        ("Retry-After: 30", 30),  # a bare number after the header name is seconds
        # gemini's quota error text
        ("You exceeded your current quota. Please retry in 56.081706825s.", 56.081706825),
        # clock times: the next such time, in the zone named (claude's usage limit messages)
        ("5-hour limit reached ∙ resets 3pm (America/New_York)", 8 * 3600),
        ("Claude usage limit reached. Your limit will reset at 15:00 UTC.", 3 * 3600),
        ("limit reached, resets 11am", 23 * 3600),  # 11:00 UTC has passed today: tomorrow's
        # absolute times
        ("Claude AI usage limit reached|1795626000", 1795626000 - NOW),
        ("rate limited until 2026-11-25T13:30:00Z", 5400),
        ("quota resets at 2026-11-25T07:30:00-05:00", 1800),
    ],
)
def test_a_cli_message_is_read_with_its_units(text: str, seconds: float) -> None:
    assert ratelimit.from_text(text, NOW) == pytest.approx(seconds)


@pytest.mark.parametrize(
    "text",
    [
        "no hint here",
        "Rate limit reached for requests",
        "error 429 at line 3",  # "at 3" alone is no clock time
        "try again in 400 days",  # past any vendor window: a misreading, not a reset
    ],
)
def test_a_message_without_a_reset_gives_none(text: str) -> None:
    assert ratelimit.from_text(text, NOW) is None


def test_the_adapters_read_messages_through_the_same_parser() -> None:
    assert retry_after_seconds("try again in 2 hours", NOW) == 7200


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        ({"retry-after": "30"}, 30),
        ({"retry-after": "Wed, 25 Nov 2026 12:02:00 GMT"}, 120),
        ({"anthropic-ratelimit-requests-reset": "2026-11-25T12:00:40Z"}, 40),
        (  # every bucket must be back: the latest reset counts
            {
                "anthropic-ratelimit-requests-reset": "2026-11-25T12:00:40Z",
                "anthropic-ratelimit-tokens-reset": "2026-11-25T12:05:00Z",
            },
            300,
        ),
        ({"x-ratelimit-reset-requests": "1s", "x-ratelimit-reset-tokens": "6m0s"}, 360),
        ({"x-ratelimit-reset-tokens": "2h3m"}, 7380),
        ({"x-ratelimit-reset-requests": "120ms"}, 0.12),
        (  # retry-after is the API's answer to exactly this question: it wins
            {"retry-after": "7", "x-ratelimit-reset-tokens": "6m0s"},
            7,
        ),
    ],
)
def test_recorded_headers_name_the_reset(headers: dict[str, str], seconds: float) -> None:
    assert ratelimit.from_headers(headers, NOW) == pytest.approx(seconds)


def test_headers_without_a_reset_give_none() -> None:
    assert ratelimit.from_headers({"content-type": "application/json"}, NOW) is None
    assert ratelimit.from_headers({"retry-after": "soon"}, NOW) is None


def test_geminis_retry_info_in_a_429_body() -> None:
    body = {
        "error": {
            "code": 429,
            "status": "RESOURCE_EXHAUSTED",
            "details": [
                {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": []},
                {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "30s"},
            ],
        }
    }
    assert ratelimit.from_body(json.dumps(body).encode()) == 30
    assert ratelimit.from_body(json.dumps([body]).encode()) == 30  # the streamed form
    assert ratelimit.from_body(b"not json") is None
    assert ratelimit.from_body(b'{"error": {"details": "x"}}') is None
