"""The commit action: one commit of the candidate's tree on the task branch.

Only a tree that passed every gate the workflow defines is committed, and as one new commit on
the branch tip: nothing a worker committed on the way (a failed attempt, a component commit, a
merge) becomes reachable from the branch. Re-running it after a crash is safe (a branch already
at that tree is left alone).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from supervisor.core import faults
from supervisor.core.config import WorkflowDef
from supervisor.core.errors import StepFailedError
from supervisor.state.store import EventSpec
from supervisor.workflow import history
from supervisor.workflow.steps.base import Outcome, StepContext, candidate_ref

if TYPE_CHECKING:
    from supervisor.state.store import Workflow


def commit(c: StepContext, wf: Workflow) -> Outcome:
    """Commit the candidate's tree, if every gate passed on it, and drop the candidate ref."""
    candidate = wf.context.get("candidate")
    if not candidate:
        return Outcome("passed", events=[EventSpec("commit", status="nothing_to_commit")])
    tree = c.ws.tree_hash(candidate)
    tip = c.ws.branch_tip(wf.task_branch)
    missing = history.missing_gates(wf.context, WorkflowDef.model_validate(wf.definition), tree)
    if missing and c.ws.tree_hash(tip) != tree:
        return Outcome(
            "failed",
            escalate=StepFailedError(
                f"Refusing to commit tree {tree[:12]} to {wf.task_branch}: the "
                f"{', '.join(missing)} gate(s) never passed on that exact tree (a step "
                "changed it after the gates ran).",
                "Put a gate step after every step that changes the code (see the shipped "
                "templates in config/workflow_templates/), then `supervisor resume "
                f"{wf.id}`.",
            ),
        )
    new = tip
    if c.ws.tree_hash(tip) != tree:  # else a crash came after the commit: done already
        faults.reached("committing")  # the branch not yet moved (test_machine_fault_moments)
        message = history.commit_message(wf.description, wf.id, wf.context, tree)
        new = history.commit_tree(c.repo, tree, tip, message)
        c.ws.fast_forward_branch(wf.task_branch, new)
    c.ws.set_ref(history.attempt_ref(wf.id, "committed", 0), candidate, None)
    c.ws.delete_ref(candidate_ref(wf.id))
    c.reporter.info(f"{wf.task_branch} now at {new[:12]}")
    return Outcome(
        "passed",
        git_sha=new,
        context={"candidate": None},
        events=[
            EventSpec(
                "commit",
                status="committed",
                payload={
                    "branch": wf.task_branch,
                    "sha": new,
                    "tree": tree,
                    "candidate": candidate,
                    "gates": wf.context.get("gates_passed", {}).get(tree, []),
                },
            )
        ],
    )
