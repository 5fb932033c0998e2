"""What a container is given of the host's files, and as which user.

A worker never runs as root: as the host user's ids, or as `nobody` when the supervisor itself
runs as root; whatever it gets (its worktree, the run folder with the prompt and login files) is
then owned by that user rather than opened to everyone.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import TYPE_CHECKING

from supervisor.core.errors import SandboxError

if TYPE_CHECKING:
    from collections.abc import Iterable

    from supervisor.workspace.overlay import View

WORKSPACE = "/workspace"
GO_BUILD_CACHE = "/opt/supervisor/go-build"
"""Where a Go project image keeps the seed of Go's build cache it made at build time, from the
standard library alone (project/dockerfile_sections.py): every container copies it to where Go
looks, in its private home ($HOME/.cache/go-build; sandbox/docker.py ENTRYPOINT), so each copy
is its container's own and goes with it."""


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


def replace_file(run_path: Path, name: str, text: str) -> None:
    """One file of a run folder written anew (a prepared run's, before its prompt), whole at
    once and owned as `private_for_container` leaves the rest."""
    fresh = run_path / f".{name}.new"
    fresh.write_text(text, encoding="utf-8")
    fresh.chmod(0o600)
    if os.getuid() == 0:
        uid, gid = (int(n) for n in container_user().split(":"))
        os.lchown(fresh, uid, gid)
    fresh.replace(run_path / name)


# What the AI CLIs load from their working directory by themselves: instructions sent to the
# model with the prompt (CLAUDE.md, AGENTS.md, GEMINI.md), settings whose hooks run commands
# and whose MCP servers start processes, skills and subagents. A worker (or the repository) that
# plants them would speak to every later step's model and run code in every later step's
# sandbox, and a forged answer is one hook away. Each adapter turns them off with its CLI's own
# switches; these masks are the second layer, for what a switch misses (codex and gemini read
# `.agents/skills`, gemini's workspace settings outrank the user's) and for the next CLI
# version's new file.
CLI_BINARIES = frozenset({"claude", "codex", "gemini"})
CLI_CONFIG_DIRS = frozenset({".claude", ".codex", ".gemini", ".agents"})
CLI_CONFIG_FILES = frozenset(
    {"CLAUDE.md", "CLAUDE.local.md", "AGENTS.md", "AGENTS.override.md", "GEMINI.md", ".mcp.json"}
)
MASKS = "masks"  # under the run folder: the empty files bound over instruction files
MASK_TMPFS = "ro,nosuid,nodev,noexec,size=4k"


def cli_config_paths(files: Iterable[str]) -> tuple[list[str], list[str]]:
    """The directories and files among a workspace's regular `files` (relative paths) that an AI
    CLI would load: any directory named in CLI_CONFIG_DIRS (masked whole, so nothing beneath it
    is listed again) and any file named in CLI_CONFIG_FILES, at any depth."""
    dirs: set[str] = set()
    masked_files: set[str] = set()
    for path in files:
        parts = path.split("/")
        for depth, name in enumerate(parts[:-1]):
            if name in CLI_CONFIG_DIRS:
                dirs.add("/".join(parts[: depth + 1]))
                break
        else:
            if parts[-1] in CLI_CONFIG_FILES:
                masked_files.add(path)
    top = {d for d in dirs if not any(d.startswith(o + "/") for o in dirs)}
    return sorted(top), sorted(masked_files)


def regular_files(worktree: Path) -> list[str]:
    """The regular files of a written-out workspace, relative, without `.git` and never through a
    symlink (a symlinked instruction file is left to the CLIs' own switches: mounting over it
    would mount over whatever it points at)."""
    found: list[str] = []
    for root, dirs, names in os.walk(worktree):
        if root == str(worktree) and ".git" in dirs:
            dirs.remove(".git")
        rel = os.path.relpath(root, worktree)
        prefix = "" if rel == "." else rel + "/"
        found += [
            prefix + n for n in names if Path(root, n).is_file() and not Path(root, n).is_symlink()
        ]
    return found


def runs_ai_cli(argv: list[str]) -> bool:
    """A worker run (the command is an AI CLI), as opposed to a gate or a tool, which see the
    workspace as it is."""
    return bool(argv) and Path(argv[0]).name in CLI_BINARIES


def cli_config_masks(
    argv: list[str], worktree: Path, view: View | None, run_path: Path
) -> tuple[dict[str, dict[str, str]], dict[str, str]]:
    """For a worker run: an empty read-only file bound over every instruction or MCP file and an
    empty read-only tmpfs over every CLI settings directory the workspace holds (binds, tmpfs),
    read from the copy-on-write view's entries when it is one. Only what exists is masked: a
    mount point Docker had to create would appear in the worker's candidate."""
    if not runs_ai_cli(argv):
        return {}, {}
    files = (
        [path for path, entry in view.start.items() if entry.mode.startswith("100")]
        if view is not None
        else regular_files(worktree)
    )
    dirs, masked = cli_config_paths(files)
    if not masked and not dirs:
        return {}, {}
    # One empty file per mask: a bind is keyed by its source, so a shared one would mask one path.
    folder = run_path / MASKS
    folder.mkdir(mode=0o755, exist_ok=True)
    binds: dict[str, dict[str, str]] = {}
    for number, path in enumerate(masked):
        empty = folder / str(number)
        empty.touch(mode=0o444)
        empty.chmod(0o444)  # readable by the container's user, whoever it is; it is empty
        binds[str(empty)] = {"bind": f"{WORKSPACE}/{path}", "mode": "ro"}
    return binds, {f"{WORKSPACE}/{path}": MASK_TMPFS for path in dirs}
