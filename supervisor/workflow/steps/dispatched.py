"""The component fan-out under the Temporal runner: its ready components run as activities of
their own, one per component on any worker host, instead of threads of this step.

The fan-out step decides as always (which components are ready, what a result leads to: merge,
retry with feedback, wait, fail); only the running of a component's worker and gates moves out.
`hand_over` records the batch as running and stops the step (ComponentsDispatched); the workflow
runs one activity per component (supervisor/temporal/components.py) and runs the step again
with what they came back with, which `take` applies before the step decides anything else: a
gated component is merged by the same code as a local one, a failed one counted the same way.
Only this step writes the workflow's context, so the activities never race on it.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Protocol

from supervisor.core.errors import (
    DockerUnavailableError,
    MachineFault,
    SpecConflictError,
    StepFailedError,
    SupervisorError,
)
from supervisor.gates import base_oracle
from supervisor.policy.recovery import Action, Category, Classification
from supervisor.state.store import EventSpec
from supervisor.workflow import ownership
from supervisor.workflow.steps.base import Outcome

if TYPE_CHECKING:
    from supervisor.core.dag import Component, WorkGraph

# What a component's activity may set on its component's entry (the rest is this step's): its
# progress, whether it was a split component's QA pass, and what its gates found (per project
# of a monorepo, and on the base's tests), which `status` shows and later gates reuse.
ENTRY_FIELDS = ("status", "sha", "base", "qa", "projects_gated", base_oracle.CONTEXT_KEY)
FINISHED = ("implemented", "gated")


class FanOut(Protocol):
    """What this module reads and writes of the fan-out step (steps/components.py): declared
    here, so that the fan-out imports this module and this module never imports it back."""

    @property
    def name(self) -> str: ...
    @property
    def scope(self) -> str: ...
    @property
    def state(self) -> dict[str, dict[str, Any]]: ...
    @property
    def claims(self) -> dict[str, str]: ...
    @property
    def lock(self) -> threading.Lock: ...
    @property
    def work(self) -> WorkGraph | None: ...

    def _save(self, cid: str, **fields: Any) -> None: ...
    def base_for(self, cid: str, integrated: str) -> str: ...


class ComponentsDispatched(Exception):
    """The fan-out handed `ids` to the runner; the step runs again with their results."""

    def __init__(self, ids: list[str]) -> None:
        super().__init__(", ".join(ids))
        self.ids = ids


def hand_over(fan: FanOut, batch: list[Component], integrated: str) -> None:
    """Record the batch as running (from the integration commit `integrated`, which the
    context holds, or a sub-component's split parent's branch, begun here and kept in the
    parent's entry: `base_for`) and stop the step; nothing to hand over: return."""
    if not batch:
        return
    for comp in batch:
        comp.status = "running"
        fan._save(comp.id, status="running", started_from=fan.base_for(comp.id, integrated))
    raise ComponentsDispatched([c.id for c in batch])


def take(fan: FanOut, results: list[dict[str, Any]]) -> list[tuple[str, Outcome]]:
    """Apply the components' results to the context (one transaction each); returns the
    failures, for the step to settle as it settles a local one. A result for a component that
    is not running any more (a repeated or stale one) is ignored."""
    failed: list[tuple[str, Outcome]] = []
    for result in results:
        cid = str(result.get("component"))
        entry = fan.state.get(cid)
        if entry is None or entry.get("status") != "running" or result.get("stale"):
            continue
        fields = {k: v for k, v in (result.get("entry") or {}).items() if k in ENTRY_FIELDS}
        if fields.get("status") not in FINISHED:
            fields.pop("status", None)
        strays = _claim(fan, cid, [str(p) for p in result.get("claims") or []])
        if strays and fields.get("status") == "gated":
            fields["status"] = "implemented"  # not merged: it strayed, as a local one would
        fan._save(cid, trees=result.get("trees"), **fields)
        if strays:
            failed.append((cid, _strayed(fan, cid, strays, fields.get("sha"))))
        elif result.get("outcome") is not None:
            failed.append((cid, outcome_from(result["outcome"])))
    return failed


def _claim(fan: FanOut, cid: str, paths: list[str]) -> dict[str, list[str]]:
    """Take the undeclared files a component changed, as the local check does; components that
    ran at once on other hosts could not see each other's claims, so a file another one claimed
    first is out of this one's scope (file -> owner)."""
    with fan.lock:
        strays = {p: [fan.claims[p]] for p in paths if fan.claims.get(p, cid) != cid}
        if not strays:
            for path in paths:
                fan.claims[path] = cid
    return strays


def _strayed(fan: FanOut, cid: str, strays: dict[str, list[str]], sha: str | None) -> Outcome:
    with fan.lock:
        own = [p for p, owner in fan.claims.items() if owner == cid]
    if fan.work is not None and cid in fan.work.components:
        own = [*fan.work.components[cid].files, *own]
    fan._save(
        cid,
        event=EventSpec(
            "component_out_of_scope",
            step=f"{fan.name}/{cid}",
            status=fan.scope,
            payload={"component": cid, "commit": sha, "files": strays},
        ),
    )
    feedback = ownership.scope_feedback(cid, strays, own)
    return Outcome("failed", feedback=feedback, context={"out_of_scope": strays})


def outcome_to(outcome: Outcome) -> dict[str, Any] | None:
    """A component's outcome as plain data (None: it passed its gates)."""
    if outcome.result == "passed":
        return None
    why = outcome.transient
    return {
        "result": outcome.result,
        "feedback": outcome.feedback,
        "cli": outcome.cli,
        "out_of_scope": outcome.context.get("out_of_scope"),
        "too_large": outcome.context.get("too_large"),  # the worker's word: a split's trigger
        "transient": None
        if why is None
        else [str(why.category), str(why.action), why.reason, why.wait_seconds],
        "escalate": None
        if outcome.escalate is None
        else [outcome.escalate.message, outcome.escalate.hint],
        # a worker's word that the task contradicts the base's tests: a person's, there too
        "spec_conflict": outcome.escalate.record()
        if isinstance(outcome.escalate, SpecConflictError)
        else None,
        # the machine's fault (the Docker engine away past the wait, a full disk), not the
        # component's: the step stops for a person without counting it (steps/components.py)
        "machine_fault": [type(outcome.escalate).__name__, outcome.escalate.fix]
        if isinstance(outcome.escalate, MachineFault)
        else None,
    }


def outcome_from(data: dict[str, Any]) -> Outcome:
    transient = data.get("transient")
    escalate = data.get("escalate")
    context = {k: data[k] for k in ("out_of_scope", "too_large") if data.get(k)}
    conflict = data.get("spec_conflict")
    machine = data.get("machine_fault")
    error: SupervisorError | None = None
    if escalate and machine:
        kind = DockerUnavailableError if machine[0] == "DockerUnavailableError" else MachineFault
        error = kind(str(escalate[0]), fix=str(machine[1]))
    elif escalate and conflict:
        error = SpecConflictError(
            str(escalate[0]),
            str(escalate[1]),
            step=str(conflict["step"]),
            reason=str(conflict["reason"]),
            tests=[str(t) for t in conflict["tests"]],
        )
    elif escalate:
        error = StepFailedError(str(escalate[0]), str(escalate[1]))
    return Outcome(
        str(data.get("result") or "failed"),
        feedback=data.get("feedback"),
        cli=data.get("cli"),
        context=context,
        transient=None
        if not transient
        else Classification(
            Category(transient[0]), Action(transient[1]), str(transient[2]), transient[3]
        ),
        escalate=error,
    )
