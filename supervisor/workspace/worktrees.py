"""Git plumbing for isolated steps: task branches, per-step worktrees, candidate commits.

The user's checkout (current branch, index, working tree, untracked files) is never touched:
branches are created with `git branch`, refs move with `git update-ref` and its old-value check,
and workers only ever see a detached worktree under `.supervisor/worktrees/`.

A worktree belongs to its worker, so the host never runs git in it: worktrees are filled from
blobs, candidates are built from the file system as data and removed without reading their `.git`
(supervisor/workspace/treedata.py, candidate_tree.py); every git call runs with hooks, fsmonitor
and the untracked cache off. What is only asked of the repository, changing nothing, is
repo_queries.py's.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import stat
import tempfile
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from supervisor.core.errors import (
    CandidateRefusedError,
    GitError,
    MergeConflictError,
)
from supervisor.state.locks import critical_section
from supervisor.workspace import candidate_tree, overlay, overlay_tree, treedata
from supervisor.workspace.host_git import IDENTITY, _git
from supervisor.workspace.host_git import STATE_DIR as STATE_DIR
from supervisor.workspace.host_git import find_repo_root as find_repo_root
from supervisor.workspace.host_git import locate as locate
from supervisor.workspace.repo_queries import RepoQueries
from supervisor.workspace.worktree_deletion import _delete_in_background, _delete_tree
from supervisor.workspace.worktree_deletion import wait_for_deletions as wait_for_deletions

ZERO_SHA = "0" * 40
ESCAPES = re.compile(
    r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]?"  # CSI (colours, cursor): parameters, then a final byte
    # OSC (a title, a link), DCS, SOS, PM, APC: a string, to its terminator
    r"|(?:\x1b[]PX^_]|[\x90\x98\x9d-\x9f])[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"
    r"|\x1b[ -/]*[0-~]?"  # any other escape (a charset, a reset)
    r"|[\x00-\x1f\x7f-\x9f]"  # and a lone control character
)
"""ECMA-48's control sequences and strings, each matched whole, cut off at the text's end too."""
# What the supervisor writes while it runs, as opposed to the configuration a team commits.
STATE_ENTRIES = (
    "state.db*",
    "*.lock",
    "locks/",
    "worktrees/",
    "bases/",
    "trash/",
    "probe/",
    "homes/",
    "init.json",
)
_WORKTREE_LOCK = threading.RLock()
_HELD: dict[Path, int] = {}  # how deep this process is in each repository's git section
if TYPE_CHECKING:
    from collections.abc import Iterator


class Workspace(RepoQueries):
    """The user's repository as the supervisor changes it: task branches and refs, merges made
    without a working tree, step worktrees, candidate commits. What it asks without changing
    anything is RepoQueries'."""

    def __init__(self, repo: Path, git_dir: Path | None = None) -> None:
        """`git_dir`: the repository's common git dir when known (host_git.locate)."""
        super().__init__(repo)
        self.state_dir = repo / STATE_DIR
        self.worktrees_dir = self.state_dir / "worktrees"
        self.trash_dir = self.state_dir / "trash"
        if git_dir is None:
            common = _git(repo, "rev-parse", "--git-common-dir").stdout.strip()
            git_dir = (repo / common).resolve()
        self.git_dir = git_dir
        self._stamps: dict[str, dict[str, treedata.Stamp]] = {}
        self.overlays: overlay.Overlays | None = None
        self._exclude_state_dir()

    def use_overlay(
        self,
        on_fallback: Callable[[str], None] = lambda reason: None,
        owner: str | None = None,
        enabled: bool = True,
    ) -> None:
        """Make step workspaces copy-on-write views of shared bases
        (supervisor/workspace/overlay.py),
        for a sandbox that mounts them; `on_fallback(reason)` is told when a view could not be
        mounted and steps went back to fully written worktrees. `owner` ("wf<id>"): the task
        whose bases these are; `enabled=False`: only adopted views, new steps get full trees."""
        self.overlays = overlay.Overlays(
            self.git_dir, self.state_dir, on_fallback, self._discard, owner, enabled
        )
        if self.overlays.reason:
            on_fallback(self.overlays.reason)

    def merge_into(
        self, base_branch: str, branch: str, message: str, identity: Sequence[str] = IDENTITY
    ) -> str:
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
            new = self.merge_commits(base_tip, tip, message, identity)
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

    def merge_commits(
        self, base: str, other: str, message: str, identity: Sequence[str] = IDENTITY
    ) -> str:
        """The commit that merges `other` into `base`, made without any working tree, by
        `identity` (the supervisor's own; a landing passes the user's).

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
            self.repo, *identity, "commit-tree", lines[0], "-p", base, "-p", other, "-m", message
        ).stdout.strip()

    @staticmethod
    def slugify(text: str, max_len: int = 40) -> str:
        """The words of `text` as a branch name's part. Terminal control sequences go first, and
        whole: pasted coloured text or a link otherwise leaves `31m`, `0m`, a URL in the name."""
        slug = re.sub(r"[^a-z0-9]+", "-", ESCAPES.sub(" ", text).lower()).strip("-")
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
        with self.git_section():
            _git(self.repo, "branch", "--no-track", branch, base_sha)
        return branch, base_sha

    def set_ref(self, ref: str, new: str, expected_old: str | None) -> None:
        """Atomic ref update; `expected_old=None` means: whatever it is now."""
        args = ["update-ref", ref, new]
        if expected_old is not None:
            args.append(expected_old or ZERO_SHA)
        with self.git_section():
            result = _git(self.repo, *args, check=False)
        if result.returncode != 0:
            raise GitError(
                f"Could not move {ref} to {new[:12]}: {result.stderr.strip()}",
                "Another process changed the ref meanwhile; run `supervisor resume` to "
                "continue from the recorded state.",
            )

    def delete_ref(self, ref: str) -> None:
        with self.git_section():
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

    @property
    def copy_on_write(self) -> bool:
        """New worktrees are copy-on-write views (overlay.py), not fully written trees."""
        return self.overlays is not None and self.overlays.enabled

    def add_worktree(self, name: str, commit: str) -> Path:
        """A detached worktree of `commit`; `name` may hold `/` (a component step's name).

        Only git's own bookkeeping (`worktree add --no-checkout`, `prune`) runs in the
        repository's git section (`git_section`); the files are written from blobs outside it,
        so parallel components and tasks fill their worktrees at the same time however big the
        repository is."""
        path = self.worktrees_dir / name.replace("/", "-")
        with self.git_section():
            registered = self._registered(path)
        if registered or path.exists() or path.is_symlink():
            self.remove_worktree(path)
        self.worktrees_dir.mkdir(parents=True, exist_ok=True)
        if self.overlays is not None and self.copy_on_write:
            try:
                return self.overlays.add(path, commit)
            except BaseException:
                self.remove_worktree(path)
                raise
        with self.git_section():  # git's worktree bookkeeping (admin dir names) is not concurrent
            # No checkout: git would apply the tree's .gitattributes (filters, eol) while
            # writing it.
            _git(
                self.repo,
                "worktree",
                "add",
                "--detach",
                "--no-checkout",
                "--force",
                str(path),
                commit,
            )
        try:
            stamps = _populate(self.git_dir, commit, path)
        except BaseException:
            self.remove_worktree(path)
            raise
        self._stamps[str(path)] = stamps
        return path

    def remove_worktree(self, path: Path) -> None:
        """Move the worktree out of the way, let git forget its admin dir, and delete its files
        in the background (a 10,000-file tree takes seconds that its component's slot should not
        wait for). Nothing in it is read or followed: `git worktree remove` would read the
        worktree's `.git`, which its worker could rewrite; a rename moves a symlink itself, and
        rmtree unlinks symlinks. Deletions left by a crash go with `remove_stale_worktrees`."""
        self._stamps.pop(str(path), None)
        view = self.overlays.forget(path) if self.overlays is not None else None
        moved: Path | None = None
        if self.trash_dir.is_symlink():  # never create or delete anything where it points
            _delete_tree(path)
        elif path.is_symlink() or path.exists():
            moved = self._to_trash(path, f"{path.name}-")
        if view is None:  # a view is no git worktree: nothing for git to forget
            with self.git_section():
                _git(self.repo, "worktree", "prune", check=False)
        if moved is not None:
            _delete_in_background(moved)

    def _discard(self, path: Path) -> None:
        """Move a folder of the supervisor's own out of the way and delete it in the background."""
        if self.trash_dir.is_symlink() or path.is_symlink() or not path.exists():
            return
        moved = self._to_trash(path, f"{path.name[:12]}-")
        if moved is not None:
            _delete_in_background(moved)

    def _to_trash(self, path: Path, prefix: str) -> Path | None:
        """`path` renamed into the trash, for a thread to delete; None when the trash is on
        another file system (`.supervisor/worktrees` mounted apart), where a rename cannot go:
        then it is deleted where it is, now."""
        self.trash_dir.mkdir(parents=True, exist_ok=True)
        moved = Path(tempfile.mkdtemp(prefix=prefix, dir=self.trash_dir))
        try:
            path.rename(moved / path.name)
        except OSError as e:
            moved.rmdir()
            if e.errno != errno.EXDEV:
                raise
            _delete_tree(path)
            return None
        return moved

    def remove_stale_worktrees(
        self, keep: frozenset[str] = frozenset(), prefix: str = ""
    ) -> list[str]:
        """Remove the worktrees (and their trash) whose names start with `prefix`: a task's own
        (`wf<id>-`), so that the worktrees of other tasks running meanwhile are left alone."""
        removed: list[str] = []
        names = (
            {p.name for p in self.worktrees_dir.iterdir()} if self.worktrees_dir.exists() else set()
        )
        with self.git_section():
            names |= {p.name for p in self._registered_paths() if p.parent == self.worktrees_dir}
        for name in sorted(n for n in names - set(keep) if n.startswith(prefix)):
            self.remove_worktree(self.worktrees_dir / name)
            removed.append(name)
        wait_for_deletions()
        if not prefix:
            _delete_tree(self.trash_dir)  # what a killed run had not deleted yet
        elif self.trash_dir.is_dir() and not self.trash_dir.is_symlink():
            for entry in self.trash_dir.iterdir():
                if entry.name.startswith(prefix):
                    _delete_tree(entry)
        overlay.remove_bases(self.state_dir, prefix)  # the task's, a dead run's; none in use
        with self.git_section():
            _git(self.repo, "worktree", "prune", check=False)
        return removed

    @contextlib.contextmanager
    def git_section(self) -> Iterator[None]:
        """git's own bookkeeping (worktree admin dirs, ref and packed-refs updates), one thread
        and one process at a time: parallel components and other tasks running in the same
        repository wait for each other here, and only here. Re-entrant within a thread."""
        with _WORKTREE_LOCK:
            depth = _HELD.get(self.state_dir, 0)
            _HELD[self.state_dir] = depth + 1
            try:
                if depth:
                    yield
                else:
                    with critical_section(self.state_dir, "git"):
                        yield
            finally:
                _HELD[self.state_dir] = depth

    def snapshot(
        self,
        worktree: Path,
        message: str,
        author: str = "supervisor <supervisor@localhost>",
        limits: candidate_tree.SnapshotLimits | None = None,
    ) -> str | None:
        """Commit everything the worker left in the worktree (respecting .gitignore) as a child
        of the commit it started from; None when nothing changed.

        Raises CandidateRefusedError when the worker touched its `.git` (then nothing of the
        worktree is read) or the content breaks a limit or has a symlink out of the repository."""
        view = overlay.view_for(worktree)
        limits = limits or candidate_tree.SnapshotLimits()
        if view is not None:
            base = view.commit
            tree = overlay_tree.snapshot(self.git_dir, view, limits)
        else:
            base = self._checked_base(worktree)
            tree = candidate_tree.snapshot_tree(
                self.git_dir, worktree, base, limits, self._stamps.get(str(worktree))
            )
        if tree == self.tree_hash(base):
            return None
        name, _, email = author.partition(" <")
        env = {
            "GIT_AUTHOR_NAME": name,
            "GIT_AUTHOR_EMAIL": email.rstrip(">"),
            "GIT_COMMITTER_NAME": "supervisor",
            "GIT_COMMITTER_EMAIL": "supervisor@localhost",
        }
        out = treedata.git_bytes(
            self.git_dir, "commit-tree", tree, "-p", base, "-m", message, env=env
        )
        return out.decode().strip()

    def _checked_base(self, worktree: Path) -> str:
        """The commit `worktree` was made from, read from its admin dir in the main repository
        (which no container sees), after checking that the worktree's `.git` is still the file
        git wrote."""
        admin = self._admin_dir(worktree)
        dot_git = worktree / ".git"
        try:
            info = os.lstat(dot_git)
            intact = stat.S_ISREG(info.st_mode) and dot_git.read_text().strip() == (
                f"gitdir: {admin}"
            )
        except (OSError, UnicodeDecodeError):
            intact = False
        if admin is None or not intact:
            raise CandidateRefusedError(
                f"The worker changed the git metadata of its worktree ({dot_git}); nothing of "
                "it was read or run.",
                "Workers must not touch `.git`: leave it as it is and let the supervisor commit.",
                kind="git_metadata_tampered",
            )
        return (admin / "HEAD").read_text().strip()

    def _admin_dir(self, worktree: Path) -> Path | None:
        expected = str(Path(os.path.realpath(worktree)) / ".git")
        for gitdir in (self.git_dir / "worktrees").glob("*/gitdir"):
            with contextlib.suppress(OSError):
                if gitdir.read_text().strip() == expected:
                    return gitdir.parent
        return None

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
        exclude = self.git_dir / "info" / "exclude"
        with contextlib.suppress(OSError):
            existing = exclude.read_text() if exclude.exists() else ""
            lines = existing.splitlines()
            missing = [f"/{STATE_DIR}/{entry}" for entry in STATE_ENTRIES]
            missing = [line for line in missing if line not in lines]
            if missing:
                exclude.parent.mkdir(parents=True, exist_ok=True)
                sep = "" if not existing or existing.endswith("\n") else "\n"
                exclude.write_text(existing + sep + "\n".join(missing) + "\n")


def _populate(git_dir: Path, commit: str, path: Path) -> dict[str, treedata.Stamp]:
    """Write a new worktree's files (outside the worktree lock): its own step's work alone."""
    return treedata.materialize(git_dir, commit, path)
