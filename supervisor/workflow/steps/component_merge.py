"""A finished component's merge into the integration commit (or its parent's branch, for a
sub-component), the fan-out's (steps/components.py) one move that writes to git: the merged
component's branch goes, a conflicting one is kept with both sides for its next attempt."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from supervisor.core import faults
from supervisor.core.errors import MergeConflictError
from supervisor.state.store import EventSpec
from supervisor.workflow import ownership
from supervisor.workflow.steps.base import candidate_ref

if TYPE_CHECKING:
    import threading

    from supervisor.core.dag import Component
    from supervisor.core.errors import SupervisorError
    from supervisor.state.store import Workflow
    from supervisor.workflow import decompose
    from supervisor.workflow.steps.base import StepContext


class ComponentFanOut(Protocol):
    """What of the fan-out (steps/components.py) this module uses: it imports this module."""

    c: StepContext
    wf: Workflow
    name: str
    state: dict[str, dict[str, Any]]
    lock: threading.Lock
    tree: decompose.Tree

    def _save(self, cid: str, **fields: Any) -> None: ...
    def _fail(self, comp: Component, error: SupervisorError, **fields: Any) -> None: ...
    def _branch(self, cid: str) -> str: ...
    def _drop_branch(self, cid: str) -> None: ...
    def base_for(self, cid: str, integrated: str) -> str: ...


def merge(fan: ComponentFanOut, comp: Component, commit: str, integrated: str) -> str:
    """Merge `comp`'s `commit`; returns the integration commit (unchanged on a conflict, or for
    a sub-component, whose parent's branch moves instead)."""
    ws = fan.c.ws
    branch = fan._branch(comp.id)
    parent = fan.tree.parent_of(comp.id)
    into = fan.base_for(comp.id, integrated)  # a sub-component merges into its parent
    faults.reached("merging")  # the merge not begun (tests/test_machine_fault_moments.py)
    try:
        merged = ws.merge_commits(into, commit, f"Merge component {comp.id}")
    except MergeConflictError as e:
        fan._fail(
            comp,
            e,
            status="conflict",
            conflict={
                "commit": commit,
                "branch": branch,
                "files": e.files,
                "into": into,
            },
            # what a resumed attempt is told: both sides of the conflicting files
            feedback=ownership.conflict_feedback(ws, comp.id, branch, commit, into, e.files),
            event=EventSpec(
                "component_conflict",
                step=fan.name,
                status="conflict",
                payload={
                    "component": comp.id,
                    "branch": branch,
                    "commit": commit,
                    "files": e.files,
                },
            ),
        )
        return integrated
    if parent is None:
        ws.set_ref(candidate_ref(fan.wf.id), merged, None)
    comp.status = "complete"
    payload: dict[str, Any] = {
        "component": comp.id,
        "commit": commit,
        "into": merged,
        "branch": branch,
    }
    with fan.lock:
        resolved = fan.state[comp.id].pop("conflict", None)
    if resolved is not None:
        payload["resolves_conflict"] = resolved
    if parent is not None:
        payload["parent"] = parent
        with fan.lock:
            fan.state[parent]["integrated"] = merged
    fan._save(
        comp.id,
        status="merged",
        integrated=merged if parent is None else None,
        event=EventSpec("component_merged", step=fan.name, status="merged", payload=payload),
    )
    fan._drop_branch(comp.id)
    fan.c.reporter.info(f"component {comp.id} merged ({merged[:12]})")
    return merged if parent is None else integrated
