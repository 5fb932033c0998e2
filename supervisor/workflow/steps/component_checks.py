"""A component's checks between its worker and its merge, the fan-out's (steps/components.py)
judgement of one finished component: it kept to its files (under `component_scope`), and the
step's gates pass on its commit. Each gate's pass is recorded with its step run in one
transaction, so a supervisor killed half-way through runs only the gates not yet passed."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any, Protocol

from supervisor.gates import base_oracle
from supervisor.state.store import EventSpec
from supervisor.workflow import ownership
from supervisor.workflow.steps import project_gate
from supervisor.workflow.steps.base import Outcome
from supervisor.workflow.steps.gate import gate_on

if TYPE_CHECKING:
    import threading

    from supervisor.core.config import StepDef
    from supervisor.core.dag import WorkGraph
    from supervisor.core.projects import ProjectMap
    from supervisor.state.store import StepRecord, Workflow
    from supervisor.workflow.steps.base import StepContext


class ComponentFanOut(Protocol):
    """What of the fan-out (steps/components.py) this module uses: it imports this module."""

    c: StepContext
    name: str
    step: StepDef
    state: dict[str, dict[str, Any]]
    lock: threading.Lock
    claims: dict[str, str]
    projects: ProjectMap

    @property
    def scope(self) -> str: ...
    @property
    def work(self) -> WorkGraph | None: ...

    def _save(self, cid: str, **fields: Any) -> None: ...
    def _hold(self, cid: str, records: list[StepRecord], **fields: Any) -> None: ...
    def _view(self) -> Workflow: ...


def gate_and_hand_over(fan: ComponentFanOut, cid: str) -> Outcome:
    """An implemented component's checks, then its hand-over to the merge: a pass with its
    commit, or the first failure (its records held for the fan-out's decision on it)."""
    entry = fan.state[cid]
    sha = entry["sha"]
    if entry["status"] == "implemented":
        strayed = None if entry.get("qa") else out_of_scope(fan, cid)  # parts were checked
        if strayed is not None:
            return strayed
        for gate in fan.step.gates:
            # A gate's pass is recorded with its step run, in one transaction: a supervisor
            # killed before the component is marked gated does not run it again.
            done = f"{gate}@{sha}"
            if done in entry.get("passed_gates", []):
                continue
            step, base = f"{fan.name}/{cid}/{gate}", entry.get("base")
            result = gate_on(fan.c, fan._view(), step, gate, sha, base)
            fields = project_gate.kept(entry, result)
            if base_oracle.CONTEXT_KEY in result.context:  # the latest verdict on its tests
                fields[base_oracle.CONTEXT_KEY] = result.context[base_oracle.CONTEXT_KEY]
            if result.result != "passed":
                fan._hold(cid, result.records, **fields)
                return replace(result, records=[])
            fields["passed_gates"] = [*entry.get("passed_gates", []), done]
            fan._save(cid, records=result.records, **fields)
        fan._save(cid, status="gated")
    return Outcome("passed", git_sha=sha)


def out_of_scope(fan: ComponentFanOut, cid: str) -> Outcome | None:
    """None when the component kept to its files (it then claims the undeclared ones it
    changed); else a failure whose feedback names each file and its owner."""
    if fan.scope == "allow" or fan.work is None:
        return None
    entry = fan.state[cid]
    changed = fan.c.ws.changed_files(entry.get("base") or f"{entry['sha']}^", entry["sha"])
    with fan.lock:
        strays, new = ownership.check(cid, changed, fan.work, fan.claims, fan.projects)
        if not strays:
            for path in new:
                fan.claims[path] = cid
            return None
        own = [*fan.work.components[cid].files]
        own += [p for p, owner in fan.claims.items() if owner == cid]
    fan._save(
        cid,
        event=EventSpec(
            "component_out_of_scope",
            step=f"{fan.name}/{cid}",
            status=fan.scope,
            payload={"component": cid, "commit": entry["sha"], "files": strays},
        ),
    )
    feedback = ownership.scope_feedback(cid, strays, own)
    return Outcome("failed", feedback=feedback, context={"out_of_scope": strays})
