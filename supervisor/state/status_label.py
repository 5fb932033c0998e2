"""The one label a person sees for a workflow's status, in `status` (list and detail), `status
--watch` and the TUI alike.

The stored status says where the engine left the task; a person also needs what happened since
and what to do: an approval given but not yet acted on (`approved (run supervisor resume 2)`,
not `awaiting_approval`, which invites a second approval), a running task that no supervisor runs
any more (killed: `running (no supervisor)`), a degraded result. Light: no rich, no engine.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from supervisor.state.records import Workflow

DECISION_KEY = "decision"
"""Set by the approval store when a person decides (supervisor/state/approval_store.py), cleared
when the engine acts on it or asks again."""


def decision(wf: Workflow) -> str | None:
    """`approved` or `rejected`: a person decided the waiting approval and no resume acted on it
    yet; None otherwise."""
    found: dict[str, Any] = wf.context.get(DECISION_KEY) or {}
    if wf.status != "awaiting_approval" or found.get("status") not in ("approved", "rejected"):
        return None
    return str(found["status"])


def shown_status(wf: Workflow, *, supervised: bool = True, degraded: bool = True) -> str:
    """The status as a person reads it. `supervised`: False when the task is `running` but no
    supervisor process holds it (task_state.supervisors found none). `degraded`: add what was
    degraded (a view with its own line for that leaves it out)."""
    from supervisor.core.degradation import label

    decided = decision(wf)
    if decided == "approved":
        shown = f"approved (run supervisor resume {wf.id})"
    elif decided == "rejected":
        shown = f"rejected (run supervisor resume {wf.id} to redo the step)"
    elif wf.status == "running" and not supervised:
        shown = "running (no supervisor)"
    else:
        shown = wf.status
    return f"{shown} ({label(wf.context)})" if degraded and wf.context.get("degraded") else shown
