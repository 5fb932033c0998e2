"""Candidates as data: what a worker leaves in its worktree is read, never interpreted or followed.

Real git in temporary repositories; the attacks a worker could plant are written straight into the
worktree, as the container would, and each must come to nothing on the host.
"""

from __future__ import annotations

import json
import os
import subprocess
from typing import TYPE_CHECKING

import pytest

from supervisor.context import packer
from supervisor.context.assemble import DirFiles
from supervisor.core.errors import CandidateRefusedError, GitError, SandboxError
from supervisor.guard.reading import read_regular
from supervisor.project.project_image import dependency_files
from supervisor.workspace.candidate_tree import SnapshotLimits, escapes
from supervisor.workspace.treedata import CommitFiles, Entry, list_tree, read_blobs
from supervisor.workspace.worktrees import Workspace

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
    (path / "run.sh").write_text("#!/bin/sh\n")
    (path / "run.sh").chmod(0o755)
    (path / "docs").mkdir()
    (path / "docs" / "guide.md").write_text("guide\n")
    (path / "guide").symlink_to("docs/guide.md")
    (path / ".gitattributes").write_text("*.txt text eol=crlf\n")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "first")
    return path


@pytest.fixture
def ws(repo: Path) -> Workspace:
    return Workspace(repo)


def test_a_worktree_is_written_from_blobs_with_modes_and_symlinks_and_no_eol_conversion(
    repo: Path, ws: Workspace, tmp_path: Path
) -> None:
    (repo / "notes.txt").write_bytes(b"a\nb\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "notes")
    tree = ws.add_worktree("wf1-implement-1", ws.head_commit())
    assert (tree / "notes.txt").read_bytes() == b"a\nb\n"  # stored bytes, not eol=crlf
    assert os.access(tree / "run.sh", os.X_OK)
    assert str((tree / "guide").readlink()) == "docs/guide.md"
    assert ws.snapshot(tree, "nothing changed") is None


def test_a_snapshot_records_symlinks_as_links_and_the_exec_bit_from_stat(
    repo: Path, ws: Workspace
) -> None:
    tree = ws.add_worktree("wf1-implement-1", ws.head_commit())
    (tree / "tool.py").write_text("print(1)\n")
    (tree / "tool.py").chmod(0o755)
    (tree / "readme").symlink_to("docs/guide.md")
    sha = ws.snapshot(tree, "links")
    assert sha is not None
    listing = git(repo, "ls-tree", sha)
    assert "100755 blob" in next(line for line in listing.splitlines() if "tool.py" in line)
    assert "120000 blob" in next(line for line in listing.splitlines() if "\treadme" in line)
    assert git(repo, "cat-file", "-p", f"{sha}:readme") == "docs/guide.md"


def test_gitattributes_filters_written_by_a_worker_never_run_on_the_host(
    repo: Path, ws: Workspace, tmp_path: Path
) -> None:
    marker = tmp_path / "filter-ran"
    git(repo, "config", "filter.evil.clean", f"touch {marker}; cat")  # a filter the user has
    tree = ws.add_worktree("wf1-implement-1", ws.head_commit())
    (tree / ".gitattributes").write_text("* filter=evil\n*.py text eol=crlf\n")
    (tree / "app.py").write_bytes(b"print('v2')\n")
    sha = ws.snapshot(tree, "filtered?")
    assert sha is not None
    assert not marker.exists()
    assert git(repo, "cat-file", "-p", f"{sha}:app.py") == "print('v2')\n"


def test_a_rewritten_dot_git_refuses_the_candidate_and_nothing_of_it_runs(
    repo: Path, ws: Workspace, tmp_path: Path
) -> None:
    marker = tmp_path / "fsmonitor-ran"
    tree = ws.add_worktree("wf1-implement-1", ws.head_commit())
    evil = tree / ".evilgit"
    subprocess.run(["git", "init", "-q", "--bare", str(evil)], check=True)
    hook = f"#!/bin/sh\ntouch {marker}\n"
    (evil / "hooks" / "post-commit").write_text(hook)
    (evil / "hooks" / "post-commit").chmod(0o755)
    with (evil / "config").open("a") as handle:
        handle.write(
            f"[core]\n\tbare = false\n\tfsmonitor = touch {marker}\n\thooksPath = hooks\n"
            f'\tsshCommand = touch {marker}\n[includeIf "gitdir:/"]\n\tpath = /etc/passwd\n'
        )
    (tree / ".git").unlink()
    (tree / ".git").write_text("gitdir: .evilgit\n")
    (tree / "app.py").write_text("print('evil')\n")
    with pytest.raises(CandidateRefusedError) as refused:
        ws.snapshot(tree, "tampered")
    assert refused.value.kind == "git_metadata_tampered"
    assert not marker.exists()
    ws.remove_worktree(tree)
    assert not tree.exists()
    assert not marker.exists()
    assert git(repo, "worktree", "list", "--porcelain").count("worktree ") == 1


def test_a_dot_git_directory_in_place_of_the_file_is_tampering(repo: Path, ws: Workspace) -> None:
    tree = ws.add_worktree("wf1-implement-1", ws.head_commit())
    (tree / ".git").unlink()
    subprocess.run(["git", "init", "-q", str(tree)], check=True)
    with pytest.raises(CandidateRefusedError, match="git metadata"):
        ws.snapshot(tree, "tampered")


def test_a_symlink_out_of_the_repository_is_refused_by_name(repo: Path, ws: Workspace) -> None:
    tree = ws.add_worktree("wf1-implement-1", ws.head_commit())
    (tree / "leak").symlink_to("/etc/passwd")
    (tree / "docs" / "up").symlink_to("../..")
    with pytest.raises(CandidateRefusedError) as refused:
        ws.snapshot(tree, "leaky")
    assert refused.value.kind == "symlink_escape"
    assert "leak -> /etc/passwd" in refused.value.message
    assert "docs/up -> ../.." in refused.value.message


def test_a_directory_replaced_by_a_symlink_is_never_read_through(
    repo: Path, ws: Workspace, tmp_path: Path
) -> None:
    outside = tmp_path / "host"
    outside.mkdir()
    (outside / "guide.md").write_text("HOST SECRET\n")
    tree = ws.add_worktree("wf1-implement-1", ws.head_commit())
    for child in (tree / "docs").iterdir():
        child.unlink()
    (tree / "docs").rmdir()
    (tree / "docs").symlink_to(outside)
    with pytest.raises(CandidateRefusedError, match="docs ->"):
        ws.snapshot(tree, "swapped")
    assert "HOST SECRET" not in git(repo, "log", "--all", "-p")


def test_symlink_escape_follows_the_trees_own_links() -> None:
    links = {"a": "b/..", "b": "c", "c/d": "../.."}
    assert escapes("x/y", "../../etc", {})
    assert not escapes("x/y", "../z", {})
    assert escapes("a/l", "../../x", {"a": "."})  # `a` -> `.` so a/.. is already outside
    assert escapes("c/d", "../..", links)
    assert not escapes("docs/l", "guide.md", links)
    assert escapes("loop", "loop/x", {"loop": "loop/x"})


def test_the_size_quota_and_the_cap_on_added_files(repo: Path, ws: Workspace) -> None:
    tree = ws.add_worktree("wf1-implement-1", ws.head_commit())
    (tree / "big.bin").write_bytes(b"\0" * 3_000_000)
    with pytest.raises(CandidateRefusedError, match="over the limit of 2 MB") as big:
        ws.snapshot(tree, "big", limits=SnapshotLimits(max_bytes=2 * 2**20))
    assert big.value.kind == "worktree_too_large"
    (tree / "big.bin").unlink()
    for i in range(5):
        (tree / f"f{i}.py").write_text("x\n")
    with pytest.raises(CandidateRefusedError, match="added 5 files") as many:
        ws.snapshot(tree, "many", limits=SnapshotLimits(max_files_added=4))
    assert many.value.kind == "too_many_files"
    assert ws.snapshot(tree, "ok", limits=SnapshotLimits(max_files_added=5)) is not None


def test_a_hardlink_inside_the_worktree_is_committed_as_plain_content(
    repo: Path, ws: Workspace
) -> None:
    tree = ws.add_worktree("wf1-implement-1", ws.head_commit())
    os.link(tree / "app.py", tree / "copy.py")
    sha = ws.snapshot(tree, "hardlink")
    assert sha is not None
    assert git(repo, "cat-file", "-p", f"{sha}:copy.py") == "print('v1')\n"


def test_commit_files_read_blobs_and_never_follow_symlinks(repo: Path, ws: Workspace) -> None:
    files = CommitFiles(ws.git_dir, ws.head_commit())
    assert "guide" not in files.files()
    assert files.symlinks() == ["guide"]
    assert files.read("guide") is None
    assert files.read("docs/guide.md") == b"guide\n"


def test_the_host_readers_skip_symlinks_in_a_directory(tmp_path: Path) -> None:
    (tmp_path / "real.txt").write_text("fine\n")
    (tmp_path / "leak").symlink_to("/etc/passwd")
    (tmp_path / "sub").symlink_to("/etc")
    assert read_regular(tmp_path, ["real.txt", "leak", "sub/passwd"]) == {"real.txt": b"fine\n"}
    assert DirFiles(tmp_path).read_many(["leak"]) == {}


def test_a_dependency_file_that_is_a_symlink_is_refused(repo: Path, ws: Workspace) -> None:
    (repo / "requirements.txt").symlink_to("/etc/passwd")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "linked deps")
    with pytest.raises(SandboxError, match=r"requirements\.txt"):
        dependency_files(CommitFiles(ws.git_dir, ws.head_commit()))
    with pytest.raises(SandboxError, match=r"requirements\.txt"):
        dependency_files(repo)


