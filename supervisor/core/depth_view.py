"""The task's depth in words, for the start-task preview, `status`, `status --json` and the TUI.

Reads the stored context as plain data (standard library only): `supervisor status` shows it
without loading pydantic or the engine (the depth itself: supervisor/workflow/depth.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def summary(context: Mapping[str, Any]) -> dict[str, Any] | None:
    """The depth as JSON: how it was asked, the path, the analyzer's verdict, the rule."""
    pin = context.get("depth")
    if not isinstance(pin, Mapping):
        return None
    verdict = context.get("analysis") if isinstance(context.get("analysis"), Mapping) else None
    return {
        "asked": pin.get("asked"),
        "path": pin.get("path"),
        "by_score": pin.get("by_score"),
        "suggested": pin.get("suggested"),
        "why": pin.get("why") or "",
        "simple_max": pin.get("simple_max"),
        "researched_min": pin.get("researched_min"),
        "complexity": verdict.get("complexity") if verdict else None,
        "reasons": list(verdict.get("reasons") or []) if verdict else [],
        "expected_files": list(verdict.get("expected_files") or []) if verdict else [],
        "recommended_components": verdict.get("recommended_components") if verdict else None,
        "researched": bool(context.get("research")),
    }


def label(context: Mapping[str, Any]) -> str | None:
    """One line: `simple (complexity 2/10; analyzer: simple)`, `auto: analyzing`, ..."""
    found = summary(context)
    if found is None:
        return None
    if found["path"] is None:
        return f"{found['asked']}: the analyzer has not answered yet"
    if found["asked"] != "auto":
        return f"{found['path']} (start-task --depth {found['path']}, no analyzer)"
    said = f"; analyzer: {found['suggested']}" if found["suggested"] != found["path"] else ""
    return f"{found['path']} (complexity {found['complexity']}/10{said}): {found['why']}"


def describe(context: Mapping[str, Any]) -> str:
    """The preview's line: what the depth will be decided by, before the task exists."""
    found = summary(context)
    if found is None:
        return "fixed (the workflow does not start with a planner step)"
    if found["asked"] != "auto":
        return f"{found['path']} (--depth {found['path']}: no analyzer)"
    return (
        "auto: the analyzer scores the task 1-10 first (one model conversation); "
        f"up to {found['simple_max']} simple (no planner), from {found['researched_min']} "
        "researched (investigator before the planner), planned in between"
    )
