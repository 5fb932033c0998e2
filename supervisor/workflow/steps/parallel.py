"""A parallel step: several reviewers judge the same candidate at once.

The step passes only when every reviewer approves; their issues are merged into one feedback.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from supervisor.workflow.steps.base import Outcome, StepContext
from supervisor.workflow.steps.worker import run_worker

if TYPE_CHECKING:
    from supervisor.state.store import Workflow


def parallel(c: StepContext, wf: Workflow, name: str, roles: list[str]) -> Outcome:
    """Several reviewers at once; the step passes only when every one approves."""
    with ThreadPoolExecutor(max_workers=len(roles), thread_name_prefix="reviewer") as pool:
        outcomes = list(pool.map(lambda r: run_worker(c, wf, name, r), roles))
    events = [e for o in outcomes for e in o.events]
    records = [r for o in outcomes for r in o.records]
    for outcome in outcomes:
        if outcome.escalate is not None:
            return Outcome("failed", events=events, escalate=outcome.escalate, records=records)
    transient = next((o.transient for o in outcomes if o.transient is not None), None)
    if transient is not None:
        return Outcome("failed", events=events, transient=transient, records=records)
    if all(o.result == "passed" for o in outcomes):
        reviewed: dict[str, list[str]] = {}
        for o in outcomes:
            for tree, names in o.context.get("reviewed", {}).items():
                reviewed.setdefault(tree, [])
                reviewed[tree] += [n for n in names if n not in reviewed[tree]]
        return Outcome("passed", events=events, context={"reviewed": reviewed}, records=records)
    merged = "\n\n".join(
        f"Reviewer {role}: {o.feedback or o.result}"
        for role, o in zip(roles, outcomes, strict=True)
        if o.result != "passed"
    )
    return Outcome("rejected", events=events, feedback=merged, records=records)
