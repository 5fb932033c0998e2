"""A copy-on-write view already mounted in a running container, brought to a later commit
(supervisor/workspace/overlay_advance.py): what the container shows is then exactly that commit,
the host reads it back as that commit, and a difference an archive cannot bring exactly (a
deletion) or that did not come out exactly leaves the view as it was, for its preparation to be
discarded."""

from __future__ import annotations

import subprocess
from typing import TYPE_CHECKING

import pytest
from e2e_support import IMAGE, require_sandbox

from supervisor.sandbox.docker import DockerSandbox, RunSpec, remove_container
from supervisor.workspace import overlay, overlay_advance
from supervisor.workspace.candidate_tree import SnapshotLimits
from supervisor.workspace.worktrees import Workspace, wait_for_deletions

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

LIMITS = SnapshotLimits()


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


def commit_all(repo: Path, message: str) -> str:
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", message)
    return git(repo, "rev-parse", "HEAD")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "pkg").mkdir(parents=True)
    git(root, "init", "-q")
    (root / "pkg" / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (root / "README.md").write_text("calc\n")
    (root / "old.txt").write_text("old\n")
    return root


@pytest.fixture
def workspace(repo: Path) -> Iterator[Workspace]:
    ws = Workspace(repo)
    ws.use_overlay()
    yield ws
    wait_for_deletions()


def implemented(repo: Path) -> str:
    """The commit an implementer's step would make: a changed file, new files in new folders,
    an executable, a symlink."""
    (repo / "pkg" / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    (repo / "pkg" / "tests" / "unit").mkdir(parents=True)
    (repo / "pkg" / "tests" / "unit" / "test_calc.py").write_text("from pkg.calc import add\n")
    (repo / "run.sh").write_text("#!/bin/sh\necho run\n")
    (repo / "run.sh").chmod(0o755)
    (repo / "docs").symlink_to("README.md")
    return commit_all(repo, "implemented")


@pytest.mark.docker
def test_a_mounted_view_brought_to_a_later_commit_shows_and_reads_back_exactly_that_commit(
    repo: Path, workspace: Workspace, tmp_path: Path
) -> None:
    require_sandbox()
    before = commit_all(repo, "start")
    after = implemented(repo)
    path = workspace.add_worktree("early", before)
    view = overlay.view_for(path)
    assert view is not None and view.mode == "overlay"
    sandbox = DockerSandbox(IMAGE, "supervisor-egress-test")
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "stdin").write_text("")
    container, volume = sandbox.create(RunSpec(argv=["sleep", "120"], worktree=path), run_dir, view)
    try:
        container.start()
        assert overlay_advance.advance(
            workspace.git_dir,
            view,
            after,
            lambda data: container.put_archive("/workspace", data),
        )

        shown = container.exec_run(
            [
                "sh",
                "-c",
                "cat pkg/calc.py; cat pkg/tests/unit/test_calc.py; "
                "test -x run.sh && echo executable; readlink docs; cat old.txt; "
                "echo more >> README.md && echo writable",
            ],
        )
        assert shown.exit_code == 0, shown.output
        assert shown.output.decode().splitlines() == [
            "def add(a, b):",
            "    return a + b",
            "from pkg.calc import add",
            "executable",
            "README.md",
            "old",
            "writable",
        ]
        # Read back as a step's result: the later commit with the worker's change on top.
        sha = workspace.snapshot(path, "step", limits=LIMITS)
        assert sha is not None
        assert git(repo, "diff", "--name-only", after, sha).splitlines() == ["README.md"]
    finally:
        remove_container(container)
        volume.remove(force=True)
        workspace.remove_worktree(path)
        sandbox.close()


def test_a_difference_that_deletes_a_path_is_not_advanced_and_the_view_stays_as_it_was(
    repo: Path, workspace: Workspace
) -> None:
    before = commit_all(repo, "start")
    (repo / "old.txt").unlink()
    (repo / "new.txt").write_text("new\n")
    after = commit_all(repo, "a file replaced")
    path = workspace.add_worktree("early", before)
    view = overlay.view_for(path)
    assert view is not None
    sent: list[bytes] = []

    assert not overlay_advance.advance(workspace.git_dir, view, after, sent.append)
    assert sent == [] and view.commit == before
    workspace.remove_worktree(path)


def test_an_archive_that_did_not_come_out_exactly_leaves_the_view_as_it_was(
    repo: Path, workspace: Workspace
) -> None:
    """Nothing unpacked (an engine that dropped the archive): the view still holds the first
    commit, so it is not taken for the second."""
    before = commit_all(repo, "start")
    after = implemented(repo)
    path = workspace.add_worktree("early", before)
    view = overlay.view_for(path)
    assert view is not None
    start, stamps = dict(view.start), dict(view.stamps)
    sent: list[bytes] = []

    assert not overlay_advance.advance(workspace.git_dir, view, after, sent.append)
    assert len(sent) == 1 and sent[0]  # the archive went out, and nothing came of it
    assert (view.commit, view.start, view.stamps) == (before, start, stamps)
    workspace.remove_worktree(path)


def test_the_archive_is_owned_by_the_sandbox_user_and_keeps_modes_and_links(
    repo: Path, workspace: Workspace
) -> None:
    import io
    import tarfile

    before = commit_all(repo, "start")
    after = implemented(repo)
    path = workspace.add_worktree("early", before)
    view = overlay.view_for(path)
    assert view is not None
    data = overlay_advance.archive(workspace.git_dir, view, after)
    assert data
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        members = {m.name: m for m in tar.getmembers()}
    assert sorted(members) == [
        "docs",
        "pkg/calc.py",
        "pkg/tests",
        "pkg/tests/unit",
        "pkg/tests/unit/test_calc.py",
        "run.sh",
    ]  # new folders once each; `pkg`, already shown, not at all
    uid, gid = overlay.container_ids()
    assert {(m.uid, m.gid) for m in members.values()} == {(uid, gid)}
    assert members["docs"].issym() and members["docs"].linkname == "README.md"
    assert members["run.sh"].mode == 0o755 and members["pkg/calc.py"].mode == 0o644
    assert members["pkg/tests"].isdir()
    workspace.remove_worktree(path)


def test_a_commit_whose_tree_names_a_path_out_of_the_workspace_is_never_sent(
    repo: Path, workspace: Workspace
) -> None:
    """git accepts a tree entry named `..` (mktree); such a commit is not brought into any
    container's workspace, whatever the engine's own unpacking would do with it."""
    before = commit_all(repo, "start")
    blob = git(repo, "hash-object", "-w", "README.md")
    listing = git(repo, "ls-tree", before) + f"\n100644 blob {blob}\t..\n"
    tree = subprocess.run(
        ["git", "-C", str(repo), "mktree"],
        input=listing,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    hostile = git(repo, "commit-tree", tree, "-p", before, "-m", "a path out")
    path = workspace.add_worktree("early", before)
    view = overlay.view_for(path)
    assert view is not None
    sent: list[bytes] = []

    assert overlay_advance.archive(workspace.git_dir, view, hostile) is None
    assert not overlay_advance.advance(workspace.git_dir, view, hostile, sent.append)
    assert sent == [] and view.commit == before
    workspace.remove_worktree(path)


def test_a_difference_over_the_limits_is_not_advanced(
    repo: Path, workspace: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A large change is prepared afresh instead (no archive of unbounded size is built)."""
    before = commit_all(repo, "start")
    after = implemented(repo)  # four files and links
    path = workspace.add_worktree("early", before)
    view = overlay.view_for(path)
    assert view is not None
    monkeypatch.setattr(overlay_advance, "MAX_FILES", 3)
    assert overlay_advance.archive(workspace.git_dir, view, after) is None
    monkeypatch.setattr(overlay_advance, "MAX_FILES", 500)
    monkeypatch.setattr(overlay_advance, "MAX_BYTES", 10)
    assert overlay_advance.archive(workspace.git_dir, view, after) is None
    monkeypatch.setattr(overlay_advance, "MAX_BYTES", 20 * 1024 * 1024)
    assert overlay_advance.archive(workspace.git_dir, view, after)
    workspace.remove_worktree(path)
