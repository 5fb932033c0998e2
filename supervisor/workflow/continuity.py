"""The engine's side of bounded continuations: whether a sent-back step continues its session.

A worker of a role that may continue (supervisor/workflow/continuation.py) reports the session its
run left (`Outcome.session`). When that step is sent back to itself with feedback, the engine
grants one more turn of the same session while fewer than `max_continuation_turns` were granted,
and records it (`continuation`); at the limit it ends the chain (`continuation_limit`) and the
remaining retries run fresh, as every worker does by default. A step that passes forgets its
session. The count lives in the typed state (`WorkflowState.sessions`, step -> cli, session id,
turns), so it survives a crash and a resume cannot reset the hard limit by accident.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from supervisor.state.store import EventSpec

if TYPE_CHECKING:
    from supervisor.workflow.state import WorkflowState


def after_send_back(
    state: WorkflowState, step: str, session: dict[str, Any] | None, limit: int
) -> EventSpec | None:
    """`step` runs again with feedback: continue `session` or start fresh; the event says which."""
    if not session or not session.get("session_id"):
        return None
    entry = dict(state.sessions.get(step) or {})
    turns = int(entry.get("turns") or 0)
    if entry.get("cli") not in (None, session["cli"]):
        turns = 0  # another CLI's session (a failover): its own chain
    if turns >= limit:
        state.sessions[step] = {"cli": session["cli"], "session_id": None, "turns": turns}
        if entry.get("session_id"):  # said once, when the chain ends
            return EventSpec(
                "continuation_limit",
                step=step,
                status="fresh",
                payload={"turns": turns, "max_continuation_turns": limit},
            )
        return None
    state.sessions[step] = {"cli": session["cli"], "session_id": session["session_id"]}
    state.sessions[step]["turns"] = turns + 1
    return EventSpec(
        "continuation",
        step=step,
        status="resume",
        payload={
            "cli": session["cli"],
            "session_id": session["session_id"],
            "turn": turns + 1,
            "max_continuation_turns": limit,
        },
    )


def forget(state: WorkflowState, step: str) -> None:
    """A step that passed starts its next run (a re-plan, say) with a fresh session."""
    state.sessions.pop(step, None)


def end_all(state: WorkflowState) -> None:
    """The task failed and its kept homes are gone: no session can be resumed any more (the
    turns already spent still count against the limit)."""
    for step, entry in state.sessions.items():
        state.sessions[step] = {**entry, "session_id": None}
