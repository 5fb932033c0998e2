"""What a container is given of the host's files, and as which user.

A worker never runs as root: as the host user's ids, or as `nobody` when the supervisor itself
runs as root; whatever it gets (its worktree, the run folder with the prompt and login files) is
then owned by that user rather than opened to everyone.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from supervisor.errors import SandboxError

WORKSPACE = "/workspace"


def container_user() -> str:
    """The host user's ids, or `nobody` when the host user is root (workers never run as root)."""
    uid = os.getuid()
    return f"{uid}:{os.getgid()}" if uid != 0 else "65534:65534"


def write_private_home(home: Path, files: dict[str, bytes]) -> None:
    """Login files (OAuth tokens) are readable by the container's user only: 0400 files in 0700
    directories, owned by that user when it differs from ours; never world-readable, never in
    the worktree. The container copies them into its own tmpfs home."""
    if not files:
        return
    uid, gid = (int(n) for n in container_user().split(":"))
    for rel, content in files.items():
        if Path(rel).is_absolute() or ".." in Path(rel).parts:
            raise SandboxError(
                f"Login file '{rel}' is not a path inside the home directory.",
                "List login_files relative to your home directory, without '..'.",
            )
        target = home / rel
        target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o400)
        with os.fdopen(fd, "wb") as handle:
            handle.write(content)
    for root, dirs, names in os.walk(home):
        for path in [Path(root), *(Path(root, d) for d in dirs), *(Path(root, n) for n in names)]:
            if os.getuid() == 0:
                os.chown(path, uid, gid, follow_symlinks=False)
            path.chmod(0o700 if path.is_dir() else 0o400)


def own_for_container(worktree: Path) -> None:
    """When the container runs as `nobody`, give it the worktree (ownership, not world access);
    its `.git` file stays the host's, and is mounted read-only besides. A directory with a `.git`
    directory is a repository's own checkout (only tests and tools mount one): its root and its
    `.git` keep their owner, or git would no longer trust the repository."""
    if os.getuid() != 0:
        return
    uid, gid = (int(n) for n in container_user().split(":"))
    for root, dirs, files in os.walk(worktree):  # os.walk does not descend into symlinks
        if root == str(worktree) and ".git" in dirs:
            dirs.remove(".git")
        for name in [*dirs, *files]:
            if root == str(worktree) and name == ".git":
                continue
            with contextlib.suppress(OSError):
                os.lchown(Path(root, name), uid, gid)
    if not (worktree / ".git").is_dir():
        os.lchown(worktree, uid, gid)


def git_file_read_only(worktree: Path) -> dict[str, dict[str, str]]:
    """A worktree's `.git` file, mounted over itself read-only: the worker can neither rewrite
    nor replace it (the host checks it anyway before reading the worktree)."""
    dot_git = worktree / ".git"
    if dot_git.is_symlink() or not dot_git.is_file():
        return {}
    return {str(dot_git): {"bind": f"{WORKSPACE}/.git", "mode": "ro"}}


def private_for_container(run_path: Path) -> None:
    """The run folder holds the prompt and login files: 0700/0600, and owned by the container's
    user when that is not ours (ownership, never world access)."""
    uid, gid = (int(n) for n in container_user().split(":"))
    for root, dirs, files in os.walk(run_path):
        for name in dirs:
            Path(root, name).chmod(0o700)
        for name in files:
            Path(root, name).chmod(0o600)
        if os.getuid() == 0:
            for name in [*dirs, *files]:
                os.lchown(Path(root, name), uid, gid)
    run_path.chmod(0o700)
    if os.getuid() == 0:
        os.lchown(run_path, uid, gid)
