"""Git workspace: task branches and per-step worktrees that never touch the user's checkout."""

from __future__ import annotations

import os
import subprocess
from typing import TYPE_CHECKING

import pytest

from supervisor.errors import GitError, RepoError
from supervisor.workspace import Workspace, find_repo_root

if TYPE_CHECKING:
    from pathlib import Path


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
        capture_output=True,
        text=True,
        check=True,
    ).stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "repo"
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    (path / "app.py").write_text("print('v1')\n")
    (path / ".gitignore").write_text("*.log\n")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "first")
    return path


def dirty(repo: Path) -> None:
    """A user mid-work: staged, unstaged and untracked changes."""
    (repo / "app.py").write_text("print('staged')\n")
    git(repo, "add", "app.py")
    (repo / "app.py").write_text("print('unstaged on top')\n")
    (repo / "notes.txt").write_text("untracked\n")


def test_a_directory_that_is_not_a_repository_is_refused(tmp_path: Path) -> None:
    with pytest.raises(RepoError, match="not a git repository") as info:
        find_repo_root(tmp_path)
    assert "git init" in info.value.hint


def test_a_repository_without_commits_is_refused(tmp_path: Path) -> None:
    git(tmp_path, "init", "-q")
    with pytest.raises(RepoError, match="no commits yet"):
        find_repo_root(tmp_path)


def test_the_root_is_found_from_a_subdirectory(repo: Path) -> None:
    (repo / "pkg").mkdir()
    assert find_repo_root(repo / "pkg") == repo.resolve()


def test_creating_the_task_branch_leaves_the_users_checkout_byte_identical(repo: Path) -> None:
    dirty(repo)
    ws = Workspace(repo)
    before = ws.user_checkout_fingerprint()
    branch, base = ws.create_task_branch(7, "Add a --json flag!", base="HEAD")
    assert branch == "ai/7-add-a-json-flag"
    assert base == ws.head_commit() == ws.branch_tip(branch)
    assert ws.current_branch() == "main"
    assert ws.user_checkout_fingerprint() == before
    assert (repo / "app.py").read_text() == "print('unstaged on top')\n"
    assert git(repo, "diff", "--cached", "--name-only").split() == ["app.py"]


def test_an_existing_task_branch_is_not_overwritten(repo: Path) -> None:
    ws = Workspace(repo)
    ws.create_task_branch(1, "task")
    with pytest.raises(GitError, match="already exists"):
        ws.create_task_branch(1, "task")


def test_a_worktree_snapshot_becomes_a_child_commit_of_the_base(repo: Path) -> None:
    dirty(repo)
    ws = Workspace(repo)
    before = ws.user_checkout_fingerprint()
    base = ws.head_commit()
    tree = ws.add_worktree("wf1-implement-1", base)
    (tree / "app.py").write_text("print('v2')\n")
    (tree / "new.py").write_text("x = 1\n")
    (tree / "debug.log").write_text("ignored by .gitignore\n")
    sha = ws.snapshot(tree, "implement")
    assert sha is not None
    assert git(repo, "rev-parse", f"{sha}^").strip() == base
    assert ws.changed_files(base, sha) == ["app.py", "new.py"]
    assert git(repo, "show", f"{sha}:app.py") == "print('v2')\n"
    ws.remove_worktree(tree)
    assert not tree.exists()
    assert ws.user_checkout_fingerprint() == before


def test_a_snapshot_with_no_changes_is_none(repo: Path) -> None:
    ws = Workspace(repo)
    tree = ws.add_worktree("wf1-plan-1", ws.head_commit())
    assert ws.snapshot(tree, "nothing") is None


def test_files_written_by_another_user_can_be_committed(repo: Path) -> None:
    if os.getuid() != 0:
        pytest.skip("needs root to chown a file to another user")
    ws = Workspace(repo)
    tree = ws.add_worktree("wf1-implement-1", ws.head_commit())
    (tree / "by_container.py").write_text("y = 2\n")
    os.chown(tree / "by_container.py", 65534, 65534)
    os.chown(tree, 65534, 65534)
    assert ws.snapshot(tree, "from the container") is not None


def test_worktrees_left_by_a_crash_are_removed_and_pruned(repo: Path) -> None:
    ws = Workspace(repo)
    left = ws.add_worktree("wf3-implement-2", ws.head_commit())
    (left / "half-written.py").write_text("partial")
    stray = ws.worktrees_dir / "wf3-test-1"
    stray.mkdir()  # a directory that git no longer knows about
    removed = Workspace(repo).remove_stale_worktrees()
    assert removed == ["wf3-implement-2", "wf3-test-1"]
    assert list(ws.worktrees_dir.iterdir()) == []
    assert git(repo, "worktree", "list", "--porcelain").count("worktree ") == 1


