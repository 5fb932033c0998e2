"""Graceful degradation: when a step's retries are spent, a smaller job instead of a failure.

A step opts in with `degrade: [simplified, minimal]` in the workflow definition. Once its
feedback retries are spent, the engine steps it down one level and runs it once more: first
*simplified* (core functionality only; edge cases, error handling and optimisations left for a
follow-up), then *minimal* (stubs that satisfy the interfaces, the real logic marked TODO). Only
when the last level fails too does the task fail as before.

Why the engine decides and records it here: a degraded result must never pass for a complete
one. The level in force is kept in the typed state (`WorkflowState.degraded`, step -> level), so
`status`, the TUI, the approval screen and the commit message all read the same fact, and a
*minimal* result (stubs) always waits for a person before it is committed, whatever the approval
policy says. The worker step only reads the level to pick the prompt's instruction
(prompts/_degrade.j2).

What `status`, the TUI and the approval screen show is in supervisor/core/degradation.py, which
loads nothing heavy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from supervisor.core.degradation import LEVELS, MEANING, label, lines, needs_approval, worst

if TYPE_CHECKING:
    from supervisor.core.config import StepDef
    from supervisor.state.store import EventSpec
    from supervisor.workflow.state import WorkflowState


def next_level(step: StepDef, current: str | None) -> str | None:
    """The level after `current` (None: the primary attempt) that the step allows, or None."""
    allowed = list(step.degrade)
    if current is None:
        return allowed[0] if allowed else None
    at = allowed.index(current) if current in allowed else len(allowed)
    return allowed[at + 1] if at + 1 < len(allowed) else None


def step_down(
    state: WorkflowState, target: str, step: StepDef, failing: str, limit: int, problem: str
) -> EventSpec | None:
    """After `target`'s retries are spent: move it to its next level (one more run there) and
    return the event that records it, or None when no level is left (the task fails)."""
    from supervisor.state.store import EventSpec

    current = state.degraded.get(target)
    level = next_level(step, current)
    if level is None:
        return None
    state.degraded[target] = level
    # One run at the new level: its next failure spends the step's retries again.
    state.attempts[target] = limit
    # A new strategy, not the same failure again: the breaker counts from here.
    state.breaker.pop(failing, None)
    state.breaker.pop(target, None)
    return EventSpec(
        "degraded",
        step=target,
        status=level,
        payload={"level": level, "from": current or "primary", "why": problem[:800]},
    )


def hold_for_a_person(judged: dict[str, Any]) -> bool:
    """A minimal result about to be committed waits for a person: True, and an approval the
    policy would let through (`auto_approve`) or time out (`notify_and_timeout`) becomes one
    that waits for a decision, recorded as such."""
    if not needs_approval(judged):
        return False
    risk = judged.get("risk") or {}
    if risk.get("action") in ("auto_approve", "notify_and_timeout"):
        judged["risk"] = {**risk, "action": "require_approval"}
        judged["risk"]["reasons"] = [*risk.get("reasons", []), "a minimal (degraded) result"]
    return True


__all__ = [
    "LEVELS",
    "MEANING",
    "hold_for_a_person",
    "label",
    "lines",
    "needs_approval",
    "next_level",
    "step_down",
    "worst",
]
