"""A gate run in each project of a monorepo a candidate reaches, side by side, judged as one.

Why one outcome: the workflow asks "did the `test` gate pass on this tree?", and it did only if
every project the change reaches passed it; a failure feeds back each failing project's output,
named, so the worker knows which consumer it broke. Each project's run is a step of its own
(`<step>@<project>`), with its own worktree, image and remembered result (gate_reuse keys it by
the project's directory too), so runs of independent projects overlap and a resumed task reuses
what already passed. Which projects run is supervisor/gates/per_project.py.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Protocol

from supervisor.core.errors import SandboxError
from supervisor.core.plural import counted
from supervisor.gates import base_tests
from supervisor.gates import reuse as gate_reuse
from supervisor.state.store import EventSpec
from supervisor.workflow.steps.base import Outcome
from supervisor.workflow.steps.images import image_for
from supervisor.workspace.treedata import CommitFiles

if TYPE_CHECKING:
    from supervisor.gates.per_project import ProjectGate
    from supervisor.state.store import Workflow
    from supervisor.workflow.steps.base import StepContext

PARALLEL = 4
"""Projects gated at once: each gate container has its own CPU limit (limits.gate_cpus)."""


class RunOne(Protocol):
    """steps/gate.py's run of one command (passed in: that module calls this one)."""

    def __call__(
        self,
        c: StepContext,
        wf: Workflow,
        name: str,
        gate: str,
        command: str,
        commit: str,
        image: str | None = None,
        directory: str = "",
    ) -> Outcome: ...


def run_projects(
    c: StepContext,
    wf: Workflow,
    name: str,
    gate: str,
    commit: str,
    chosen: list[ProjectGate],
    run_one: RunOne,
) -> Outcome:
    running = [p for p in chosen if p.defined]
    if any(p.image is None for p in running):  # the repository's image, built once if need be
        try:
            image = image_for(c, wf, name, CommitFiles(c.ws.git_dir, commit))
        except SandboxError:
            image = None  # each project's run says why, as a gate does
        running = [p if p.image else replace(p, image=image) for p in running]
    c.reporter.step(
        wf.id,
        name,
        f"gate '{gate}' in {counted(len(running), 'project')}: "
        + ", ".join(f"{p.project} ({p.reason})" for p in running),
    )

    def one(p: ProjectGate) -> Outcome:
        return run_one(
            c, wf, f"{name}@{p.project}", gate, p.script, commit, p.image, directory=p.directory
        )

    with ThreadPoolExecutor(max_workers=max(1, min(PARALLEL, len(running)))) as pool:
        outcomes = list(pool.map(one, running))
    passed = all(o.result == "passed" for o in outcomes)
    rows: list[dict[str, Any]] = [
        {
            "project": p.project,
            "reason": p.reason,
            "directory": p.directory,
            "gates": [gate] if p.defined else [],
            "command": p.command,
            "image": p.image,
            "passed": o.result == "passed",
        }
        for p, o in zip(running, outcomes, strict=True)
    ]
    rows += [
        {
            "project": p.project,
            "reason": p.reason,
            "directory": p.directory,
            "gates": [],
            "command": "",
            "image": p.image,
            "passed": None,
            "note": f"the project's gates do not include '{gate}'",
        }
        for p in chosen
        if not p.defined
    ]
    payload = {"gate": gate, "commit": commit, "projects": rows, "at": round(time.time(), 3)}
    status = "passed" if passed else "failed"
    c.store.add_event(wf.id, EventSpec("projects_gated", step=name, status=status, payload=payload))
    outcome = _combined(wf, name, gate, commit, running, outcomes, passed)
    outcome.context["projects_gated"] = {name: payload}  # what `status` and the TUI show
    return outcome


SPEC = "spec_change"
"""The base oracle's verdict in a gate's context (gates/base_oracle.py)."""


def _combined(
    wf: Workflow,
    name: str,
    gate: str,
    commit: str,
    running: list[ProjectGate],
    outcomes: list[Outcome],
    passed: bool,
) -> Outcome:
    records = [r for o in outcomes for r in o.records]
    runs = _runs(wf.context, outcomes, len(running))
    if passed:
        context: dict[str, Any] = {}
        for o in outcomes:  # gates_passed (the same tree), accepted tests
            context.update(o.context)
        context["gate_runs"] = runs
        verdicts = [o.context.get(SPEC) for o in outcomes]  # one project's failure is the tree's
        if any(verdicts):
            context[SPEC] = base_tests.joined(verdicts, str(next(v for v in verdicts if v)["tree"]))
        return Outcome("passed", git_sha=commit, context=context, records=records)
    failed = [(p, o) for p, o in zip(running, outcomes, strict=True) if o.result != "passed"]
    escalate = next((o.escalate for _, o in failed if o.escalate is not None), None)
    if escalate is not None:
        return Outcome("failed", escalate=escalate, records=records)
    feedback = "\n\n".join(
        f"Project '{p.project}' ({p.directory}/, gated because: {p.reason}): {o.feedback}"
        for p, o in failed
    )
    tree = next(
        (o.context["gate_failure"]["tree"] for _, o in failed if "gate_failure" in o.context), ""
    )
    failure = {"step": name, "gate": gate, "tree": tree, "output": feedback[-4000:]}
    return Outcome(
        "failed",
        feedback=feedback,
        context={"gate_runs": runs, "gate_failure": failure},
        records=records,
    )


def _runs(context: dict[str, Any], outcomes: list[Outcome], projects: int) -> list[Any]:
    """The task's remembered runs with every project's new one (each outcome added its own to
    the same earlier list)."""
    found = list(context.get("gate_runs") or [])
    keys = {r.get("key") for r in found}
    for o in outcomes:
        for run in o.context.get("gate_runs") or []:
            if run.get("key") not in keys:
                found.append(run)
                keys.add(run.get("key"))
    return found[-gate_reuse.KEPT * max(1, projects) :]


def kept(entry: dict[str, Any], result: Outcome) -> dict[str, Any]:
    """What a component's entry keeps of its gate's per-project runs, for `status` and the
    TUI (nothing outside a monorepo)."""
    more = result.context.get("projects_gated")
    return {"projects_gated": {**entry.get("projects_gated", {}), **more}} if more else {}
