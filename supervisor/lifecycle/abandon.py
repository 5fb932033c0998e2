"""`supervisor abandon <id>`: clear away what a task left in the repository.

A failed, waiting or finished task keeps its branch, its component branches, the refs under
`refs/supervisor/wf<id>/` (candidate, attempts) and possibly worktrees. Abandoning removes them
all, after a preview, and marks the workflow `abandoned`; never while a supervisor runs the task
(its task lock says so, before the preview), never twice, and never a branch the user has
checked out.

Deleting a branch can delete the only copy of its commits: the task's one commit, when it never
landed. The preview names each branch whose tip no other branch or tag holds and that no
recorded landing took (`never landed: ai/1-x at <sha>`), with the `git branch` that gets it back;
the command prints the SHAs again once they are deleted, and the `abandoned` event keeps them.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from supervisor.core.errors import GitError
from supervisor.lifecycle import refusals
from supervisor.lifecycle.completion import landing
from supervisor.state.locks import task_holder, task_lock
from supervisor.state.store import EventSpec
from supervisor.workflow.history import refs_under
from supervisor.workspace.host_git import _git

if TYPE_CHECKING:
    from pathlib import Path

    from supervisor.lifecycle.opening import Project
    from supervisor.state.store import Store, Workflow


@dataclass
class Abandonment:
    workflow: Workflow
    branches: list[str] = field(default_factory=list)
    refs: list[str] = field(default_factory=list)
    worktrees: list[Path] = field(default_factory=list)
    tips: dict[str, str] = field(default_factory=dict)
    """Each branch's commit: what `git branch <name> <sha>` brings back."""
    unlanded: list[str] = field(default_factory=list)
    """The branches whose commits nothing else keeps: deleting them deletes the work."""
    landed: dict[str, Any] | None = None
    """The task's recorded landing (`complete-task`), still on its base branch."""

    def items(self) -> list[str]:
        found = [f"branch {b} at {self.tips[b]}" for b in self.branches]
        found += [f"ref {r}" for r in self.refs]
        found += [f"worktree {w}" for w in self.worktrees]
        return found or ["(nothing left in git; the workflow is only marked abandoned)"]

    def warnings(self) -> list[str]:
        """What the preview says besides the list: where the work landed, or what never did."""
        if self.landed:
            return [f"landed: {refusals.landed(self.landed)}"]
        return [f"never landed: {b} at {self.tips[b]}; {self.recovery(b)}" for b in self.unlanded]

    def recovery(self, branch: str) -> str:
        return f"`git branch {branch} {self.tips[branch]}` gets it back"


def preview(wf_id: int, path: Path) -> Abandonment:
    """What `abandon` would remove; refused for an abandoned task or one a supervisor runs."""
    from supervisor.lifecycle.opening import open_project

    project = open_project(path)
    with project.store() as store:
        wf = store.workflow(wf_id)
        refusals.not_abandoned(wf, "abandon")
        refusals.not_running_elsewhere(wf, task_holder(project.state_dir, wf_id))
        return _plan(project, store, wf)


def abandon(wf_id: int, path: Path) -> Abandonment:
    """Remove what `preview` lists; refused (WorkflowBusyError) while a supervisor runs it."""
    from supervisor.lifecycle.opening import open_project

    project = open_project(path)
    with task_lock(project.state_dir, wf_id), project.store() as store:
        wf = store.workflow(wf_id)
        refusals.not_abandoned(wf, "abandon")  # again: another abandon may have come between
        plan = _plan(project, store, wf)
        ws = project.workspace
        for worktree in plan.worktrees:
            ws.remove_worktree(worktree)
        from supervisor.workspace import overlay

        overlay.remove_bases(ws.state_dir, f"wf{wf_id}-")  # what its views stood on
        for ref in [*plan.refs, *(f"refs/heads/{b}" for b in plan.branches)]:
            ws.delete_ref(ref)
        _remove_containers(project, wf_id)
        from supervisor.workflow.continuation import discard_all

        discard_all(project.state_dir, wf_id)  # kept CLI homes of continued sessions
        removed = plan.items()
        url = project.settings.temporal.remote
        if url and any(e.type == "temporal_submitted" for e in store.events(wf_id)):
            from supervisor.workspace import remote  # the task's refs on the team's remote too

            removed += [f"remote ref {ref}" for ref in remote.unpublish(project.root, url, wf)]
        never = {b: plan.tips[b] for b in plan.unlanded}
        store.update_workflow(
            wf_id,
            status="abandoned",
            current_step=None,
            context=wf.context,
            events=[
                EventSpec(
                    "abandoned",
                    status="abandoned",
                    payload={"removed": removed, "never_landed": never},
                )
            ],
        )
    return plan


def _plan(project: Project, store: Store, wf: Workflow) -> Abandonment:
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
    refs = refs_under(project.root, f"refs/supervisor/wf{wf.id}/")
    worktrees = (
        sorted(p for p in ws.worktrees_dir.iterdir() if p.name.startswith(f"wf{wf.id}-"))
        if ws.worktrees_dir.exists()
        else []
    )
    tips = {b: ws.branch_tip(b) for b in branches}
    landed = landing(project, store, wf)
    unlanded = [] if landed else _kept_nowhere_else(project.root, tips)
    return Abandonment(wf, branches, refs, worktrees, tips, unlanded, landed)


def _kept_nowhere_else(repo: Path, tips: dict[str, str]) -> list[str]:
    """The branches of `tips` whose commit no branch outside `tips` and no tag contains."""
    gone = {f"refs/heads/{b}" for b in tips}
    found = []
    for branch, sha in tips.items():
        holders = _git(
            repo, "for-each-ref", f"--contains={sha}", "--format=%(refname)", "refs/heads/",
            "refs/tags/",
        ).stdout.split()  # fmt: skip
        if not set(holders) - gone:
            found.append(branch)
    return found


def _remove_containers(project: Project, wf_id: int) -> None:
    """The containers, volumes and run folders a killed run of this task left (its resume would
    have removed them; no other task's), and what belongs to no task but to a dead supervisor
    (a probe killed in its preflight, an image build's HEAD worktree): abandoning a task is
    often the last command run in a repository, so it cleans what start and resume would.
    Without a Docker engine there is no container to remove."""
    from supervisor.core.errors import SandboxError
    from supervisor.lifecycle.image_commands import remove_dead_head_trees
    from supervisor.lifecycle.opening import remove_dead_probes
    from supervisor.sandbox.docker import LABEL_REPO, LABEL_WORKFLOW, DockerSandbox, repo_label

    remove_dead_head_trees(project)
    with contextlib.suppress(SandboxError):
        settings = project.settings.sandbox
        sandbox = DockerSandbox(settings.image, settings.egress_network)
        sandbox.remove_stale({LABEL_REPO: repo_label(project.root), LABEL_WORKFLOW: str(wf_id)})
        remove_dead_probes(project, sandbox)
