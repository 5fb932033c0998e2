"""Git across hosts: a shared remote holds each task's branches and refs, so any worker host can
run the task's next step from the remote alone (docs/team-mode.md).

`temporal.remote` names it (any git URL; a bare repository in the specs). `start-task` publishes
the task's base commit and branch there; before a step, a worker fetches the task's refs into its
own clone; before the step's transition commits to the state database, it pushes them back, so
the database never names a commit the remote lacks (a host killed between the push and the
commit leaves refs the step's re-run overwrites). The user's checkout is only read (its base
commit is pushed from it), as without a remote.

What moves: the task branch, its component branches (`<task branch>--<component>`) and the
supervisor's refs of the task (`refs/supervisor/wf<id>/`: candidates, bases). A step's push
moves only the refs the step changed, each under a lease (`--force-with-lease=<ref>:<value at the
fetch>`): a host that lost its step to another (cut off past its timeout, then back) finds the refs
moved and gets `RemoteNotUpdatedError` instead of overwriting the newer work, and nothing of its
step is committed; refs another host added meanwhile (a component's branch) are left alone. A
component's branch is leased the same way, on its value at the component's start (issue 58: a
worker woken after another re-ran its component once pushed its stale attempt over the merged
one).
git runs with hooks and fsmonitor off; what is fetched is read as objects, never
checked out into a user's checkout.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from supervisor.core import process
from supervisor.core.errors import (
    CommandTimeoutError,
    GitError,
    RemoteNotUpdatedError,
    ToolFailedError,
)
from supervisor.workspace import treedata

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from supervisor.state.records import Workflow


def refspecs(wf: Workflow) -> list[str]:
    """The task branch, its component branches, the supervisor's refs of the task."""
    branch = f"refs/heads/{wf.task_branch}"
    own = f"refs/supervisor/wf{wf.id}"
    return [f"+{branch}:{branch}", f"+{branch}--*:{branch}--*", f"+{own}/*:{own}/*"]


def publish(repo: Path, url: str, wf: Workflow) -> None:
    """At start-task: the task's base commit and branch, from the user's checkout; each over
    what the remote had a moment ago (a task id of a discarded database), under that lease."""
    base, branch = f"refs/supervisor/wf{wf.id}/base", f"refs/heads/{wf.task_branch}"
    seen = remote_refs(repo, url, base, branch)
    leases = [f"--force-with-lease={ref}:{seen.get(ref, '')}" for ref in (base, branch)]
    _git(repo, "push", *leases, url, f"{wf.base_sha}:{base}", f"{branch}:{branch}")


def remote_refs(repo: Path, url: str, *patterns: str) -> dict[str, str]:
    """The remote's refs matching `patterns` (git ls-remote's), ref -> commit."""
    try:
        out = process.run(_argv(repo, "ls-remote", url, *patterns), timeout=60).stdout
    except (ToolFailedError, CommandTimeoutError) as e:
        detail = e.output if isinstance(e, ToolFailedError) else e.message
        raise GitError(
            f"The shared remote {url} cannot be read: {detail.strip()[-1000:]}",
            "Check that temporal.remote is a git URL this host can read and push to.",
        ) from e
    found = (line.split("\t", 1) for line in out.splitlines() if "\t" in line)
    return {ref: sha for sha, ref in found}


def check_reachable(repo: Path, url: str) -> None:
    """A worker's preflight: the shared remote answers."""
    remote_refs(repo, url, "refs/heads/__supervisor-probe__")


def unpublish(repo: Path, url: str, wf: Workflow) -> list[str]:
    """Remove the task's branches and refs from the remote (abandon; a failed submission),
    each only as it was seen: a host pushing meanwhile keeps its ref. The refs removed."""
    branch = f"refs/heads/{wf.task_branch}"
    own = f"refs/supervisor/wf{wf.id}/"
    seen = {
        ref: sha
        for ref, sha in remote_refs(repo, url).items()
        if ref == branch or ref.startswith((branch + "--", own))
    }
    if not seen:
        return []
    leases = [f"--force-with-lease={ref}:{sha}" for ref, sha in sorted(seen.items())]
    _git(repo, "push", *leases, url, *(f":{ref}" for ref in sorted(seen)))
    return sorted(seen)


@dataclass
class Lease:
    """The task's refs as the remote had them at this host's fetch (ref -> commit), moved on
    with each push this host makes."""

    refs: dict[str, str] = field(default_factory=dict)


def fetch(repo: Path, url: str, wf: Workflow) -> Lease:
    """Before a step on this host: the task's refs as the remote has them (refs of the task
    that the remote no longer has are dropped here too); the lease its pushes hold."""
    _git(repo, "fetch", "--prune", "--no-tags", "--update-head-ok", url, *refspecs(wf))
    return Lease(task_refs(repo, wf))


