"""Copy-on-write workspaces (supervisor/workspace/overlay.py) on the real engine: a worker that
rewrites its
workspace gets exactly the candidate a fully written worktree gives (or the same refusal), the
shared base is never changed, and an overlay that cannot be mounted falls back to full trees."""

from __future__ import annotations

import hashlib
import os
import subprocess
from typing import TYPE_CHECKING

import pytest
from e2e_support import IMAGE, require_sandbox

from supervisor.core.errors import CandidateRefusedError
from supervisor.sandbox.docker import DockerSandbox, RunSpec
from supervisor.workspace import overlay
from supervisor.workspace.candidate_tree import SnapshotLimits
from supervisor.workspace.worktrees import Workspace, wait_for_deletions

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def sandbox() -> Iterator[DockerSandbox]:
    require_sandbox()
    box = DockerSandbox(IMAGE, "supervisor-egress-test")
    yield box
    box.close()


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
        check=True,
        capture_output=True,
        text=True,
    ).stdout


def make_repo(root: Path) -> tuple[Path, str]:
    root.mkdir()
    git(root, "init", "-q")
    for i in range(40):
        target = root / "pkg" / f"d{i % 4}" / f"m{i}.py"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(f"x = {i}\n")
    (root / "docs").mkdir()
    (root / "docs" / "a.md").write_text("a\n")
    (root / "g.txt").write_text("g\n")
    (root / ".gitignore").write_text("*.log\nbuild/\n")
    (root / "link").symlink_to("g.txt")
    (root / "run.sh").write_text("#!/bin/sh\n")
    (root / "run.sh").chmod(0o755)
    git(root, "add", "-A")
    git(root, "commit", "-qm", "init")
    return root, git(root, "rev-parse", "HEAD").strip()


def step(
    repo: Path,
    sandbox: DockerSandbox,
    commit: str,
    script: str,
    *,
    cow: bool,
    limits: SnapshotLimits | None = None,
) -> tuple[str, str]:
    """One scripted worker run in the real sandbox; ("tree", hash), ("same", "") when nothing
    changed, or ("refused", kind)."""
    ws = Workspace(repo)
    if cow:
        ws.use_overlay()
    path = ws.add_worktree(f"step-{'cow' if cow else 'full'}", commit)
    assert (overlay.view_for(path) is not None) == cow
    try:
        result = sandbox.run(RunSpec(argv=["sh", "-c", script], worktree=path, timeout=120))
        assert result.exit_code == 0, result.stderr
        try:
            sha = ws.snapshot(path, "step", limits=limits)
        except CandidateRefusedError as e:
            return "refused", e.kind
        return ("tree", git(repo, "rev-parse", f"{sha}^{{tree}}").strip()) if sha else ("same", "")
    finally:
        ws.remove_worktree(path)
        wait_for_deletions()


WORKERS = {
    "modify, delete, create": "echo more >> docs/a.md; rm g.txt; mkdir -p new/deep; "
    "echo n > new/deep/x.py",
    "rename files and directories": "mv pkg/d1/m1.py pkg/d1/renamed.py; mv pkg/d2 pkg/moved; "
    "mv docs/a.md top.md",
    "delete a directory and make it again": "rm -rf pkg/d3; mkdir pkg/d3; echo z > pkg/d3/only.py",
    "symlinks, a FIFO, a hardlink, a mode change": "ln -s ../g.txt docs/l; mkfifo pipe; "
    "ln docs/a.md hard.md; chmod -x run.sh; chmod +x docs/a.md; rm link; ln -s docs link",
    "a file becomes a directory and back": "rm g.txt; mkdir g.txt; echo in > g.txt/f; "
    "rm -rf pkg/d0; echo flat > pkg/d0",
    "ignored files and a new .gitignore": "echo y > x.log; mkdir build; echo b > build/o; "
    "mkdir -p gen; printf 'skip*\\n' > gen/.gitignore; echo s > gen/skipme; echo k > gen/keep",
    "a nested repository": "mkdir -p vendor/lib/.git/objects vendor/lib/.git/refs; "
    "echo 'ref: refs/heads/main' > vendor/lib/.git/HEAD; echo v > vendor/lib/code.py; "
    "echo w > vendor/free.py",
    "a symlink out of the repository": "ln -s /etc/passwd docs/secret",
    "a FIFO over a tracked file": "rm docs/a.md; mkfifo docs/a.md",
    "a name with a newline and a comma": "printf x > \"$(printf 'new\\nline,')\"",
    "nothing": "true",
}