def test_repomix_ignores_a_repository_config_instruction_file_and_ignore_files(
    tmp_path: Path,
) -> None:
    secret = tmp_path / "host-secret.txt"
    secret.write_text("HOST-ONLY-9f3a\n")
    project = tmp_path / "project"
    project.mkdir()
    config = {
        "output": {"instructionFilePath": str(secret)},
        "ignore": {"customPatterns": ["a.py"]},
    }
    (project / "repomix.config.json").write_text(json.dumps(config))
    (project / ".repomixignore").write_text("a.py\n")
    (project / "a.py").write_text("A = 1\n")
    output = packer.pack(project, ["a.py", ".repomixignore", "repomix.config.json"])
    assert "HOST-ONLY-9f3a" not in output
    assert "A = 1" in output


def test_a_same_size_edit_is_seen_although_unchanged_files_keep_their_blobs(
    repo: Path, ws: Workspace
) -> None:
    tree = ws.add_worktree("wf1-implement-1", ws.head_commit())
    (tree / "app.py").write_text("print('v9')\n")  # as long as print('v1')
    sha = ws.snapshot(tree, "same size")
    assert sha is not None
    assert ws.changed_files(ws.head_commit(), sha) == ["app.py"]


def deep_chain(root: Path, depth: int = 22, name: str = "a" * 200) -> None:
    """`aaa…/aaa…/…/f`, longer than PATH_MAX (4096 bytes) from `root`: made with openat, as a
    worker's `mkdir x && cd x` loop would."""
    fd = os.open(root, os.O_RDONLY)
    for _ in range(depth):
        os.mkdir(name, dir_fd=fd)
        inner = os.open(name, os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = inner
    os.close(os.open("f", os.O_CREAT | os.O_WRONLY, 0o644, dir_fd=fd))
    os.close(fd)


def test_a_directory_chain_deeper_than_path_max_in_an_overlay_layer_refuses_the_candidate(
    tmp_path: Path,
) -> None:
    """The overlay reader walks the worker's upper layer: a path it cannot open is a refused
    candidate naming the path, shortened, never an OSError out of the step."""
    from types import SimpleNamespace

    from supervisor.workspace import overlay_tree

    upper = tmp_path / "view" / "upper"
    upper.mkdir(parents=True)
    deep_chain(upper)
    view = SimpleNamespace(mode="overlay", start={}, base=SimpleNamespace(sizes={}), upper=upper)
    with pytest.raises(CandidateRefusedError, match="cannot read as data") as refused:
        overlay_tree.snapshot(tmp_path, view, SnapshotLimits())  # type: ignore[arg-type]
    assert refused.value.kind == "unreadable_path"
    assert "characters)" in refused.value.message and len(refused.value.message) < 400


def test_a_directory_chain_deeper_than_path_max_in_a_full_worktree_is_no_crash(
    repo: Path, ws: Workspace
) -> None:
    """git cannot list what is past PATH_MAX: the rest of the worktree is the candidate."""
    tree = ws.add_worktree("wf1-implement-1", ws.head_commit())
    deep_chain(tree)
    (tree / "new.py").write_text("x = 1\n")
    sha = ws.snapshot(tree, "deep")
    assert sha is not None and git(repo, "show", f"{sha}:new.py") == "x = 1\n"
    ws.remove_worktree(tree)


def test_a_commits_listing_is_the_callers_own_and_a_branch_is_listed_as_it_is_now(
    repo: Path, ws: Workspace
) -> None:
    """A commit named by its object name is listed once per process; what one caller does with
    its listing never reaches another's, and a ref is read afresh each time."""
    first = git(repo, "rev-parse", "HEAD").strip()
    listing = list_tree(ws.git_dir, first)
    listing["planted.py"] = Entry("100644", "0" * 40)
    del listing["app.py"]
    again = list_tree(ws.git_dir, first)
    assert "planted.py" not in again and "app.py" in again
    assert ws.tree_hash(first) == git(repo, "rev-parse", f"{first}^{{tree}}").strip()

    (repo / "new.py").write_text("x = 1\n")
    git(repo, "add", "new.py")
    git(repo, "commit", "-q", "-m", "second")
    second = git(repo, "rev-parse", "HEAD").strip()
    assert (
        "new.py" in list_tree(ws.git_dir, "main")
        and "new.py" in CommitFiles(ws.git_dir, "main").files()
    )
    assert "new.py" not in list_tree(ws.git_dir, first)
    assert ws.tree_hash("main") == ws.tree_hash(second) != ws.tree_hash(first)


def test_questions_about_two_commits_are_answered_as_git_does_and_an_error_is_never_kept(
    repo: Path, ws: Workspace
) -> None:
    first = git(repo, "rev-parse", "HEAD").strip()
    (repo / "app.py").write_text("print('v2')\n")
    git(repo, "commit", "-qam", "second")
    second = git(repo, "rev-parse", "HEAD").strip()
    for _ in range(2):
        assert ws.changed_files(first, second) == ["app.py"]
        assert ws.diff(first, second) == git(
            repo, "diff", "--no-color", "--stat", "--patch", first, second
        )
        assert ws.is_ancestor(first, second) and not ws.is_ancestor(second, first)

    # A commit this repository does not have yet: an error each time, then the answer.
    other = repo.parent / "other"
    git(repo, "worktree", "add", "-q", "--detach", str(other), first)
    (other / "extra.py").write_text("y = 2\n")
    git(other, "add", "extra.py")
    tree = git(other, "write-tree").strip()
    body = f"tree {tree}\nparent {first}\nauthor t <t@t> 0 +0000\ncommitter t <t@t> 0 +0000\n\nx\n"
    third = hash_commit(repo, body, write=False)
    for _ in range(2):
        with pytest.raises(GitError):
            ws.changed_files(first, third)
        assert not ws.is_ancestor(first, third)
    assert hash_commit(repo, body, write=True) == third
    assert ws.changed_files(first, third) == ["extra.py"] and ws.is_ancestor(first, third)


def hash_commit(repo: Path, body: str, write: bool) -> str:
    flags = ["-w"] if write else []
    return subprocess.run(
        ["git", "-C", str(repo), "hash-object", *flags, "-t", "commit", "--stdin"],
        input=body,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


def test_blobs_read_again_are_the_same_and_a_missing_one_is_an_error_every_time(
    repo: Path, ws: Workspace
) -> None:
    app = git(repo, "rev-parse", "HEAD:app.py").strip()
    guide = git(repo, "rev-parse", "HEAD:docs/guide.md").strip()
    assert read_blobs(ws.git_dir, [app]) == {app: b"print('v1')\n"}
    both = read_blobs(ws.git_dir, [guide, app, guide])
    assert both == {guide: b"guide\n", app: b"print('v1')\n"}
    absent = "".join(reversed(app))
    for _ in range(2):
        with pytest.raises(GitError, match="missing"):
            read_blobs(ws.git_dir, [app, absent])
    assert read_blobs(ws.git_dir, []) == {}


def test_attack_a_tree_naming_a_blob_only_another_repository_has_gets_no_content(
    repo: Path, ws: Workspace, tmp_path: Path
) -> None:
    """One process, two repositories (a team worker): a blob read from the first is never
    handed to the second, whose tree names it without holding it."""
    secret = git(repo, "rev-parse", "HEAD:app.py").strip()
    assert read_blobs(ws.git_dir, [secret]) == {secret: b"print('v1')\n"}
    other = tmp_path / "other"
    other.mkdir()
    git(other, "init", "-q", "-b", "main")
    tree = subprocess.run(
        ["git", "-C", str(other), "mktree", "--missing"],
        input=f"100644 blob {secret}\tleak.py\n",
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    commit = git(other, "commit-tree", tree, "-m", "names a blob it does not have").strip()
    with pytest.raises(GitError, match="missing"):
        CommitFiles(Workspace(other).git_dir, commit).read_many(["leak.py"])
