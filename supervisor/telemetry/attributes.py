"""What a span's attribute may hold: numbers, names and flags, bounded; text only when asked.

Why one place: spans leave the machine for a collector the team shares, so everything that goes
out passes through here. Free text (a task's description, a worker's answer, a gate's output) is
never an attribute unless the user's own config asks for content capture, and then it is redacted
by the same rules as the context packs (supervisor/core/redaction.py) and clipped. Names and
commands are redacted too: a gate command may carry a token on its command line.
"""

from __future__ import annotations

from typing import Any

from supervisor.core.redaction import redact

MAX_TEXT = 1024
"""Characters of one attribute's text (the SDK's span limits clip again, to the same size)."""
MAX_NAME = 128

PROVIDERS = {"claude": "anthropic", "codex": "openai", "gemini": "gcp.gemini"}
"""The GenAI semantic conventions' `gen_ai.provider.name` of each CLI's model API."""

Value = str | bool | int | float
Attributes = dict[str, Value]


def safe_text(text: str, size: int = MAX_TEXT) -> str:
    """`text` redacted, then clipped to `size` characters."""
    cleaned, _ = redact(text)
    return cleaned if len(cleaned) <= size else cleaned[: size - 1] + "…"


def name(value: Any) -> str | None:
    """A short name (a role, a step, a model, a CLI), redacted and clipped; None when absent."""
    if value is None or value == "":
        return None
    return safe_text(str(value), MAX_NAME)


def number(value: Any) -> int | float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return value


def bounded(found: dict[str, Any]) -> Attributes:
    """The attributes worth sending: None left out, numbers and flags as they are, text made a
    bounded name (every caller's text is a name; free text comes through `safe_text`)."""
    kept: Attributes = {}
    for key, value in found.items():
        if value is None:
            continue
        if isinstance(value, (bool, int, float)):
            kept[key] = value
        else:
            text = name(value)
            if text is not None:
                kept[key] = text
    return kept