@pytest.mark.parametrize("worker", list(WORKERS))
def test_a_worker_gets_the_same_candidate_from_a_copy_on_write_workspace_as_from_a_full_one(
    tmp_path: Path, sandbox: DockerSandbox, worker: str
) -> None:
    repo, commit = make_repo(tmp_path / "repo")
    full = step(repo, sandbox, commit, WORKERS[worker], cow=False)
    cow = step(repo, sandbox, commit, WORKERS[worker], cow=True)
    assert cow == full
    expected = {
        "a symlink out of the repository": ("refused", "symlink_escape"),
        "nothing": ("same", ""),
    }
    if worker in expected:
        assert cow == expected[worker]
    else:
        assert cow[0] == "tree"


@pytest.mark.parametrize(
    ("limits", "kind"),
    [
        (SnapshotLimits(max_bytes=1000), "worktree_too_large"),
        (SnapshotLimits(max_files_added=2), "too_many_files"),
    ],
)
def test_a_copy_on_write_workspace_over_a_limit_is_refused_like_a_full_one(
    tmp_path: Path, sandbox: DockerSandbox, limits: SnapshotLimits, kind: str
) -> None:
    repo, commit = make_repo(tmp_path / "repo")
    grow = "head -c 2000 /dev/zero > big.bin; echo 1 > n1; echo 2 > n2"
    assert step(repo, sandbox, commit, "true", cow=True, limits=limits) == ("same", "")
    full = step(repo, sandbox, commit, grow, cow=False, limits=limits)
    assert step(repo, sandbox, commit, grow, cow=True, limits=limits) == full == ("refused", kind)


LISTING = (
    "find . -path ./.git -prune -o \\( -type f -o -type l \\) -print | sort | while read f; do "
    'if [ -L "$f" ]; then echo "$f -> $(readlink "$f")"; '
    'else echo "$f $(stat -c %a "$f") $(sha1sum < "$f" | cut -c1-12)"; fi; done'
)


def listing(repo: Path, sandbox: DockerSandbox, ws: Workspace, commit: str) -> str:
    path = ws.add_worktree(f"look-{os.urandom(3).hex()}", commit)
    try:
        return sandbox.run(RunSpec(argv=["sh", "-c", LISTING], worktree=path, timeout=60)).stdout
    finally:
        ws.remove_worktree(path)


