"""Interface locking: the files a tech lead's step wrote are compiled, then frozen.

Why: components built side by side agree only through these files; once they compile, every later
step sees them read-only (supervisor.workflow.steps.results refuses a change to them).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from supervisor.context import interfaces
from supervisor.state.store import EventSpec
from supervisor.workflow.steps.base import Outcome, StepContext
from supervisor.workflow.steps.images import image_for
from supervisor.workspace.treedata import CommitFiles

if TYPE_CHECKING:
    from supervisor.state.store import Workflow


def lock_interfaces(c: StepContext, wf: Workflow, name: str, outcome: Outcome) -> Outcome:
    """Compile the interface files the step wrote, then freeze them for later steps."""
    files = c.ws.changed_files(c.ws.branch_tip(wf.task_branch), outcome.git_sha or "")
    worktree = c.ws.add_worktree(f"wf{wf.id}-{name}-compile", outcome.git_sha or "")
    try:
        commit = CommitFiles(c.ws.git_dir, outcome.git_sha or "")  # read as blobs
        image = image_for(c, wf, name, commit)  # the compilers run in the sandbox
        problems = interfaces.compile_errors(
            c.repo, worktree, files, c.sandbox, image, c.labels(wf.id, name)
        )
    finally:
        c.ws.remove_worktree(worktree)
    event = EventSpec(
        "interfaces",
        step=name,
        status="failed" if problems else "locked",
        payload={"files": files, "compiler": problems},
    )
    if problems:
        return Outcome(
            "failed",
            events=[*outcome.events, event],
            feedback=f"The interface files do not compile:\n{problems}",
            context={"trees": outcome.context.get("trees", {})},
            records=outcome.records,
        )
    c.reporter.info(f"interfaces locked: {', '.join(files)}")
    context = {
        **outcome.context,
        "locked_files": files,
        "locked_by": name,
        "locked_sha": outcome.git_sha,
    }
    return replace(outcome, events=[*outcome.events, event], context=context)