def task_refs(repo: Path, wf: Workflow) -> dict[str, str]:
    """This clone's refs of the task (those `refspecs` moves), ref -> commit."""
    # for-each-ref's `*` stops at a slash: `<prefix>/*` is asked for as `<prefix>/`, everything
    # under it.
    sources = [spec.lstrip("+").partition(":")[0] for spec in refspecs(wf)]
    patterns = [src.removesuffix("*") if src.endswith("/*") else src for src in sources]
    format_ = "--format=%(objectname) %(refname)"
    found = process.run(_argv(repo, "for-each-ref", format_, *patterns)).stdout
    return {ref: sha for sha, _, ref in (line.partition(" ") for line in found.splitlines())}


def fetch_for_component(repo: Path, url: str, wf: Workflow) -> None:
    """Before a component's activity: the task branch and the supervisor's refs of the task,
    without pruning (another component's activity in this clone may hold a branch it has not
    pushed yet)."""
    task_branch, _, own = refspecs(wf)
    _git(repo, "fetch", "--no-tags", "--update-head-ok", url, task_branch, own)


def push(repo: Path, url: str, wf: Workflow, lease: Lease) -> None:
    """Before a transition commits: the task's refs this host changed since `lease` (added,
    moved or deleted), each only if the remote still has it as leased."""
    now = task_refs(repo, wf)
    leases: list[str] = []
    specs: list[str] = []
    for ref in sorted(now.keys() | lease.refs.keys()):
        before, after = lease.refs.get(ref), now.get(ref)
        if before == after:
            continue
        leases.append(f"--force-with-lease={ref}:{before or ''}")
        specs.append(f"{after}:{ref}" if after else f":{ref}")
    if not specs:
        return
    _push_leased(repo, url, leases, specs, "this step's result was not committed")
    lease.refs = now


def _push_leased(repo: Path, url: str, leases: list[str], specs: list[str], lost: str) -> None:
    """Push `specs` under `leases`, all or none (`--atomic`: the remote checks every lease under
    its ref locks, so a host whose refs moved meanwhile lands none of its own). `lost`: what a
    refusal means for the caller's work, for the message."""
    try:
        process.run(
            _argv(repo, "push", "--porcelain", "--atomic", *leases, url, *specs), timeout=300
        )
    except (ToolFailedError, CommandTimeoutError) as e:
        output = e.output if isinstance(e, ToolFailedError) else e.message
        moved = "stale info" in output or "fetch first" in output
        raise RemoteNotUpdatedError(
            (
                "Another host moved this task's refs on the shared remote since this one "
                f"fetched them: {lost}."
                if moved
                else f"git push to the shared remote failed: {output.strip()[-1500:]}"
            ),
            "Nothing to do: it runs again from the remote's refs (Temporal retries it)."
            if moved
            else "Check that temporal.remote is reachable from this host; it runs again.",
        ) from e


def _argv(repo: Path, *args: str) -> list[str]:
    return ["git", *treedata.SAFE_CONFIG, "-C", str(repo), *args]


def _git(repo: Path, *args: str) -> None:
    try:
        process.run(_argv(repo, *args), timeout=300)
    except ToolFailedError as e:
        raise GitError(
            f"git {args[0]} with the shared remote failed: {e.output.strip()[-1500:]}",
            "Check that temporal.remote is a git URL this host can read and push to (a bare "
            "repository the team shares), and that it holds the task's base commit.",
        ) from e


def component_branches(repo: Path, url: str, wf: Workflow) -> dict[str, str]:
    """At a component's start: the remote's component branches of the task (ref -> commit),
    the values its push will lease on (`push_component`)."""
    return remote_refs(repo, url, f"refs/heads/{wf.task_branch}--*")


def push_component(
    repo: Path,
    url: str,
    branch: str | None,
    attempts: str,
    seen: dict[str, str],
    fence: Callable[[], None] | None = None,
) -> None:
    """After a component's activity: its branch and its attempts' audit refs (under
    `attempts`) alone; other hosts push their components' at the same time, and the step that
    merges them fetches them all. The branch only if the remote still has it as it was at the
    component's start (`seen`, `component_branches`): a worker woken after another re-ran the
    component (and the step merged it) overwrites nothing, even if `fence` (its lease's check,
    just before the push) passed a moment before another took the lease over. An attempt's
    ref is its step run's own (numbered by the state), so it is leased as the remote has it."""
    mine = refs_under_local(repo, attempts + "/")
    if branch is not None:
        mine.append(f"refs/heads/{branch}")
    if not mine:
        return
    if fence is not None:
        fence()
    now = remote_refs(repo, url, f"{attempts}/*")
    leases = [
        f"--force-with-lease={ref}:{(seen if ref.startswith('refs/heads/') else now).get(ref, '')}"
        for ref in mine
    ]
    specs = [f"{ref}:{ref}" for ref in mine]
    _push_leased(repo, url, leases, specs, "this component's run was not pushed")


def refs_under_local(repo: Path, prefix: str) -> list[str]:
    found = process.run(_argv(repo, "for-each-ref", "--format=%(refname)", prefix)).stdout
    return found.split()
