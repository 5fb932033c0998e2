"""`supervisor complete-task <id>`: land a completed task on the branch it started from.

Before anything is shown or changed, the task's state is checked
(supervisor/lifecycle/refusals.py): only a completed task that has not landed yet, and that no
supervisor runs, lands; a second landing would add an empty duplicate commit to the base branch, so
the recorded landing (`task_merged`, while its commit is still on that branch) refuses it, as does
a base branch that already holds every change of the task. A base branch checked out with
uncommitted changes is a state the person changes (exit 2), said before the preview rather than
after the confirmation.

The landing commits (squash, merge, rebase) are the person's: git's `user.name` and `user.email`
as their repository reads them, with trailers naming the supervisor (`Co-authored-by`) and the
task (`Supervisor-Workflow`). git runs as everywhere on the host: no hooks, no fsmonitor.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from supervisor.core import process
from supervisor.core.errors import MergeConflictError, StateError
from supervisor.lifecycle import refusals
from supervisor.lifecycle.opening import open_project
from supervisor.state.locks import critical_section, task_holder, task_lock
from supervisor.state.store import EventSpec
from supervisor.workflow import history
from supervisor.workspace.host_git import IDENTITY, _git

if TYPE_CHECKING:
    from pathlib import Path

    from supervisor.lifecycle.opening import Project
    from supervisor.state.store import Store, Workflow

SUPERVISOR = "supervisor <supervisor@localhost>"
"""Who the landing commits name as their co-author."""

TRAILER_LINE = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]*: \S")


@dataclass
class CompletionPreview:
    workflow: Workflow
    base_branch: str
    commits: list[str]
    diffstat: str


def completion_preview(wf_id: int, path: Path) -> CompletionPreview:
    """What `complete_task` would land; refused (StateError) in any state it would refuse."""
    project = open_project(path)
    with project.store() as store:
        wf = store.workflow(wf_id)
        pid = task_holder(project.state_dir, wf_id) if wf.status == "running" else None
        base_branch = _check(project, store, wf, pid)
    ws = project.workspace
    base_tip = ws.branch_tip(base_branch)
    tip = ws.branch_tip(wf.task_branch)
    stat = process.run(["git", "-C", str(project.root), "diff", "--stat", base_tip, tip]).stdout
    return CompletionPreview(wf, base_branch, ws.log(base_tip, tip), stat)


def complete_task(wf_id: int, path: Path, mode: str | None = None) -> str:
    """Land a completed task's branch on the branch it started from; the new tip. `mode`:
    squash (one commit), merge (a merge commit) or rebase (its commits replayed); by default
    squash for a single-component task, merge otherwise."""
    project = open_project(path)
    with (
        task_lock(project.state_dir, wf_id),
        critical_section(project.state_dir, "land"),  # two tasks landing on one base branch
        project.store() as store,
    ):
        wf = store.workflow(wf_id)
        base_branch = _check(project, store, wf, None)  # again: a landing may have come between
        mode = mode or history.default_mode(wf.context)
        new = _land(project, wf, base_branch, mode)
        store.add_event(
            wf.id,
            EventSpec(
                refusals.LANDED,
                status="merged",
                payload={"into": base_branch, "sha": new, "mode": mode},
            ),
        )
    return new


def user_identity(repo: Path) -> list[str]:
    """git's `user.name` and `user.email` as the user's repository reads them (its own, global
    and system configuration), as `-c` options; the supervisor's own where either is unset, as
    git itself would refuse to commit."""
    name = _git(repo, "config", "--get", "user.name", check=False).stdout.strip()
    email = _git(repo, "config", "--get", "user.email", check=False).stdout.strip()
    if not name or not email:
        return list(IDENTITY)
    return ["-c", f"user.name={name}", "-c", f"user.email={email}"]


def with_trailers(message: str, wf_id: int) -> str:
    """`message` ending in a trailer block (git's `%(trailers)` reads it) that names the task and
    the supervisor; a trailer the block already has is not added twice."""
    wanted = [f"Supervisor-Workflow: {wf_id}", f"Co-authored-by: {SUPERVISOR}"]
    text = message.rstrip("\n")
    last = text.rsplit("\n\n", 1)[-1].splitlines()
    if "\n\n" in text and last and all(TRAILER_LINE.match(line) for line in last):
        missing = [t for t in wanted if t not in last]
        return "\n".join([text, *missing]) + "\n"
    return f"{text}\n\n" + "\n".join(wanted) + "\n"


def landing(project: Project, store: Store, wf: Workflow) -> dict[str, Any] | None:
    """The task's recorded landing, while its commit is still on the branch it landed on (a
    person who reset that branch may land the task again)."""
    event = store.last_event(wf.id, refusals.LANDED)
    if event is None:
        return None
    sha, into = str(event.payload.get("sha") or ""), str(event.payload.get("into") or "")
    ws = project.workspace
    on_branch = ws.branch_exists(into) and ws.is_ancestor(sha, ws.branch_tip(into))
    return event.payload if on_branch else None


# -- internals -----------------------------------------------------------------------------


def _check(project: Project, store: Store, wf: Workflow, pid: int | None) -> str:
    """The base branch to land on, once the task's state allows it; `pid`: the supervisor
    running the task (None when none does, or this process holds it)."""
    ws = project.workspace
    record = landing(project, store, wf)
    refusals.landable(wf, pid, record)
    if not wf.base_branch:
        raise StateError(
            f"Workflow {wf.id} started from a detached HEAD, so there is no branch to merge into.",
            f"Merge {wf.task_branch} by hand.",
        )
    if ws.current_branch() == wf.base_branch and not ws.is_clean():
        raise StateError(
            f"{wf.base_branch} is checked out with uncommitted changes; landing workflow {wf.id} "
            "now would mix them with the task's.",
            f"Commit or stash your changes, then `supervisor complete-task {wf.id}` again.",
        )
    base_tip, tip = ws.branch_tip(wf.base_branch), ws.branch_tip(wf.task_branch)
    if _holds_all_of(project.root, base_tip, tip):
        raise StateError(
            f"{wf.base_branch} already holds every change of {wf.task_branch} (landed by hand?); "
            "landing it would add an empty commit.",
            f"Nothing is left to land; `supervisor abandon {wf.id}` removes its branch and refs.",
        )
    return wf.base_branch


def _holds_all_of(repo: Path, base_tip: str, tip: str) -> bool:
    """Whether merging `tip` into `base_tip` changes nothing (a conflict is for the landing to
    report, with its files)."""
    try:
        merged = history.merged_tree(repo, base_tip, tip)
    except MergeConflictError:
        return False
    return merged == _git(repo, "rev-parse", f"{base_tip}^{{tree}}").stdout.strip()


def _land(project: Project, wf: Workflow, base_branch: str, mode: str) -> str:
    ws = project.workspace
    identity = user_identity(project.root)
    if mode == "merge":
        message = f"Merge {wf.task_branch}: {wf.description[:60]}"
        return ws.merge_into(base_branch, wf.task_branch, with_trailers(message, wf.id), identity)
    base_tip = ws.branch_tip(base_branch)
    tip = ws.branch_tip(wf.task_branch)
    if mode == "squash":
        body = "\n".join(f"  {line}" for line in ws.log(base_tip, tip))
        message = f"{wf.description.strip()[:72]}\n\nSquashed {wf.task_branch}:\n{body}\n"
        new = history.squashed(project.root, base_tip, tip, with_trailers(message, wf.id), identity)
    else:
        new = history.rebased(
            project.root, base_tip, wf.base_sha, tip, identity,
            lambda message: with_trailers(message, wf.id),
        )  # fmt: skip
    history.land(ws, base_branch, new, base_tip)
    return new
