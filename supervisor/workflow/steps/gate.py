"""The gate step: a configured check run on a candidate commit in a no-network sandbox.

The command comes from the configuration pinned at task start, never from the candidate; the
candidate is checked out into a throwaway worktree and the gate's result is recorded with the
tree it judged (so the commit step can prove every gate passed on the exact tree it commits).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from supervisor import protected
from supervisor.errors import CommandTimeoutError, SandboxError
from supervisor.gates import run_gate
from supervisor.state.store import EventSpec, StepRecord, now
from supervisor.treedata import CommitFiles
from supervisor.workflow import gate_problems, history
from supervisor.workflow.steps.base import Outcome, StepContext, err
from supervisor.workflow.steps.images import image_for

if TYPE_CHECKING:
    from supervisor.config import StepDef
    from supervisor.state.store import Workflow


def gate_step(c: StepContext, wf: Workflow, name: str, step: StepDef) -> Outcome:
    """A workflow's gate step: its gate on the candidate (or the task branch, before one)."""
    commit = wf.context.get("candidate") or c.ws.branch_tip(wf.task_branch)
    outcome = gate_on(c, wf, name, step.gate or "", commit)
    failure = outcome.context.get("gate_failure")
    if failure is not None:  # the step the work goes back to, for results.unchanged
        failure["to"] = step.on_fail or name
    return outcome


def gate_on(c: StepContext, wf: Workflow, name: str, gate: str, commit: str) -> Outcome:
    """Run the named gate on `commit` in a no-network sandbox, as step `name`."""
    command = protected.pinned(wf.context, c.settings).gates[gate]
    attempt = c.store.count_steps(wf.id, name) + 1
    began = now()  # the step's time includes making its worktree
    worktree = c.ws.add_worktree(f"wf{wf.id}-{name}-{attempt}", commit)
    step_id = c.store.start_step(wf.id, name, attempt, None, str(worktree), began)
    c.reporter.step(wf.id, name, f"gate `{command}` (no network)")

    def failed(e: SandboxError | CommandTimeoutError) -> StepRecord:
        event = EventSpec("gate", step=name, status="failed", payload=err(e))
        return StepRecord(step_id, "failed", error=e.message, event=event)

    try:
        image = image_for(c, wf, name, CommitFiles(c.ws.git_dir, commit))
    except SandboxError as e:
        c.ws.remove_worktree(worktree)
        return Outcome("failed", escalate=e, records=[failed(e)])
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
    except CommandTimeoutError as e:
        return Outcome(
            "failed",
            feedback=f"The '{name}' gate timed out: {e.message}",
            records=[failed(e)],
        )
    finally:
        c.ws.remove_worktree(worktree)
    record = StepRecord(
        step_id,
        "succeeded" if result.passed else "failed",
        event=EventSpec(
            "gate",
            step=name,
            status="passed" if result.passed else "failed",
            payload={
                "command": command,
                "exit_code": result.exit_code,
                "commit": commit,
                "duration_s": round(result.duration, 3),
                "output_tail": result.output[-4000:],
            },
        ),
    )
    tree = c.ws.tree_hash(commit)
    if result.passed:
        passed = history.record_gate_pass(wf.context, gate, tree)
        return Outcome("passed", git_sha=commit, context={"gates_passed": passed}, records=[record])
    missing = gate_problems.missing_command(result)
    if missing is not None:
        return Outcome(
            "failed",
            escalate=gate_problems.missing_command_error(
                gate, command, missing, result.output, wf.id
            ),
            records=[record],
        )
    failure = {"step": name, "gate": gate, "tree": tree, "output": result.output[-4000:]}
    return Outcome(
        "failed", feedback=result.feedback(), context={"gate_failure": failure}, records=[record]
    )
