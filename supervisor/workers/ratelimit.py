"""When a rate limit resets, read with units: from the API's headers first, the CLI's words second.

Why its own module: a reset time decides whether a step waits on its CLI or fails over (see
supervisor/routing/failover.py), and the old reading took the first number and no unit, so "try
again in 2 hours" waited 2 seconds, retried three times in 6 s and failed. The API's own headers
(recorded by the credential proxy, see supervisor/workers/witness.py) cannot be changed by a
worker and are exact; the CLI's text is what is left when the record has none.

Every function is pure given `now` (Unix seconds), so the specs pin each format the vendors and
the CLIs use (tests/test_ratelimit.py).
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

MAX_WAIT = 14 * 24 * 3600.0
"""Longer than any vendor window (weekly limits): a larger figure is a misreading, not a reset."""

_UNITS = {
    "ms": 0.001,
    "millisecond": 0.001,
    "s": 1.0,
    "sec": 1.0,
    "second": 1.0,
    "m": 60.0,
    "min": 60.0,
    "minute": 60.0,
    "h": 3600.0,
    "hr": 3600.0,
    "hour": 3600.0,
    "d": 86400.0,
    "day": 86400.0,
}
_UNIT = r"(?:milliseconds?|ms|seconds?|secs?|s|minutes?|mins?|m|hours?|hrs?|h|days?|d)"
# "1h 32m", "6m0s", "2 hours", "1 day 3 hours 5 minutes", "56.08s", "500ms", "2h3m".
_DURATION = re.compile(rf"(?:\d+(?:\.\d+)?\s*{_UNIT}(?![a-z])[\s,]*(?:and\s+)?)+", re.I)
_PART = re.compile(rf"(\d+(?:\.\d+)?)\s*({_UNIT})(?![a-z])", re.I)
_LEAD = r"(?:retry[- _]after|retry in|try again in|resets? in|reset after|wait)"
_RELATIVE = re.compile(rf"{_LEAD}\W{{0,3}}(?:about\s+|approximately\s+)?", re.I)
_BARE = re.compile(rf"{_LEAD}\W{{0,3}}(\d+(?:\.\d+)?)(?!\s*{_UNIT}(?![a-z]))(?![\d.:])", re.I)
_ISO = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?")
_EPOCH = re.compile(r"(?:\||\b(?:at|until|resets?(?:_at)?)\W{0,3})(1\d{9}(?:\.\d+)?)\b", re.I)
_CLOCK = re.compile(
    r"(?:resets?|try again at|retry at|until|at)\s+(?:at\s+)?"
    r"(\d{1,2})(?::(\d{2}))?\s*(am|pm)?"
    r"(?:\s*\(([A-Za-z_]+(?:/[A-Za-z_+-]+)*)\)|\s+(UTC|GMT|Z|[A-Z][A-Za-z_]+/[A-Za-z_/+-]+))?",
    re.I,
)


def from_text(text: str, now: float) -> float | None:
    """Seconds until the reset a CLI's message names, or None when it names none.

    Understood: a duration with units anywhere after "try again in" / "retry after" / "resets in"
    (a bare number there counts as seconds, as Retry-After does), an ISO timestamp, epoch seconds
    ("usage limit reached|1764100000", "resets at 1764100000"), and a clock time with its zone
    ("resets 3pm (America/New_York)", "at 15:00 UTC"; no zone: UTC), taken as the next such time."""
    for found in (_relative(text), _absolute(text, now)):
        if found is not None:
            return _bounded(found)
    return None


def _relative(text: str) -> float | None:
    for lead in _RELATIVE.finditer(text):
        duration = _DURATION.match(text, lead.end())
        if duration is not None:
            return duration_seconds(duration.group(0))
    bare = _BARE.search(text)
    return float(bare.group(1)) if bare else None


def _absolute(text: str, now: float) -> float | None:
    iso = _ISO.search(text)
    if iso is not None:
        stamp = _iso(iso.group(0))
        if stamp is not None:
            return stamp - now
    epoch = _EPOCH.search(text)
    if epoch is not None:
        return float(epoch.group(1)) - now
    for clock in _CLOCK.finditer(text):
        hour, minute, half, zone_a, zone_b = clock.groups()
        if half is None and minute is None and zone_a is None and zone_b is None:
            continue  # "at 3" alone is no clock time
        seconds = _next_clock(int(hour), int(minute or 0), half, zone_a or zone_b, now)
        if seconds is not None:
            return seconds
    return None


def duration_seconds(text: str) -> float | None:
    """ "1h 32m" -> 5520, "6m0s" -> 360, "2 hours" -> 7200, "500ms" -> 0.5; None without units."""
    parts = _PART.findall(text)
    if not parts:
        return None
    return sum(float(number) * _unit(unit) for number, unit in parts)


def _unit(unit: str) -> float:
    word = unit.lower()
    if word in _UNITS:
        return _UNITS[word]
    return _UNITS[word.rstrip("s")]


def _iso(text: str) -> float | None:
    try:
        stamp = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=UTC)
    return stamp.timestamp()


def _next_clock(
    hour: int, minute: int, half: str | None, zone: str | None, now: float
) -> float | None:
    if half is not None:
        if not 1 <= hour <= 12:
            return None
        hour = hour % 12 + (12 if half.lower() == "pm" else 0)
    if hour > 23 or minute > 59:
        return None
    tz: Any = UTC
    if zone and zone.upper() not in ("UTC", "GMT", "Z"):
        try:
            tz = ZoneInfo(zone)
        except (ZoneInfoNotFoundError, ValueError):
            tz = UTC
    local = datetime.fromtimestamp(now, tz)
    target = local.replace(hour=hour, minute=minute, second=0, microsecond=0)
    if target.timestamp() <= now:
        target = (local + timedelta(days=1)).replace(hour=hour, minute=minute, second=0)
        target = target.replace(microsecond=0)
    return target.timestamp() - now


def _bounded(seconds: float) -> float | None:
    if seconds != seconds or seconds > MAX_WAIT:  # NaN, or a misreading
        return None
    return max(0.0, seconds)


def from_headers(headers: dict[str, str], now: float) -> float | None:
    """Seconds until the reset the API's response headers name (names lower-cased), or None.

    `retry-after` (seconds, or an HTTP date) is the API telling the client exactly when to come
    back; without it, the latest of the vendors' per-bucket resets: Anthropic's
    `anthropic-ratelimit-*-reset` (RFC 3339), OpenAI's `x-ratelimit-reset-requests/tokens`
    ("1s", "6m0s", "2h3m") — the latest, because the request needs every bucket back."""
    retry = (headers.get("retry-after") or "").strip()
    if retry:
        try:
            return _bounded(float(retry))
        except ValueError:
            pass
        try:
            return _bounded(parsedate_to_datetime(retry).timestamp() - now)
        except (TypeError, ValueError, IndexError):
            pass
    resets: list[float] = []
    for name, value in headers.items():
        if name.startswith("anthropic-ratelimit-") and name.endswith("-reset"):
            stamp = _iso(value.strip())
            if stamp is not None:
                resets.append(stamp - now)
        elif name.startswith("x-ratelimit-reset"):
            seconds = duration_seconds(value)
            if seconds is None:
                try:
                    seconds = float(value)
                except ValueError:
                    continue
            resets.append(seconds)
    return _bounded(max(resets)) if resets else None


def from_body(body: bytes) -> float | None:
    """Gemini's `RetryInfo.retryDelay` ("30s") in a 429's error details, or None."""
    try:
        value = json.loads(body[:65536])
    except ValueError:
        return None
    if isinstance(value, list) and value:  # a streamed error arrives as a one-item array
        value = value[0]
    details = ((value or {}).get("error") or {}).get("details") if isinstance(value, dict) else None
    for detail in details if isinstance(details, list) else []:
        if isinstance(detail, dict) and str(detail.get("@type", "")).endswith("RetryInfo"):
            delay = duration_seconds(str(detail.get("retryDelay") or ""))
            if delay is not None:
                return _bounded(delay)
    return None