def test_supervisor_state_never_shows_in_the_users_git_status(repo: Path) -> None:
    ws = Workspace(repo)
    ws.add_worktree("wf1-plan-1", ws.head_commit())
    (repo / ".supervisor" / "state.db").write_bytes(b"x")
    assert git(repo, "status", "--porcelain") == ""
    assert (repo / ".gitignore").read_text() == "*.log\n"  # the user's file is not edited


def test_the_task_branch_only_fast_forwards_and_idempotently(repo: Path) -> None:
    ws = Workspace(repo)
    branch, base = ws.create_task_branch(1, "task")
    tree = ws.add_worktree("wf1-implement-1", base)
    (tree / "a.py").write_text("a = 1\n")
    candidate = ws.snapshot(tree, "a")
    assert candidate is not None
    ws.fast_forward_branch(branch, candidate)
    ws.fast_forward_branch(branch, candidate)  # a resumed commit step does no harm
    assert ws.branch_tip(branch) == candidate
    with pytest.raises(GitError, match="not an ancestor"):
        ws.fast_forward_branch(branch, base)
    assert ws.branch_tip(branch) == candidate


def test_the_users_checked_out_branch_is_never_moved_under_them(repo: Path) -> None:
    ws = Workspace(repo)
    tree = ws.add_worktree("wf1-implement-1", ws.head_commit())
    (tree / "a.py").write_text("a = 1\n")
    candidate = ws.snapshot(tree, "a")
    assert candidate is not None
    with pytest.raises(GitError, match="checked out"):
        ws.fast_forward_branch("main", candidate)


def test_a_ref_moved_meanwhile_is_not_overwritten(repo: Path) -> None:
    ws = Workspace(repo)
    head = ws.head_commit()
    ws.set_ref("refs/supervisor/wf1/candidate", head, "")
    with pytest.raises(GitError, match="Could not move"):
        ws.set_ref("refs/supervisor/wf1/candidate", head, "")  # expected absent, but present
    ws.delete_ref("refs/supervisor/wf1/candidate")
    assert "refs/supervisor" not in git(repo, "show-ref")


def _commit_file(repo: Path, ws: Workspace, branch: str, name: str, text: str) -> str:
    tree = ws.add_worktree(f"edit-{name}", ws.branch_tip(branch))
    (tree / name).write_text(text)
    sha = ws.snapshot(tree, f"edit {name}")
    ws.remove_worktree(tree)
    assert sha is not None
    ws.set_ref(f"refs/heads/{branch}", sha, None)
    return sha


def test_merging_a_task_branch_into_a_branch_that_is_not_checked_out(repo: Path) -> None:
    ws = Workspace(repo)
    git(repo, "branch", "release")
    branch, _ = ws.create_task_branch(1, "feature")
    _commit_file(repo, ws, "release", "other.py", "o = 1\n")  # release moved on meanwhile
    task_tip = _commit_file(repo, ws, branch, "feature.py", "f = 1\n")
    new = ws.merge_into("release", branch, "Merge feature")
    assert ws.branch_tip("release") == new
    assert ws.is_ancestor(task_tip, new)
    assert git(repo, "show", f"{new}:feature.py") == "f = 1\n"
    assert ws.current_branch() == "main"
    assert list(ws.worktrees_dir.iterdir()) == []


def test_a_conflicting_merge_changes_nothing_and_names_the_files(repo: Path) -> None:
    ws = Workspace(repo)
    git(repo, "branch", "release")
    branch, _ = ws.create_task_branch(1, "feature")
    _commit_file(repo, ws, "release", "app.py", "print('release')\n")
    _commit_file(repo, ws, branch, "app.py", "print('task')\n")
    before = ws.branch_tip("release")
    with pytest.raises(GitError, match=r"conflicts in: app\.py"):
        ws.merge_into("release", branch, "Merge feature")
    assert ws.branch_tip("release") == before
    assert ws.branch_exists(branch)  # the task's work is kept


def test_merging_into_the_checked_out_branch_refuses_a_dirty_checkout(repo: Path) -> None:
    ws = Workspace(repo)
    branch, _ = ws.create_task_branch(1, "feature")
    _commit_file(repo, ws, branch, "feature.py", "f = 1\n")
    (repo / "app.py").write_text("local edit\n")
    with pytest.raises(GitError, match="uncommitted changes"):
        ws.merge_into("main", branch, "Merge")
    git(repo, "checkout", "--", "app.py")
    new = ws.merge_into("main", branch, "Merge")
    assert ws.head_commit() == new and (repo / "feature.py").read_text() == "f = 1\n"
