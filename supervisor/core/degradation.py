"""How a degraded result is shown: the level a step ran at, read from a stored context.

The engine's decisions are in supervisor/workflow/degrade.py; this part is read by `status`, the
TUI and the approval screen, which must not load the workflow stack (tests/test_cli_imports.py),
so it imports nothing but the standard library.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

LEVELS = ("simplified", "minimal")
"""From least to most degraded; a step's `degrade:` list follows this order."""

MEANING = {
    "simplified": "core functionality only: edge cases, error handling and optimisations left out",
    "minimal": "stubs that satisfy the interfaces, the real logic marked TODO: finish it by hand",
}


def worst(context: Mapping[str, Any]) -> str | None:
    """The most degraded level any step of the workflow produced (None: not degraded)."""
    levels = set((context.get("degraded") or {}).values())
    for level in reversed(LEVELS):
        if level in levels:
            return level
    return None


def needs_approval(context: Mapping[str, Any]) -> bool:
    """A minimal result (stubs) is never committed without a person's approval."""
    return worst(context) == "minimal"


def label(context: Mapping[str, Any]) -> str:
    """`degraded: minimal (implement)` for status lines, or '' when nothing was degraded."""
    steps = dict(context.get("degraded") or {})
    if not steps:
        return ""
    return "degraded: " + ", ".join(f"{level} ({step})" for step, level in steps.items())


def lines(context: Mapping[str, Any]) -> list[str]:
    """What the approval screen and the commit message say about a degraded result."""
    steps = dict(context.get("degraded") or {})
    return [
        f"DEGRADED ({level}) result of step '{step}': {MEANING.get(level, level)}"
        for step, level in steps.items()
    ]
