"""Git workspace: task branches and per-step worktrees that never touch the user's checkout."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from supervisor.core.errors import GitError, RepoError
from supervisor.workspace.worktrees import (
    Workspace,
    find_repo_root,
    locate,
    wait_for_deletions,
)


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
    assert locate(repo / "pkg") == (repo.resolve(), (repo / ".git").resolve())


def test_a_linked_worktree_is_its_own_root_over_the_repositorys_git_dir(
    repo: Path, tmp_path: Path
) -> None:
    linked = tmp_path / "linked"
    git(repo, "worktree", "add", "-q", "--detach", str(linked))
    (linked / "pkg").mkdir()
    root, git_dir = locate(linked / "pkg")
    assert (root, git_dir) == (linked.resolve(), (repo / ".git").resolve())
    assert Workspace(root, git_dir).git_dir == Workspace(root).git_dir


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


@pytest.mark.parametrize(
    "task",
    [
        "\x1b[31mFix\x1b[0m the \x1b[1;4mlogin\x1b[m bug",  # colours (CSI)
        "\x1b]8;;https://x.test/31m\x07Fix\x1b]8;;\x1b\\ the login bug",  # a link (OSC)
        "\x1b]0;title 99\x07Fix the \x9b32mlogin\x9bm bug\x1b(B",  # a title, 8-bit CSI
        "Fix\x07 the\x00 login\x7f bug\x1b[",  # lone controls, a cut-off sequence
    ],
    ids=["csi", "osc-link", "title-c1", "controls"],
)
def test_a_task_with_escape_sequences_gives_a_branch_of_its_words(repo: Path, task: str) -> None:
    """Pasted coloured text, a terminal link or a title escape leaves none of its codes in
    the branch (`ai/1-31m-fix-0m-...`): the sequences go whole, before the words are joined."""
    branch, _ = Workspace(repo).create_task_branch(1, task)
    assert branch == "ai/1-fix-the-login-bug"


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


def many_files(repo: Path, count: int) -> str:
    """A commit with `count` files in nested directories, one of them executable."""
    for i in range(count):
        target = repo / "pkg" / f"d{i % 10}" / f"m{i}.py"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(f"v = {i}\n")
    (repo / "run.sh").write_text("#!/bin/sh\n")
    (repo / "run.sh").chmod(0o755)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "many")
    return git(repo, "rev-parse", "HEAD").strip()


def admin_dirs(repo: Path) -> list[str]:
    admin = repo / ".git" / "worktrees"
    return sorted(p.name for p in admin.iterdir()) if admin.exists() else []


def test_a_worktree_is_filled_outside_the_lock_so_another_is_created_meanwhile(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One step's checkout (thousands of files in a big repository) must not hold up another's:
    while the first worktree's files are being written, a second is created and removed."""
    import threading

    from supervisor.workspace import worktrees as workspace_module

    head = many_files(repo, 50)
    ws = Workspace(repo)
    real_populate = workspace_module._populate
    first_populating = threading.Event()
    second_done = threading.Event()
    seen: dict[str, bool] = {}

    def populate_waiting_for_the_second(git_dir: Path, commit: str, path: Path) -> object:
        if path.name == "wf1-implement-c1-1":
            first_populating.set()
            seen["second finished meanwhile"] = second_done.wait(timeout=20)
        return real_populate(git_dir, commit, path)

    monkeypatch.setattr(workspace_module, "_populate", populate_waiting_for_the_second)
    results: dict[str, Path] = {}
    first = threading.Thread(
        target=lambda: results.update(one=ws.add_worktree("wf1-implement/c1-1", head))
    )
    first.start()
    assert first_populating.wait(timeout=20)
    second = ws.add_worktree("wf1-implement/c2-1", head)
    assert (second / "pkg" / "d3" / "m13.py").read_text() == "v = 13\n"
    ws.remove_worktree(second)
    second_done.set()
    first.join(timeout=30)
    assert seen == {"second finished meanwhile": True}
    assert (results["one"] / "pkg" / "d7" / "m47.py").read_text() == "v = 47\n"


