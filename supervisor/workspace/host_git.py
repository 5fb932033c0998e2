"""git in the user's own repository, never in a worker's worktree: every call with hooks,
fsmonitor and repository-controlled config off (treedata.SAFE_CONFIG), and a failure turned into
a GitError naming the command. `find_repo_root` is where every command finds its repository."""

from __future__ import annotations

import threading
from collections import OrderedDict
from pathlib import Path

from supervisor.core import process
from supervisor.core.errors import GitError, RepoError, ToolFailedError
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


def immutable(*revisions: str) -> bool:
    """Whether every revision is a full object name: what git answers about them never changes,
    so it is asked once per process (`_git_once`)."""
    return all(treedata.OBJECT_NAME.fullmatch(r) for r in revisions)


_ONCE: OrderedDict[tuple[Path, tuple[str, ...]], process.Completed] = OrderedDict()
_ONCE_SIZE = 256
_ONCE_MAX_BYTES = 1 << 20  # a larger answer (a huge diff) is asked again
_ONCE_LOCK = threading.Lock()


def _git_once(cwd: Path, *args: str, answers: tuple[int, ...] = (0,)) -> process.Completed:
    """`_git` for a question about immutable objects only (`immutable`): a step asks the same
    ones several times (its diff for the prompt, for its pack, for its checks). Only an exit
    code among `answers` is kept: an error (a missing object, a lock) is asked again."""
    key = (cwd, args)
    with _ONCE_LOCK:
        if key in _ONCE:
            _ONCE.move_to_end(key)
            return _ONCE[key]
    done = _git(cwd, *args, check=False)
    if done.returncode in answers and len(done.stdout) <= _ONCE_MAX_BYTES:
        with _ONCE_LOCK:
            _ONCE[key] = done
            while len(_ONCE) > _ONCE_SIZE:
                _ONCE.popitem(last=False)
    return done


def find_repo_root(path: Path) -> Path:
    return locate(path)[0]


def locate(path: Path) -> tuple[Path, Path]:
    """The repository `path` is in: its root and its (common) git dir, in one git call; a clear
    error when it is none, or has no commit to branch from."""
    path = path.resolve()
    if not path.exists():
        raise RepoError(f"{path} does not exist.", "Pass an existing directory with --repo.")
    result = _git(
        path, "rev-parse", "--show-toplevel", "--git-common-dir", "--verify", "-q", "HEAD",
        check=False,
    )  # fmt: skip
    lines = result.stdout.splitlines()
    if result.returncode not in (0, 1) or len(lines) < 2:
        raise RepoError(
            f"{path} is not a git repository.",
            "Run the command inside a git repository, pass --repo PATH, or create one with "
            "`git init`.",
        )
    root = Path(lines[0])
    if result.returncode != 0 or len(lines) < 3:
        raise RepoError(
            f"The repository {root} has no commits yet, so there is nothing to branch from.",
            "Make a first commit (git add -A && git commit -m 'Initial commit').",
        )
    return root, (path / lines[1]).resolve()
