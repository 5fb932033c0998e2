"""What the supervisor asks git about the user's repository, changing nothing: commits, branches,
ancestry, diffs and logs between commits, and the state of the user's own checkout.

Apart from worktrees.py (Workspace, which adds to these what changes the repository: branches,
refs, merges, worktrees, candidate commits) so that the questions read on their own: each is one
git call in the user's repository with hooks and fsmonitor off (host_git._git), and a question
about full object names only, whose answer never changes, is asked once per process
(host_git._git_once).
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

from supervisor.workspace.host_git import _git, _git_once, immutable

if TYPE_CHECKING:
    from pathlib import Path


class RepoQueries:
    """Read-only questions about the repository at `repo`."""

    def __init__(self, repo: Path) -> None:
        self.repo = repo

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
        args = ("merge-base", "--is-ancestor", a, b)
        if immutable(a, b):
            return _git_once(self.repo, *args, answers=(0, 1)).returncode == 0
        return _git(self.repo, *args, check=False).returncode == 0

    def merge_base(self, a: str, b: str) -> str | None:
        out = _git(self.repo, "merge-base", a, b, check=False)
        return (out.stdout.strip() or None) if out.returncode == 0 else None

    def changed_files(self, base: str, head: str) -> list[str]:
        out = self._about((base, head), "diff", "--name-only", "--no-renames", base, head)
        return sorted(line for line in out.splitlines() if line)

    def diff(
        self, base: str, head: str, max_bytes: int = 200_000, paths: list[str] | None = None
    ) -> str:
        only = ["--", *paths] if paths else []
        args = ("diff", "--no-color", "--stat", "--patch", base, head, *only)
        text = self._about((base, head), *args)
        if len(text) > max_bytes:
            return text[:max_bytes] + f"\n[... diff truncated at {max_bytes} bytes ...]\n"
        return text

    def _about(self, revisions: tuple[str, ...], *args: str) -> str:
        """git's answer about `revisions`; asked once per process when all are object names."""
        if immutable(*revisions):
            done = _git_once(self.repo, *args)
            if done.returncode == 0:
                return done.stdout
        return _git(self.repo, *args).stdout  # a ref, or the error named

    def log(self, base: str, head: str, limit: int = 50) -> list[str]:
        out = _git(self.repo, "log", "--oneline", f"-{limit}", f"{base}..{head}").stdout
        return out.splitlines()

    def is_clean(self) -> bool:
        return _git(self.repo, "status", "--porcelain", "--untracked-files=no").stdout == ""

    def working_diff(self, max_bytes: int = 200_000) -> str:
        """The user's uncommitted changes against HEAD (read-only)."""
        text = _git(self.repo, "diff", "--no-color", "HEAD").stdout
        return text[:max_bytes]

    def working_changes(self) -> list[str]:
        """Files the user changed since HEAD (tracked ones), for a dry run's targets."""
        out = _git(self.repo, "diff", "--name-only", "HEAD").stdout
        return [line for line in out.splitlines() if (self.repo / line).is_file()]

    def tree_hash(self, commit: str) -> str:
        return self._about((commit,), "rev-parse", f"{commit}^{{tree}}").strip()

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


def _paths_in_status_entry(entry: str) -> list[str]:
    """Paths named by one `git status --porcelain=v2 -z` entry (changed or untracked)."""
    if entry.startswith("? "):
        return [entry[2:]]
    if entry.startswith(("1 ", "u ")):
        return [entry.split(" ", 8 if entry.startswith("1 ") else 10)[-1]]
    if entry.startswith("2 "):
        return [entry.split(" ", 9)[-1]]
    return []
