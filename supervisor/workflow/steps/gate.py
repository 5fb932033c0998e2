"""The gate step: a configured check run on a candidate commit in a no-network sandbox.

The command comes from the configuration pinned at task start, never from the candidate; the
candidate is checked out into a throwaway worktree and the gate's result is recorded with the
tree it judged (so the commit step can prove every gate passed on the exact tree it commits).
A test gate that exits 0 also has to run at least as many tests as on the task's base commit
(gates/baseline.py): a suite emptied, skipped or no longer collected fails it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from supervisor.core import faults
from supervisor.core.errors import CommandTimeoutError, SandboxError
from supervisor.gates import base_oracle, test_counts, test_pins
from supervisor.gates import baseline as gate_baseline
from supervisor.gates import per_project as project_gates
from supervisor.gates import problems as gate_problems
from supervisor.gates import reuse as gate_reuse
from supervisor.gates.run import GateResult, run_gate
from supervisor.guard import protected
from supervisor.state.store import EventSpec, StepRecord, now
from supervisor.workflow import history
from supervisor.workflow.steps import project_gate
from supervisor.workflow.steps.base import Outcome, StepContext, err
from supervisor.workflow.steps.images import image_for
from supervisor.workspace.treedata import CommitFiles

if TYPE_CHECKING:
    from supervisor.core.config import StepDef
    from supervisor.state.store import Workflow


def gate_step(c: StepContext, wf: Workflow, name: str, step: StepDef) -> Outcome:
    """A workflow's gate step: its gate on the candidate (or the task branch, before one)."""
    commit = wf.context.get("candidate") or c.ws.branch_tip(wf.task_branch)
    outcome = gate_on(c, wf, name, step.gate or "", commit, everything=True)
    failure = outcome.context.get("gate_failure")
    if failure is not None:  # the step the work goes back to, for results.unchanged
        failure["to"] = step.on_fail or name
    gated = outcome.context.get("projects_gated")
    if gated is not None:  # kept beside the earlier steps' (a monorepo's projects)
        outcome.context["projects_gated"] = {**(wf.context.get("projects_gated") or {}), **gated}
    return outcome


def gate_on(
    c: StepContext,
    wf: Workflow,
    name: str,
    gate: str,
    commit: str,
    base: str | None = None,
    everything: bool = False,
) -> Outcome:
    """Run the named gate on `commit` in a no-network sandbox, as step `name`: in a monorepo,
    in each project the change since `base` (the task's base when None) reaches, or in every
    project (`everything`: the task's own gate step)."""
    pins = protected.pinned(wf.context, c.settings)
    command = pins.gates[gate]
    projects = protected.project_map(wf.context, c.settings)
    if projects:
        changed = c.ws.changed_files(base or wf.base_sha, commit)
        chosen = project_gates.choose(
            projects, gate, command, changed, everything, pins.project_gates
        )
        if chosen is not None and any(p.defined for p in chosen):  # else: the repository's
            return project_gate.run_projects(c, wf, name, gate, commit, chosen, run_one)
    return run_one(c, wf, name, gate, command, commit)


def run_one(
    c: StepContext,
    wf: Workflow,
    name: str,
    gate: str,
    command: str,
    commit: str,
    image: str | None = None,
    directory: str = "",
) -> Outcome:
    """One run of `command` (a project's, from its `directory`, in its `image` when given;
    else the repository's image) on `commit`, or its earlier result on the same key."""
    attempt = c.store.count_steps(wf.id, name) + 1
    began = now()  # the step's time includes making its worktree
    try:
        image = image or image_for(c, wf, name, CommitFiles(c.ws.git_dir, commit))
    except SandboxError as e:
        step_id = c.store.start_step(wf.id, name, attempt, None, None, began)
        event = EventSpec("gate", step=name, status="failed", payload=err(e))
        record = StepRecord(step_id, "failed", error=e.message, event=event)
        return Outcome("failed", escalate=e, records=[record])
    tree = c.ws.tree_hash(commit)
    image_id = gate_reuse.image_id(c.sandbox, image)
    key = gate_reuse.key_of(tree, command, image_id, wf.context.get("test_pins") or {}, directory)
    earlier = gate_reuse.find(wf.context, key)
    if earlier is not None:
        step_id = c.store.start_step(wf.id, name, attempt, None, None, began)
        c.reporter.step(wf.id, name, f"gate `{command}`: same tree, command and image as before")
        reused = EventSpec(
            "gate_reused",
            step=name,
            status="passed" if earlier.exit_code == 0 else "failed",
            payload={"command": command, "tree": tree, "image": image_id, "ran_on": earlier.commit},
        )
        c.store.add_event(wf.id, reused)
        result = earlier.result(name)
        return _judged(
            c, wf, name, gate, command, image, commit, tree, step_id, result, {}, directory
        )
    faults.reached("gate_worktree")  # before the gate's worktree (test_machine_fault_moments)
    worktree = c.ws.add_worktree(f"wf{wf.id}-{name}-{attempt}", commit)
    step_id = c.store.start_step(wf.id, name, attempt, None, str(worktree), began)
    c.reporter.step(wf.id, name, f"gate `{command}` (no network)")
    try:
        result = run_gate(
            c.sandbox,
            name,
            command,
            worktree,
            c.settings.limits,
            c.labels(wf.id, name),
            on_output=c.reporter.output,
            image=image,
        )
        full = gate_problems.disk_full(result, worktree, wf.id)  # read while its files stand
    except CommandTimeoutError as e:  # no result: nothing to remember
        event = EventSpec("gate", step=name, status="failed", payload=err(e))
        record = StepRecord(step_id, "failed", error=e.message, event=event)
        return Outcome(
            "failed", feedback=f"The '{name}' gate timed out: {e.message}", records=[record]
        )
    finally:
        c.ws.remove_worktree(worktree)
    if full is not None:  # failed, not remembered: it runs again once space is freed
        payload = {**err(full), "exit_code": result.exit_code, "output_tail": result.output[-4000:]}
        event = EventSpec("gate", step=name, status="failed", payload=payload)
        record = StepRecord(step_id, "failed", error=full.message, event=event)
        return Outcome("failed", escalate=full, records=[record])
    run = gate_reuse.GateRun.of(key, gate, tree, commit, image_id, result)
    remembered = {"gate_runs": gate_reuse.remembered(wf.context, run)}
    return _judged(
        c, wf, name, gate, command, image, commit, tree, step_id, result, remembered, directory
    )


