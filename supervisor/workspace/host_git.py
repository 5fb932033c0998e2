"""git in the user's own repository, never in a worker's worktree: every call with hooks,
fsmonitor and repository-controlled config off (treedata.SAFE_CONFIG), and a failure turned into
a GitError naming the command. `find_repo_root` is where every command finds its repository."""

from __future__ import annotations

from pathlib import Path

from supervisor import process
from supervisor.errors import GitError, RepoError, ToolFailedError
from supervisor.workspace import treedata

STATE_DIR = ".supervisor"
"""The supervisor's own folder in the repository: state, locks, views, logs."""

IDENTITY = ["-c", "user.name=supervisor", "-c", "user.email=supervisor@localhost"]


def _git(cwd: Path, *args: str, check: bool = True, timeout: float = 120) -> process.Completed:
    """git in the user's own repository (never in a worker's worktree), hooks and fsmonitor off."""
    try:
        return process.run(
            ["git", *treedata.SAFE_CONFIG, "-C", str(cwd), *args],
            check=check,
            timeout=timeout,
        )
    except ToolFailedError as e:
        raise GitError(
            f"git {' '.join(args[:3])} failed in {cwd}: {e.output.strip()[-1500:]}",
            "Check the repository's state with `git status`; nothing was changed by the failed "
            "command.",
        ) from e


def find_repo_root(path: Path) -> Path:
    path = path.resolve()
    if not path.exists():
        raise RepoError(f"{path} does not exist.", "Pass an existing directory with --repo.")
    result = _git(path, "rev-parse", "--show-toplevel", check=False)
    if result.returncode != 0:
        raise RepoError(
            f"{path} is not a git repository.",
            "Run the command inside a git repository, pass --repo PATH, or create one with "
            "`git init`.",
        )
    root = Path(result.stdout.strip())
    if _git(root, "rev-parse", "--verify", "-q", "HEAD", check=False).returncode != 0:
        raise RepoError(
            f"The repository {root} has no commits yet, so there is nothing to branch from.",
            "Make a first commit (git add -A && git commit -m 'Initial commit').",
        )
    return root
