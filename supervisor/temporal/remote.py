"""Git across hosts: a shared remote holds each task's branches and refs, so any worker host can
run the task's next step from the remote alone (README "Scale-out (optional)").

`temporal.remote` names it (any git URL; a bare repository in the specs). `start-task` publishes
the task's base commit and branch there; before a step, a worker fetches the task's refs into its
own clone; before the step's transition commits to the state database, it pushes them back, so
the database never names a commit the remote lacks (a host killed between the push and the
commit leaves refs the step's re-run overwrites). The user's checkout is only read (its base
commit is pushed from it), as without a remote.

What moves: the task branch, its component branches (`<task branch>--<component>`) and the
supervisor's refs of the task (`refs/supervisor/wf<id>/`: candidates, bases). Pushes are forced
and pruned within those names only: the task owns them, and the remote mirrors the last step's
view of them. git runs with hooks and fsmonitor off; what is fetched is read as objects, never
checked out into a user's checkout.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from supervisor import process, treedata
from supervisor.errors import GitError, ToolFailedError

if TYPE_CHECKING:
    from pathlib import Path

    from supervisor.state.records import Workflow


def refspecs(wf: Workflow) -> list[str]:
    """The task branch, its component branches, the supervisor's refs of the task."""
    branch = f"refs/heads/{wf.task_branch}"
    own = f"refs/supervisor/wf{wf.id}"
    return [f"+{branch}:{branch}", f"+{branch}--*:{branch}--*", f"+{own}/*:{own}/*"]


def publish(repo: Path, url: str, wf: Workflow) -> None:
    """At start-task: the task's base commit and branch, from the user's checkout."""
    _git(repo, "push", "--force", url,
         f"{wf.base_sha}:refs/supervisor/wf{wf.id}/base",
         f"refs/heads/{wf.task_branch}:refs/heads/{wf.task_branch}")  # fmt: skip


def fetch(repo: Path, url: str, wf: Workflow) -> None:
    """Before a step on this host: the task's refs as the remote has them (refs of the task
    that the remote no longer has are dropped here too)."""
    _git(repo, "fetch", "--prune", "--no-tags", "--update-head-ok", url, *refspecs(wf))


def fetch_for_component(repo: Path, url: str, wf: Workflow) -> None:
    """Before a component's activity: the task branch and the supervisor's refs of the task,
    without pruning (another component's activity in this clone may hold a branch it has not
    pushed yet)."""
    task_branch, _, own = refspecs(wf)
    _git(repo, "fetch", "--no-tags", "--update-head-ok", url, task_branch, own)


def push(repo: Path, url: str, wf: Workflow) -> None:
    """Before a transition commits: the task's refs as this host has them."""
    _git(repo, "push", "--force", "--prune", url, *(s.lstrip("+") for s in refspecs(wf)))


def _git(repo: Path, *args: str) -> None:
    try:
        process.run(["git", *treedata.SAFE_CONFIG, "-C", str(repo), *args], timeout=300)
    except ToolFailedError as e:
        raise GitError(
            f"git {args[0]} with the shared remote failed: {e.output.strip()[-1500:]}",
            "Check that temporal.remote is a git URL this host can read and push to (a bare "
            "repository the team shares), and that it holds the task's base commit.",
        ) from e


def push_component(repo: Path, url: str, branch: str | None, attempts: str) -> None:
    """After a component's activity: its branch and its attempts' audit refs (under
    `attempts`) alone; other hosts push their components' at the same time, and the step that
    merges them fetches them all."""
    specs = [f"{attempts}/*:{attempts}/*"]
    if branch is not None:
        specs.append(f"refs/heads/{branch}:refs/heads/{branch}")
    _git(repo, "push", "--force", url, *specs)