def _judged(
    c: StepContext,
    wf: Workflow,
    name: str,
    gate: str,
    command: str,
    image: str | None,
    commit: str,
    tree: str,
    step_id: int,
    result: GateResult,
    remembered: dict[str, Any],
    directory: str = "",
) -> Outcome:
    """The gate step's outcome from its run's result (fresh or reused): the test count checked
    against the task's floor, the base's tests run on a candidate that changed them, the pass
    recorded for the tree, or the failure fed back."""
    floor, verdict = None, None
    if result.passed and test_counts.counted(gate, command):
        floor = gate_baseline.baseline(c, wf, name, gate, command, image, result, commit)
        verdict = gate_baseline.judge(floor, result)
        if verdict.note:
            c.reporter.info(verdict.note)
    passed = result.passed and not (verdict and verdict.problem)
    judged: dict[str, Any] = {}
    if passed and floor is not None:  # a counted test gate: did the candidate change the spec?
        remembered, judged = _spec_judged(
            c, wf, name, gate, command, image, commit, tree, floor, remembered, directory
        )
    record = StepRecord(
        step_id,
        "succeeded" if passed else "failed",
        event=EventSpec(
            "gate",
            step=name,
            status="passed" if passed else "failed",
            payload={
                "command": command,
                "exit_code": result.exit_code,
                "commit": commit,
                "duration_s": round(result.duration, 3),
                "output_tail": result.output[-4000:],
                **(verdict.payload() if verdict else {}),
            },
        ),
    )
    if passed:
        context = {
            **remembered,
            **judged,
            "gates_passed": history.record_gate_pass(wf.context, gate, tree),
        }
        if floor is not None:
            context.update(_accept_tests(c, wf, name, floor, result, commit, tree))
        return Outcome("passed", git_sha=commit, context=context, records=[record])
    return _failed(wf, name, gate, command, tree, result, verdict, remembered, record)


def _spec_judged(
    c: StepContext,
    wf: Workflow,
    name: str,
    gate: str,
    command: str,
    image: str | None,
    commit: str,
    tree: str,
    floor: gate_baseline.Baseline,
    remembered: dict[str, Any],
    directory: str,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Whether a passing counted test gate's candidate changed the spec (the base's tests, run on
    its code): the context to remember with what the base oracle ran, and its verdict."""
    seen = {**wf.context, **remembered}
    spec, more = base_oracle.check(
        c, wf, name, gate, command, image, commit, tree, floor, seen, directory
    )
    remembered = {**remembered, **more}
    judged: dict[str, Any] = {
        base_oracle.CONTEXT_KEY: spec.model_dump() if spec is not None else None
    }
    if spec is not None and spec.contradicts:
        c.reporter.info(
            f"The candidate changed the base's tests ({', '.join(spec.changed)}) and they "
            f"fail on its code ({spec.failing}): a person decides before it is committed."
        )
    return remembered, judged


def _failed(
    wf: Workflow,
    name: str,
    gate: str,
    command: str,
    tree: str,
    result: GateResult,
    verdict: gate_baseline.Verdict | None,
    remembered: dict[str, Any],
    record: StepRecord,
) -> Outcome:
    """Where a failed gate sends the work: too few tests counted and any other failure go back
    to the worker with the output (remembered for the tree); a command missing from the image
    goes to a person."""
    if verdict is not None and verdict.problem:
        output = f"{verdict.problem}\n{result.output[-3000:]}"
        failure = {"step": name, "gate": gate, "tree": tree, "output": output}
        return Outcome(
            "failed",
            feedback=verdict.problem,
            context={**remembered, "gate_failure": failure},
            records=[record],
        )
    missing = gate_problems.missing_command(result)
    if missing is not None:  # not remembered: the image is fixed before the gate runs again
        return Outcome(
            "failed",
            escalate=gate_problems.missing_command_error(
                gate, command, missing, result.output, wf.id
            ),
            records=[record],
        )
    failure = {"step": name, "gate": gate, "tree": tree, "output": result.output[-4000:]}
    return Outcome(
        "failed",
        feedback=result.feedback(),
        context={**remembered, "gate_failure": failure},
        records=[record],
    )


def _accept_tests(
    c: StepContext,
    wf: Workflow,
    name: str,
    floor: gate_baseline.Baseline,
    result: GateResult,
    commit: str,
    tree: str,
) -> dict[str, Any]:
    """A test engineer's tests that this counted gate just passed are pinned from now on: their
    files (test_pins) and the number of tests the run counted (a raised floor)."""
    proposed = wf.context.get("tests_proposed") or {}
    if proposed.get("tree") != tree:
        return {}
    gate_baseline.raise_floor(c, wf, name, floor, result, commit)
    pins = test_pins.merged(wf.context.get("test_pins") or {}, proposed.get("pins") or {})
    return {"test_pins": pins, "tests_proposed": None}
