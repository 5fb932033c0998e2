"""`supervisor abandon <id>`: clear away what a task left in the repository.

A failed, waiting or finished task keeps its branch, its component branches, the refs under
`refs/supervisor/wf<id>/` (candidate, attempts) and possibly worktrees. Abandoning removes them
all, after a preview, and marks the workflow `abandoned`; never while a supervisor runs the task
(its task lock says so), and never a branch the user has checked out.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from supervisor.errors import GitError
from supervisor.state.locks import task_lock
from supervisor.state.store import EventSpec
from supervisor.workflow.history import refs_under

if TYPE_CHECKING:
    from pathlib import Path

    from supervisor.opening import Project
    from supervisor.state.store import Workflow


@dataclass
class Abandonment:
    workflow: Workflow
    branches: list[str] = field(default_factory=list)
    refs: list[str] = field(default_factory=list)
    worktrees: list[Path] = field(default_factory=list)

    def items(self) -> list[str]:
        found = [f"branch {b}" for b in self.branches]
        found += [f"ref {r}" for r in self.refs]
        found += [f"worktree {w}" for w in self.worktrees]
        return found or ["(nothing left in git; the workflow is only marked abandoned)"]


def preview(wf_id: int, path: Path) -> Abandonment:
    from supervisor.opening import open_project

    project = open_project(path)
    with project.store() as store:
        wf = store.workflow(wf_id)
    ws = project.workspace
    branches = [
        ref.removeprefix("refs/heads/")
        for ref in refs_under(project.root, "refs/heads/")
        if ref == f"refs/heads/{wf.task_branch}" or ref.startswith(f"refs/heads/{wf.task_branch}--")
    ]
    if ws.current_branch() in branches:
        raise GitError(
            f"{ws.current_branch()} is checked out in your working tree; abandoning would delete "
            "the branch under you.",
            "Switch to another branch (git switch main), then abandon again.",
        )
    refs = refs_under(project.root, f"refs/supervisor/wf{wf_id}/")
    worktrees = (
        sorted(p for p in ws.worktrees_dir.iterdir() if p.name.startswith(f"wf{wf_id}-"))
        if ws.worktrees_dir.exists()
        else []
    )
    return Abandonment(wf, branches, refs, worktrees)


def abandon(wf_id: int, path: Path) -> Abandonment:
    """Remove what `preview` lists; refused (WorkflowBusyError) while a supervisor runs it."""
    from supervisor.opening import open_project

    project = open_project(path)
    with task_lock(project.state_dir, wf_id), project.store() as store:
        plan = preview(wf_id, path)
        ws = project.workspace
        for worktree in plan.worktrees:
            ws.remove_worktree(worktree)
        from supervisor.workspace import overlay

        overlay.remove_bases(ws.state_dir, f"wf{wf_id}-")  # what its views stood on
        for ref in [*plan.refs, *(f"refs/heads/{b}" for b in plan.branches)]:
            ws.delete_ref(ref)
        _remove_containers(project, wf_id)
        from supervisor.workers.continuation import discard_all

        discard_all(project.state_dir, wf_id)  # kept CLI homes of continued sessions
        wf = store.workflow(wf_id)
        removed = plan.items()
        url = project.settings.temporal.remote
        if url and any(e.type == "temporal_submitted" for e in store.events(wf_id)):
            from supervisor.temporal import remote  # the task's refs on the team's remote too

            removed += [f"remote ref {ref}" for ref in remote.unpublish(project.root, url, wf)]
        store.update_workflow(
            wf_id,
            status="abandoned",
            current_step=None,
            context=wf.context,
            events=[EventSpec("abandoned", status="abandoned", payload={"removed": removed})],
        )
    return plan


def _remove_containers(project: Project, wf_id: int) -> None:
    """The containers, volumes and run folders a killed run of this task left (its resume would
    have removed them; no other task's), and what belongs to no task but to a dead supervisor
    (a probe killed in its preflight, an image build's HEAD worktree): abandoning a task is
    often the last command run in a repository, so it cleans what start and resume would.
    Without a Docker engine there is no container to remove."""
    from supervisor.errors import SandboxError
    from supervisor.image_commands import remove_dead_head_trees
    from supervisor.opening import remove_dead_probes
    from supervisor.sandbox.docker import LABEL_REPO, LABEL_WORKFLOW, DockerSandbox, repo_label

    remove_dead_head_trees(project)
    with contextlib.suppress(SandboxError):
        settings = project.settings.sandbox
        sandbox = DockerSandbox(settings.image, settings.egress_network)
        sandbox.remove_stale({LABEL_REPO: repo_label(project.root), LABEL_WORKFLOW: str(wf_id)})
        remove_dead_probes(project, sandbox)