def test_a_step_from_a_later_commit_shares_the_base_and_sees_exactly_its_commit(
    tmp_path: Path, sandbox: DockerSandbox
) -> None:
    repo, first = make_repo(tmp_path / "repo")
    (repo / "docs" / "a.md").write_text("changed\n")
    subprocess.run(["rm", "-rf", str(repo / "pkg" / "d1"), str(repo / "g.txt")], check=True)
    (repo / "g.txt").mkdir()
    (repo / "g.txt" / "inside").write_text("i\n")
    (repo / "link").unlink()
    (repo / "link").symlink_to("docs/a.md")
    (repo / "run.sh").chmod(0o644)
    (repo / "added.py").write_text("new\n")
    subprocess.run(
        ["rm", "-rf", str(repo / "pkg" / "d2"), str(repo / "pkg" / "d3" / "m3.py")], check=True
    )
    (repo / "pkg" / "d2").write_text("a directory became this file\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "later")
    later = git(repo, "rev-parse", "HEAD").strip()
    cow = Workspace(repo)
    cow.use_overlay()
    first_view = cow.add_worktree("first", first)  # keeps the first commit's base in use
    seen = listing(repo, sandbox, cow, later)
    bases = sorted(p.name for p in (repo / ".supervisor" / "bases" / f"pid{os.getpid()}").iterdir())
    assert bases == [first]  # the later commit is the first one's base plus a seeded layer
    assert seen == listing(repo, sandbox, Workspace(repo), later)
    assert "./pkg/d1/" not in seen and "./g.txt/inside" in seen and "./link -> docs/a.md" in seen
    assert "./pkg/d2 644" in seen and "./pkg/d3/m3.py" not in seen and "./pkg/d3/m7.py" in seen
    assert step(repo, sandbox, later, "true", cow=True) == ("same", "")
    cow.remove_worktree(first_view)


def test_the_shared_base_is_never_changed_and_never_reachable_from_the_sandbox(
    tmp_path: Path, sandbox: DockerSandbox
) -> None:
    repo, commit = make_repo(tmp_path / "repo")
    ws = Workspace(repo)
    ws.use_overlay()
    path = ws.add_worktree("attacker", commit)
    view = overlay.view_for(path)
    assert view is not None
    base = view.base.path

    def fingerprint() -> str:
        digest = hashlib.sha256()
        for root, dirs, files in sorted(os.walk(base)):
            for name in sorted(dirs + files):
                info = os.lstat(f"{root}/{name}")
                digest.update(f"{root}/{name} {info.st_mode} {info.st_mtime_ns}".encode())
        return digest.hexdigest()

    before = fingerprint()
    attack = (
        f"id -u; rm -rf pkg docs; echo x > g.txt; chmod 777 .; ls {base} 2>&1; "
        f"echo owned > {base}/g.txt 2>&1; grep -c lowerdir /proc/mounts"
    )
    result = sandbox.run(RunSpec(argv=["sh", "-c", attack], worktree=path, timeout=60))
    assert result.stdout.splitlines()[0] != "0"  # never root
    assert "No such file or directory" in result.stdout  # the base path is not in the container
    assert fingerprint() == before
    assert (base / "g.txt").read_text() == "g\n"
    assert (base / "docs" / "a.md").is_file()
    sha = ws.snapshot(path, "attack")
    assert sha is not None
    assert git(repo, "ls-tree", "-r", "--name-only", sha).split() == [
        ".gitignore",
        "g.txt",
        "link",
        "run.sh",
    ]
    ws.remove_worktree(path)


def test_an_overlay_that_cannot_be_mounted_falls_back_to_full_worktrees_and_says_why(
    tmp_path: Path, sandbox: DockerSandbox
) -> None:
    repo, commit = make_repo(tmp_path / "repo")
    told: list[str] = []
    ws = Workspace(repo)
    ws.use_overlay(told.append)
    path = ws.add_worktree("doomed", commit)
    view = overlay.view_for(path)
    assert view is not None
    subprocess.run(["rm", "-rf", str(view.base.path)], check=True)  # its lower layer is gone
    result = sandbox.run(
        RunSpec(argv=["sh", "-c", "cat docs/a.md; echo b >> docs/a.md"], worktree=path)
    )
    assert result.exit_code == 0 and result.stdout == "a\n"  # the full tree, written from git
    assert len(told) == 1 and "overlay" in told[0]
    sha = ws.snapshot(path, "after fallback")
    assert sha is not None and git(repo, "show", f"{sha}:docs/a.md") == "a\nb\n"
    ws.remove_worktree(path)
    after = ws.add_worktree("next", commit)
    assert overlay.view_for(after) is None  # later steps go straight to full worktrees
    ws.remove_worktree(after)


def test_a_repository_path_that_mount_options_cannot_carry_gets_full_worktrees_and_says_why(
    tmp_path: Path,
) -> None:
    repo, commit = make_repo(tmp_path / "my,repo")
    told: list[str] = []
    ws = Workspace(repo)
    ws.use_overlay(told.append)
    path = ws.add_worktree("step", commit)
    assert overlay.view_for(path) is None
    assert (path / "docs" / "a.md").read_text() == "a\n"  # written in full, the old way
    assert len(told) == 1 and "','" in told[0]
    ws.remove_worktree(path)


def test_a_base_stays_for_the_next_steps_and_goes_with_the_next_start_never_while_in_use(
    tmp_path: Path,
) -> None:
    repo, commit = make_repo(tmp_path / "repo")
    bases = repo / ".supervisor" / "bases" / f"pid{os.getpid()}"
    ws = Workspace(repo)
    ws.use_overlay()
    path = ws.add_worktree("step", commit)
    overlay.remove_bases(ws.state_dir)
    assert (bases / commit / "docs" / "a.md").is_file()  # in use: kept
    ws.remove_worktree(path)
    again = ws.add_worktree("again", commit)  # the next step reuses it
    assert [p.name for p in bases.iterdir()] == [commit]
    assert git(repo, "status", "--porcelain") == ""  # bases are excluded like worktrees
    ws.remove_worktree(again)
    wait_for_deletions()
    Workspace(repo).remove_stale_worktrees()  # what `start-task` and `resume` do first
    assert not bases.parent.exists()
