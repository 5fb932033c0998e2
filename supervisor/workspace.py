"""Git plumbing for isolated steps: task branches, per-step worktrees, candidate commits.

The user's checkout (current branch, index, working tree, untracked files) is never touched:
branches are created with `git branch`, refs move with `git update-ref` and its old-value check,
and workers only ever see a detached worktree under `.supervisor/worktrees/`.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
import shutil
import threading
from pathlib import Path

from supervisor import process
from supervisor.errors import GitError, MergeConflictError, RepoError, ToolFailedError

STATE_DIR = ".supervisor"
ZERO_SHA = "0" * 40
# What the supervisor writes while it runs, as opposed to the configuration a team commits.
STATE_ENTRIES = ("state.db*", "*.lock", "worktrees/", "probe/", "init.json")
_WORKTREE_LOCK = threading.RLock()
IDENTITY = ["-c", "user.name=supervisor", "-c", "user.email=supervisor@localhost"]


def _git(cwd: Path, *args: str, check: bool = True, timeout: float = 120) -> process.Completed:
    """git with `safe.directory=*`: worktree files may belong to the container's user."""
    try:
        return process.run(
            ["git", "-c", "safe.directory=*", "-C", str(cwd), *args],
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


class Workspace:
    def __init__(self, repo: Path) -> None:
        self.repo = repo
        self.state_dir = repo / STATE_DIR
        self.worktrees_dir = self.state_dir / "worktrees"
        self._exclude_state_dir()

    # -- reading ---------------------------------------------------------------------------

    def head_commit(self) -> str:
        return _git(self.repo, "rev-parse", "HEAD").stdout.strip()

    def current_branch(self) -> str | None:
        result = _git(self.repo, "symbolic-ref", "-q", "--short", "HEAD", check=False)
        return result.stdout.strip() or None

    def branch_exists(self, branch: str) -> bool:
        ref = f"refs/heads/{branch}"
        return _git(self.repo, "show-ref", "--verify", "-q", ref, check=False).returncode == 0

    def branch_tip(self, branch: str) -> str:
        return _git(
            self.repo, "rev-parse", "--verify", f"refs/heads/{branch}^{{commit}}"
        ).stdout.strip()

    def is_ancestor(self, a: str, b: str) -> bool:
        return _git(self.repo, "merge-base", "--is-ancestor", a, b, check=False).returncode == 0

    def merge_base(self, a: str, b: str) -> str | None:
        out = _git(self.repo, "merge-base", a, b, check=False)
        return (out.stdout.strip() or None) if out.returncode == 0 else None

    def changed_files(self, base: str, head: str) -> list[str]:
        out = _git(self.repo, "diff", "--name-only", "--no-renames", base, head).stdout
        return sorted(line for line in out.splitlines() if line)

    def diff(
        self, base: str, head: str, max_bytes: int = 200_000, paths: list[str] | None = None
    ) -> str:
        only = ["--", *paths] if paths else []
        text = _git(self.repo, "diff", "--no-color", "--stat", "--patch", base, head, *only).stdout
        if len(text) > max_bytes:
            return text[:max_bytes] + f"\n[... diff truncated at {max_bytes} bytes ...]\n"
        return text

    def log(self, base: str, head: str, limit: int = 50) -> list[str]:
        out = _git(self.repo, "log", "--oneline", f"-{limit}", f"{base}..{head}").stdout
        return out.splitlines()

    def is_clean(self) -> bool:
        return _git(self.repo, "status", "--porcelain", "--untracked-files=no").stdout == ""

    def merge_into(self, base_branch: str, branch: str, message: str) -> str:
        """Merge `branch` into `base_branch` and return the new tip; conflicts change nothing.

        The merge commit is made without a working tree; the base branch then moves by
        fast-forward, through the user's own checkout (`merge --ff-only`) when it is checked out
        there."""
        base_tip = self.branch_tip(base_branch)
        tip = self.branch_tip(branch)
        if self.is_ancestor(tip, base_tip):
            return base_tip  # already merged
        checked_out = self.current_branch() == base_branch
        if checked_out and not self.is_clean():
            raise GitError(
                f"{base_branch} is checked out with uncommitted changes; merging now would mix "
                "them with the task's.",
                "Commit or stash your changes, then run complete-task again.",
            )
        try:
            new = self.merge_commits(base_tip, tip, message)
        except MergeConflictError as e:
            raise MergeConflictError(
                f"Merging {branch} into {base_branch} conflicts in: {', '.join(e.files)}.",
                f"Merge by hand (git merge {branch}); the task branch is kept as it is.",
                files=e.files,
            ) from e
        if checked_out:
            _git(self.repo, "merge", "--ff-only", new)
        else:
            self.set_ref(f"refs/heads/{base_branch}", new, base_tip)
        return new

    def merge_commits(self, base: str, other: str, message: str) -> str:
        """The commit that merges `other` into `base`, made without any working tree.

        `git merge-tree --write-tree` works on objects only, so a crash mid-merge leaves nothing
        half-written: at worst an unreferenced commit that `git gc` collects."""
        if self.is_ancestor(other, base):
            return base
        if self.is_ancestor(base, other):
            return other
        result = _git(
            self.repo,
            "merge-tree",
            "--write-tree",
            "--name-only",
            "--no-messages",
            base,
            other,
            check=False,
        )
        lines = result.stdout.splitlines()
        if result.returncode == 1:
            raise MergeConflictError(
                f"Merging {other[:12]} into {base[:12]} conflicts in: {', '.join(lines[1:])}.",
                "Both sides are kept; resolve by hand (git merge) or re-plan so that the "
                "components do not touch the same lines.",
                files=lines[1:],
            )
        if result.returncode != 0 or not lines:
            raise GitError(
                f"git merge-tree failed: {result.stderr.strip()[-400:]}",
                "Check that git is 2.38 or newer (git --version).",
            )
        return _git(
            self.repo, *IDENTITY, "commit-tree", lines[0], "-p", base, "-p", other, "-m", message
        ).stdout.strip()

    def working_diff(self, max_bytes: int = 200_000) -> str:
        """The user's uncommitted changes against HEAD (read-only)."""
        text = _git(self.repo, "diff", "--no-color", "HEAD").stdout
        return text[:max_bytes]

    def working_changes(self) -> list[str]:
        """Files the user changed since HEAD (tracked ones), for a dry run's targets."""
        out = _git(self.repo, "diff", "--name-only", "HEAD").stdout
        return [line for line in out.splitlines() if (self.repo / line).is_file()]

    def tree_hash(self, commit: str) -> str:
        return _git(self.repo, "rev-parse", f"{commit}^{{tree}}").stdout.strip()

    @staticmethod
    def slugify(text: str, max_len: int = 40) -> str:
        slug = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
        return slug[:max_len].rstrip("-") or "task"

    # -- branches and refs -----------------------------------------------------------------

    def create_task_branch(
        self, task_id: int, description: str, base: str = "HEAD"
    ) -> tuple[str, str]:
        branch = f"ai/{task_id}-{self.slugify(description)}"
        base_sha = _git(self.repo, "rev-parse", "--verify", f"{base}^{{commit}}").stdout.strip()
        if self.branch_exists(branch):
            raise GitError(
                f"Branch {branch} already exists.",
                f"Delete or rename it (git branch -m {branch} {branch}-old), then retry.",
            )
        _git(self.repo, "branch", "--no-track", branch, base_sha)
        return branch, base_sha

    def set_ref(self, ref: str, new: str, expected_old: str | None) -> None:
        """Atomic ref update; `expected_old=None` means: whatever it is now."""
        args = ["update-ref", ref, new]
        if expected_old is not None:
            args.append(expected_old or ZERO_SHA)
        result = _git(self.repo, *args, check=False)
        if result.returncode != 0:
            raise GitError(
                f"Could not move {ref} to {new[:12]}: {result.stderr.strip()}",
                "Another process changed the ref meanwhile; run `supervisor resume` to "
                "continue from the recorded state.",
            )

    def delete_ref(self, ref: str) -> None:
        _git(self.repo, "update-ref", "-d", ref, check=False)

    def fast_forward_branch(self, branch: str, new: str) -> None:
        """Move a branch forward to `new`; idempotent, and never behind the user's back."""
        tip = self.branch_tip(branch)
        if tip == new:
            return
        if not self.is_ancestor(tip, new):
            raise GitError(
                f"Cannot fast-forward {branch} to {new[:12]}: the branch moved to {tip[:12]}, "
                "which is not an ancestor.",
                f"Someone committed to {branch} meanwhile; merge or reset it by hand, then resume.",
            )
        if self.current_branch() == branch:
            raise GitError(
                f"{branch} is checked out in your working tree; moving it would desync your index.",
                "Switch to another branch (git switch -), then resume.",
            )
        self.set_ref(f"refs/heads/{branch}", new, tip)

    # -- worktrees -------------------------------------------------------------------------

    def add_worktree(self, name: str, commit: str) -> Path:
        """A detached worktree of `commit`; `name` may hold `/` (a component step's name)."""
        with _WORKTREE_LOCK:  # parallel steps: git's worktree bookkeeping is not concurrent
            return self._add_worktree(name.replace("/", "-"), commit)

    def _add_worktree(self, name: str, commit: str) -> Path:
        path = self.worktrees_dir / name
        if path.exists() or self._registered(path):
            self._remove_worktree(path)
        self.worktrees_dir.mkdir(parents=True, exist_ok=True)
        _git(self.repo, "worktree", "add", "--detach", "--force", str(path), commit)
        return path

    def remove_worktree(self, path: Path) -> None:
        with _WORKTREE_LOCK:
            self._remove_worktree(path)

    def _remove_worktree(self, path: Path) -> None:
        _git(self.repo, "worktree", "remove", "--force", "--force", str(path), check=False)
        if path.exists():
            shutil.rmtree(path, ignore_errors=True)
        _git(self.repo, "worktree", "prune", check=False)

    def remove_stale_worktrees(self, keep: frozenset[str] = frozenset()) -> list[str]:
        removed: list[str] = []
        names = (
            {p.name for p in self.worktrees_dir.iterdir()} if self.worktrees_dir.exists() else set()
        )
        names |= {p.name for p in self._registered_paths() if p.parent == self.worktrees_dir}
        for name in sorted(names - set(keep)):
            self.remove_worktree(self.worktrees_dir / name)
            removed.append(name)
        _git(self.repo, "worktree", "prune", check=False)
        return removed

    def snapshot(
        self, worktree: Path, message: str, author: str = "supervisor <supervisor@localhost>"
    ) -> str | None:
        """Commit everything the worker left in the worktree (respecting .gitignore)."""
        _git(worktree, "add", "-A")
        if _git(worktree, "diff", "--cached", "--quiet", check=False).returncode == 0:
            return None
        _git(
            worktree, *IDENTITY, "commit", "-q", "--no-verify", f"--author={author}", "-m", message
        )
        return _git(worktree, "rev-parse", "HEAD").stdout.strip()

    def user_checkout_fingerprint(self) -> str:
        """A hash of everything a user could lose: HEAD, index, working tree, untracked files."""
        digest = hashlib.sha256()
        digest.update(_git(self.repo, "rev-parse", "HEAD").stdout.encode())
        digest.update((self.current_branch() or "").encode())
        status = _git(
            self.repo, "status", "--porcelain=v2", "-z", "--untracked-files=all", "--ignored=no"
        ).stdout
        digest.update(status.encode())
        digest.update(_git(self.repo, "diff", "--cached", "--binary").stdout.encode())
        for entry in status.split("\0"):
            for rel in _paths_in_status_entry(entry):
                path = self.repo / rel
                if path.is_file():
                    digest.update(rel.encode() + b"\0" + path.read_bytes())
        return digest.hexdigest()

    # -- internals -------------------------------------------------------------------------

    def _registered_paths(self) -> list[Path]:
        out = _git(self.repo, "worktree", "list", "--porcelain").stdout
        return [
            Path(line[len("worktree ") :])
            for line in out.splitlines()
            if line.startswith("worktree ")
        ]

    def _registered(self, path: Path) -> bool:
        return path in self._registered_paths()

    def _exclude_state_dir(self) -> None:
        """Keep the supervisor's run state out of `git status` without editing the user's
        .gitignore; its configuration (config.yaml, roles/, templates/) stays committable."""
        common = _git(self.repo, "rev-parse", "--git-common-dir").stdout.strip()
        exclude = (self.repo / common / "info" / "exclude").resolve()
        with contextlib.suppress(OSError):
            existing = exclude.read_text() if exclude.exists() else ""
            lines = existing.splitlines()
            missing = [f"/{STATE_DIR}/{entry}" for entry in STATE_ENTRIES]
            missing = [line for line in missing if line not in lines]
            if missing:
                exclude.parent.mkdir(parents=True, exist_ok=True)
                sep = "" if not existing or existing.endswith("\n") else "\n"
                exclude.write_text(existing + sep + "\n".join(missing) + "\n")


def _paths_in_status_entry(entry: str) -> list[str]:
    """Paths named by one `git status --porcelain=v2 -z` entry (changed or untracked)."""
    if entry.startswith("? "):
        return [entry[2:]]
    if entry.startswith(("1 ", "u ")):
        return [entry.split(" ", 8 if entry.startswith("1 ") else 10)[-1]]
    if entry.startswith("2 "):
        return [entry.split(" ", 9)[-1]]
    return []
