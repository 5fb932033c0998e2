"""Git across hosts under a lease: a step's push moves only the refs it changed, and only if the
shared remote still has them as this host fetched them. A host that lost its step to another
(cut off past its timeout, then back) overwrites nothing and commits nothing; the step runs again.

Real git: a bare repository as the shared remote, two clones as two worker hosts.
"""

from __future__ import annotations

import subprocess
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import pytest
import test_engine_fast
from test_engine_fast import Project, component, plans, writes

from supervisor.core.errors import ApprovalRequired, RemoteNotUpdatedError
from supervisor.lifecycle import tasks
from supervisor.state.records import Workflow
from supervisor.workspace import remote

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

project = test_engine_fast.project  # the stand-in project fixture
warm_packer = test_engine_fast.warm_packer

BRANCH = "ai/1-lease"
HEAD = f"refs/heads/{BRANCH}"


def git(repo: Path, *args: str) -> str:
    base = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@localhost"]
    return subprocess.run([*base, *args], check=True, capture_output=True, text=True).stdout.strip()


def commit_on(repo: Path, ref: str, text: str) -> str:
    """A new commit on `ref` (from its tip), made without a checkout, as the supervisor does."""
    parent = git(repo, "rev-parse", ref)
    blob = subprocess.run(
        ["git", "-C", str(repo), "hash-object", "-w", "--stdin"],
        input=text, check=True, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip
    tree = subprocess.run(
        ["git", "-C", str(repo), "mktree"],
        input=f"100644 blob {blob}\tnote.txt\n", check=True, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip
    sha = git(repo, "commit-tree", tree, "-p", parent, "-m", text)
    git(repo, "update-ref", ref, sha)
    return sha


@pytest.fixture
def hosts(tmp_path: Path) -> tuple[str, Path, Path, Workflow]:
    shared = tmp_path / "shared.git"
    subprocess.run(["git", "init", "-q", "--bare", str(shared)], check=True)
    first = tmp_path / "host-a"
    first.mkdir()
    git(first, "init", "-q")
    git(first, "commit", "-q", "--allow-empty", "-m", "base")
    base = git(first, "rev-parse", "HEAD")
    git(first, "branch", BRANCH)
    stamp = datetime.now(UTC)
    wf = Workflow(1, "lease", "running", "implement", "claude", "main", base, BRANCH, {}, {},
                  None, stamp, stamp)  # fmt: skip
    remote.publish(first, str(shared), wf)
    second = tmp_path / "host-b"
    second.mkdir()
    git(second, "init", "-q")
    return str(shared), first, second, wf


def on_remote(url: str, ref: str) -> str | None:
    out = subprocess.run(["git", "ls-remote", url, ref], capture_output=True, text=True).stdout
    return out.split()[0] if out else None


def test_a_step_pushes_what_it_changed_and_leaves_what_another_host_added(
    hosts: tuple[str, Path, Path, Workflow],
) -> None:
    url, a, b, wf = hosts
    lease = remote.fetch(a, url, wf)
    # Meanwhile a component ran on the other host and pushed its branch.
    remote.fetch(b, url, wf)
    git(b, "update-ref", f"{HEAD}--c1", commit_on(b, HEAD, "c1"))
    at_start = remote.component_branches(b, url, wf)  # what the component's push leases on
    remote.push_component(
        b, url, f"{BRANCH}--c1", f"refs/supervisor/wf{wf.id}/attempts/c1", at_start
    )
    moved = commit_on(a, HEAD, "the step's work")
    git(a, "update-ref", f"refs/supervisor/wf{wf.id}/candidate", moved)

    remote.push(a, url, wf, lease)

    assert on_remote(url, HEAD) == moved
    assert on_remote(url, f"refs/supervisor/wf{wf.id}/candidate") == moved
    assert on_remote(url, f"{HEAD}--c1") is not None  # not this step's: left alone
    again = commit_on(a, HEAD, "a later checkpoint of the same step")
    remote.push(a, url, wf, lease)  # the lease moved on with the first push
    assert on_remote(url, HEAD) == again


def test_a_host_whose_refs_moved_meanwhile_overwrites_nothing(
    hosts: tuple[str, Path, Path, Workflow],
) -> None:
    url, a, b, wf = hosts
    stale = remote.fetch(a, url, wf)  # host A starts the step, then is cut off
    fresh = remote.fetch(b, url, wf)  # Temporal gives the step to host B, which finishes it
    newer = commit_on(b, HEAD, "host B's run of the step")
    remote.push(b, url, wf, fresh)

    commit_on(a, HEAD, "host A's late run of the same step")
    with pytest.raises(RemoteNotUpdatedError, match="Another host moved this task's refs") as e:
        remote.push(a, url, wf, stale)
    assert "runs again" in (e.value.hint or "")
    assert on_remote(url, HEAD) == newer


def test_a_deletion_holds_the_lease_too(hosts: tuple[str, Path, Path, Workflow]) -> None:
    url, a, b, wf = hosts
    lease = remote.fetch(a, url, wf)
    git(a, "update-ref", f"{HEAD}--c1", commit_on(a, HEAD, "c1"))
    remote.push(a, url, wf, lease)
    git(a, "update-ref", "-d", f"{HEAD}--c1")  # merged: its branch goes
    remote.push(a, url, wf, lease)
    assert on_remote(url, f"{HEAD}--c1") is None

    git(a, "update-ref", f"{HEAD}--c2", commit_on(a, HEAD, "c2"))
    remote.push(a, url, wf, lease)
    lease = remote.fetch(a, url, wf)
    remote.fetch(b, url, wf)
    moved = commit_on(b, f"{HEAD}--c2", "c2 again, on host B")
    at_start = remote.component_branches(b, url, wf)  # what the component's push leases on
    remote.push_component(
        b, url, f"{BRANCH}--c2", f"refs/supervisor/wf{wf.id}/attempts/c2", at_start
    )
    git(a, "update-ref", "-d", f"{HEAD}--c2")
    with pytest.raises(RemoteNotUpdatedError):
        remote.push(a, url, wf, lease)
    assert on_remote(url, f"{HEAD}--c2") == moved


def test_a_step_whose_push_is_refused_leaves_the_task_running_and_runs_again(
    project: Callable[..., Project],
) -> None:
    p = project(
        """plan
  steps:
    plan: {role: planner, next: implement, human_approval: true}
    implement: {role: implementer, next: commit}
    commit: {action: commit}
""",
        None,
        ("ROLE: planner", plans(component("answer", "answer.txt"))),
        ("ROLE: implementer", writes({"answer.txt": "late\n"})),
        ("ROLE: implementer", writes({"answer.txt": "right\n"})),
    )
    with pytest.raises(ApprovalRequired):
        p.start()
    tasks.decide(1, p.root, approve=True)

    def refused(_: int) -> None:
        raise RemoteNotUpdatedError("Another host moved this task's refs.", "It runs again.")

    with pytest.raises(RemoteNotUpdatedError):
        tasks.resume(1, p.root, one_step=True, before_commit=refused)
    wf = p.workflow()
    assert (wf.status, wf.current_step) == ("running", "implement")  # nothing committed
    assert not p.events("workflow_failed")

    assert p.resume().status == "completed"  # the step again, as Temporal's retry would
    assert p.on_branch("answer.txt") == "right\n"
