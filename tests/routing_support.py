"""Recorded runs for the adaptive-assignment specs: rows written through the real state store,
as the engine writes them after each worker run."""

from __future__ import annotations

from typing import TYPE_CHECKING

from supervisor.state.records import EventSpec

if TYPE_CHECKING:
    from supervisor.state.store import Store


def record_run(
    store: Store,
    *,
    role: str,
    cli: str,
    task_type: str,
    step: str,
    success: bool = True,
    sent_back: bool = False,
    seconds: float = 30.0,
    cost: float = 0.05,
    retries: int = 0,
    workflow_id: int | None = None,
) -> int:
    """One finished worker run in its own workflow; `sent_back`: a later gate or reviewer sent
    the step's work back (a `retry` event aimed at it), although the CLI itself exited cleanly."""
    if workflow_id is None:
        workflow_id = store.create_workflow(
            description="recorded run",
            cli="claude",
            base_branch="main",
            base_sha="0" * 40,
            branch_for_id=lambda i: f"ai/{i}-recorded",
            definition={},
            first_step=step,
        ).id
    store.record_invocation(
        {
            "workflow_id": workflow_id,
            "step": step,
            "role": role,
            "cli": cli,
            "model": f"{cli}-model",
            "task_type": task_type,
            "success": success,
            "retries": retries,
            "duration_s": seconds,
            "input_tokens": 1000,
            "output_tokens": 200,
            "cost_usd": cost,
            "error_category": None if success else "parse",
        }
    )
    if sent_back:
        store.add_event(
            workflow_id,
            EventSpec("retry", step=step, status="failed", payload={"from_step": "test"}),
        )
    return workflow_id


def gemini_beats_claude_at_review(store: Store) -> None:
    """12 recorded reviews: claude answered 2 of 6 usably, gemini all 6, at a lower cost."""
    for i in range(6):
        record_run(
            store, role="reviewer", cli="claude", task_type="review", step="review",
            success=i < 2, cost=0.10,
        )  # fmt: skip
        record_run(
            store, role="reviewer", cli="gemini", task_type="review", step="review", cost=0.04
        )