def test_a_removal_returns_at_once_and_the_files_are_deleted_in_the_background(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A finished component's slot does not wait for its 10,000 files to be deleted: the
    worktree is moved aside and forgotten by git at once, its files go in the background."""
    import threading

    from supervisor.workspace import worktrees as workspace_module

    head = many_files(repo, 20)
    ws = Workspace(repo)
    old = ws.add_worktree("wf1-implement-c1-1", head)
    real_delete = workspace_module._delete_tree
    release = threading.Event()

    def delete_when_released(path: Path) -> None:
        release.wait(timeout=20)
        real_delete(path)

    monkeypatch.setattr(workspace_module, "_delete_tree", delete_when_released)
    ws.remove_worktree(old)
    assert not old.exists()
    assert admin_dirs(repo) == []
    assert len(list(ws.trash_dir.iterdir())) == 1  # still being deleted
    again = ws.add_worktree("wf1-implement-c1-1", head)  # the name is free at once
    assert (again / "pkg" / "d0" / "m10.py").read_text() == "v = 10\n"
    release.set()
    workspace_module.wait_for_deletions(timeout=30)
    assert list(ws.trash_dir.iterdir()) == []
    assert git(repo, "status", "--porcelain") == ""  # the trash is excluded like the worktrees


def test_files_a_killed_run_left_to_delete_go_with_the_stale_worktrees(repo: Path) -> None:
    ws = Workspace(repo)
    left = ws.trash_dir / "wf1-implement-c1-1-x" / "wf1-implement-c1-1"
    (left / "pkg").mkdir(parents=True)
    (left / "pkg" / "half.py").write_text("partial")
    (left / "pkg" / "link").symlink_to(repo / "app.py")
    Workspace(repo).remove_stale_worktrees()
    assert not ws.trash_dir.exists()
    assert (repo / "app.py").read_text() == "print('v1')\n"  # the link was not followed


def test_parallel_worktrees_are_exact_detached_and_leave_nothing_behind(repo: Path) -> None:
    """Eight worktrees of two different commits, created and removed from eight threads at
    once: each holds exactly its commit's files (content, executable bit), sits on a detached
    HEAD at that commit, and removal leaves no directory, admin dir or registration."""
    from concurrent.futures import ThreadPoolExecutor

    first = git(repo, "rev-parse", "HEAD").strip()
    second = many_files(repo, 200)
    ws = Workspace(repo)
    before = ws.user_checkout_fingerprint()
    commits = {f"wf1-implement/c{i}-1": (first, second)[i % 2] for i in range(8)}
    with ThreadPoolExecutor(max_workers=8) as pool:
        made = pool.map(ws.add_worktree, commits, commits.values())
        trees = dict(zip(commits, made, strict=True))
    for name, tree in trees.items():
        commit = commits[name]
        expected = git(repo, "ls-tree", "-r", "--name-only", commit).split()
        on_disk = sorted(
            str(p.relative_to(tree)) for p in tree.rglob("*") if p.is_file() and p.name != ".git"
        )
        assert on_disk == sorted(expected)
        for rel in expected[:: max(1, len(expected) // 20)]:
            assert (tree / rel).read_text() == git(repo, "show", f"{commit}:{rel}")
        assert (tree / "app.py").read_text() == "print('v1')\n"
        if commit == second:
            assert os.access(tree / "run.sh", os.X_OK)
            assert not os.access(tree / "pkg" / "d1" / "m1.py", os.X_OK)
        admin = Path((tree / ".git").read_text().split("gitdir: ")[1].strip())
        assert (admin / "HEAD").read_text().strip() == commit  # detached: a commit, not a ref
        assert ws.snapshot(tree, "unchanged") is None
    assert len(admin_dirs(repo)) == 8
    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(ws.remove_worktree, trees.values()))
    wait_for_deletions(timeout=60)
    assert list(ws.worktrees_dir.iterdir()) == []
    assert list(ws.trash_dir.iterdir()) == []
    assert admin_dirs(repo) == []
    assert git(repo, "worktree", "list", "--porcelain").count("worktree ") == 1
    assert ws.user_checkout_fingerprint() == before


def test_a_trash_folder_that_is_a_symlink_is_never_written_through(
    repo: Path, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "precious.txt").write_text("keep\n")
    ws = Workspace(repo)
    ws.state_dir.mkdir(exist_ok=True)
    ws.trash_dir.symlink_to(elsewhere)
    tree = ws.add_worktree("wf1-implement-1", ws.head_commit())
    ws.remove_worktree(tree)
    wait_for_deletions(timeout=30)
    assert not tree.exists()
    assert [p.name for p in elsewhere.iterdir()] == ["precious.txt"]
    ws.remove_stale_worktrees()
    assert not ws.trash_dir.is_symlink()
    assert (elsewhere / "precious.txt").read_text() == "keep\n"
