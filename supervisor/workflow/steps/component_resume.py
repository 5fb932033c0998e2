"""What the fan-out (steps/components.py) makes of each component's entry when its step runs
again, after a crash, a wait or a person's decision: a waiting component takes its turn, a failed
or conflicting one keeps its branch (the user was told so) and starts afresh on a new one, an
interrupted one is pending again, and a merged one's branch goes if a crash left it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from supervisor.core.dag import PROGRESS
from supervisor.workflow import ownership
from supervisor.workflow.steps.base import component_branch

if TYPE_CHECKING:
    from supervisor.core.dag import WorkGraph
    from supervisor.state.store import Workflow
    from supervisor.workflow.steps.base import StepContext


class ComponentFanOut(Protocol):
    """What of the fan-out (steps/components.py) this module uses: it imports this module."""

    c: StepContext
    wf: Workflow
    name: str
    state: dict[str, dict[str, Any]]
    kept: list[str]

    def _branch(self, cid: str) -> str: ...
    def _drop_branch(self, cid: str) -> None: ...


def resume_entries(fan: ComponentFanOut, work: WorkGraph) -> None:
    """Each component's entry and status as this run of the step starts them."""
    for cid, comp in work.components.items():
        entry = fan.state.setdefault(cid, {"status": "pending", "attempts": 0})
        if entry["status"] == "waiting":  # a rate limit or network error: its turn again
            entry["status"] = "pending"
            entry.pop("until", None)
        if entry["status"] in ("failed", "conflict"):
            ownership.keep_and_resume(
                fan.c, fan.wf, fan.name, fan.kept, cid, entry, fan._branch(cid)
            )
        if entry["status"] != "merged" and fan._branch(cid) in fan.kept:
            entry["branch"] = ownership.fresh_branch(
                fan.c.ws, component_branch(fan.wf.task_branch, cid), fan.kept
            )
        if entry["status"] in ("running", "failed", "conflict"):
            entry["status"] = "pending"  # interrupted, or failed before this resume
            if entry.pop("error", None) is not None:
                entry["attempts"] = 0
        comp.status = PROGRESS[entry["status"]]
        if entry["status"] == "merged":  # a crash may have come between merge and clean-up
            fan._drop_branch(cid)
