"""Copy-on-write workspaces: one shared, never-written tree per commit, and a small layer per step.

Writing a 10,000-file checkout for every step (and hashing it all again afterwards) made a step's
cost grow with the repository, and parallel components waited on each other's disks. Here a
commit's tree is written once into a *base* (`.supervisor/bases/wf<task>/<commit>`), shared by
every step that starts near that commit; a step gets an empty *upper* directory, and the sandbox
mounts base + upper as an overlayfs at the workspace path (a Docker `local` volume of type overlay:
the engine mounts it, so the supervisor needs no privilege). A step that starts from a later commit
reuses a base whose tree differs little: its upper is seeded with the difference (changed files
from blobs, whiteouts for deletions), so what the worker sees is exactly its commit.

After the step the host reads the upper directory alone, as data: lstat, never following a
symlink, whiteouts (character device 0/0, which a worker without CAP_MKNOD cannot make and
overlayfs refuses to create through the mount) and `user.overlay.opaque` directories (the
`userxattr` mount option; overlayfs never lets a worker set its own markers through the mount).
The new tree is the commit's tree with those changes applied in a temporary index, under the same
rules as the full walk in treedata.py: .gitignore honoured for new files, `.git` never read as a
repository's own, symlinks out of the repository and the size limits refused.
"""

from __future__ import annotations

import bisect
import contextlib
import os
import shutil
import stat
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from supervisor.core.errors import GitError
from supervisor.core.owners import process_alive
from supervisor.workspace import treedata
from supervisor.workspace.treedata import Entry, Stamp

OPAQUE_XATTR = "user.overlay.opaque"
MOUNT_FLAGS = "nosuid,nodev"
# userxattr: markers the host can read without privilege; redirect_dir off (a renamed directory
# is copied, never redirected), so the upper layer is read without following anything.
OVERLAY_FLAGS = "userxattr"
MAX_SEED_FILES = 2000  # a commit further than this from every base gets a base of its own
KEEP_BASES = 2
_VIEWS: dict[str, View] = {}
_VIEWS_LOCK = threading.Lock()

DIR, REG, LNK, WHITEOUT, OTHER = "dir", "reg", "lnk", "whiteout", "other"


def container_ids() -> tuple[int, int]:
    """The ids the sandbox runs workers as (see sandbox/docker.py): ours, or nobody for root."""
    return (os.getuid(), os.getgid()) if os.getuid() != 0 else (65534, 65534)


def view_for(path: Path | str) -> View | None:
    """The copy-on-write view a workspace path stands for, if it is one (in-process registry:
    nothing on disk tells the host what a path is)."""
    with _VIEWS_LOCK:
        return _VIEWS.get(str(path))


@dataclass
class Base:
    commit: str
    path: Path
    entries: dict[str, Entry]
    sizes: dict[str, int] = field(default_factory=dict)
    dirs: set[str] = field(default_factory=set)
    users: int = 0
    ready: threading.Event = field(default_factory=threading.Event)
    error: BaseException | None = None


@dataclass
class View:
    """One step's workspace: `path` (what the engine holds) has `upper/` and `work/` in it."""

    path: Path
    commit: str
    base: Base
    stamps: dict[str, Stamp]
    on_fallback: Callable[[View, str], None]
    start: dict[str, Entry] = field(default_factory=dict)
    """The commit's entries (what the worker is shown), sorted by path."""
    mode: str = "overlay"  # or "full" once the overlay could not be mounted

    @property
    def upper(self) -> Path:
        return self.path / "upper"

    @property
    def work(self) -> Path:
        return self.path / "work"

    @property
    def dot_git(self) -> Path:
        return self.path / "dot-git"

    @property
    def tree(self) -> Path:
        """The fully written tree, after a fallback."""
        return self.path / "tree"

    def mount_options(self) -> str:
        return (
            f"{MOUNT_FLAGS},lowerdir={self.base.path},upperdir={self.upper},"
            f"workdir={self.work},{OVERLAY_FLAGS}"
        )

    def fall_back(self, reason: str) -> None:
        """Write the whole tree (the old way) because the overlay could not be mounted."""
        if self.mode == "full":
            return
        self.tree.mkdir()
        self.stamps = treedata.materialize(self.base_git_dir, self.commit, self.tree)
        self.mode = "full"
        self.on_fallback(self, reason)

    base_git_dir: Path = Path()


def unsuitable(path: Path) -> str | None:
    """Why `path` cannot be named in overlay mount options, if it cannot."""
    bad = [c for c in ",:\\\n" if c in str(path)]
    if not bad:
        return None
    return f"the path {path} holds {''.join(bad)!r}, which overlay mount options cannot carry"


@dataclass
class _Registry:
    bases: dict[str, Base] = field(default_factory=dict)
    recent: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


_REGISTRIES: dict[str, _Registry] = {}


class Overlays:
    """The bases of one repository and the views made from them."""

    def __init__(
        self,
        git_dir: Path,
        state_dir: Path,
        on_fallback: Callable[[str], None],
        discard: Callable[[Path], None],
        owner: str | None = None,
        enabled: bool = True,
    ):
        self.git_dir = git_dir
        # Per task (`owner`, "wf<id>"): another task in this repository may run meanwhile with
        # bases of its own, and a resumed task finds the bases its adopted workers' views stand
        # on (see sandbox/adopt.py). Without a task (benchmarks, specs): per process.
        self.bases_dir = state_dir / "bases" / (owner or f"pid{os.getpid()}")
        self.on_fallback = on_fallback
        self.discard = discard  # deletes a folder no longer used, in the background
        self.enabled = enabled
        self.reason: str | None = unsuitable(state_dir)
        if self.reason:
            self.enabled = False
        with _VIEWS_LOCK:  # one registry per bases folder, shared by every Workspace on it
            shared = _REGISTRIES.setdefault(str(self.bases_dir), _Registry())
        self._bases = shared.bases
        self._recent = shared.recent
        self._lock = shared.lock

    # -- views ------------------------------------------------------------------------------

    def add(self, path: Path, commit: str) -> Path:
        base = self._acquire(commit)
        try:
            path.mkdir(mode=0o755)
            (path / "work").mkdir(mode=0o700)
            upper = path / "upper"
            upper.mkdir(mode=0o755)
            stamps, start = seed(self.git_dir, base, commit, upper)
            # The workspace's `.git` is a read-only file, as in a full worktree: the sandbox
            # mounts `dot_git` over this mount point (the host never reads either).
            (upper / ".git").write_bytes(b"")
            (path / "dot-git").write_text("gitdir: /nonexistent/supervisor-workspace\n")
            uid, gid = container_ids()
            if os.getuid() == 0:
                _chown_tree(upper, uid, gid)
        except BaseException:
            self._release(base)
            raise
        view = View(path, commit, base, stamps, self._fell_back, start, base_git_dir=self.git_dir)
        with _VIEWS_LOCK:
            _VIEWS[str(path)] = view
        return path

    def forget(self, path: Path) -> View | None:
        """Unregister the view at `path` (its files are then deleted like a worktree's)."""
        with _VIEWS_LOCK:
            view = _VIEWS.pop(str(path), None)
        if view is not None:
            self._release(view.base)
        return view

    def adopt(self, path: Path, commit: str, lower: str) -> bool:
        """Rebuild the view at `path` that a killed run made from `commit` over its base of
        `lower` (both read from the labels the supervisor set on the worker's container, which
        the worker cannot change), so that its changes are read as if this process had made
        it. False when anything on disk is not as the supervisor left it: the step then runs
        again. Only lstat: nothing is followed, and `path` (not the worker's: it sees the
        upper layer through the mount only) must hold exactly the folders the host made."""
        base_path = self.bases_dir / lower
        expected = [
            (path, stat.S_ISDIR),
            (path / "upper", stat.S_ISDIR),
            (path / "work", stat.S_ISDIR),
            (path / "dot-git", stat.S_ISREG),
            (base_path, stat.S_ISDIR),
        ]
        for where, is_kind in expected:
            try:
                if not is_kind(os.lstat(where).st_mode):
                    return False
            except OSError:
                return False
        try:
            entries, sizes = list_tree_sizes(self.git_dir, lower)
            start = entries if commit == lower else treedata.list_tree(self.git_dir, commit)
        except GitError:  # a commit gone meanwhile: nothing to adopt
            return False
        with self._lock:
            base = self._bases.get(lower)
            if base is None:
                base = Base(lower, base_path, dict(sorted(entries.items())), sizes)
                base.dirs = _ancestors(base.entries)
                base.ready.set()
                self._bases[lower] = base
            base.users += 1
            self._recent[:] = [c for c in self._recent if c != lower] + [lower]
        # No stamps: every file of the upper layer is hashed (the seeded ones too).
        view = View(
            path,
            commit,
            base,
            {},
            self._fell_back,
            dict(sorted(start.items())),
            base_git_dir=self.git_dir,
        )
        with _VIEWS_LOCK:
            _VIEWS[str(path)] = view
        return True

    def close(self) -> None:
        """At the end of a run: the bases no view uses go (nothing left behind), and the
        task's bases folder with them once empty."""
        with self._lock:
            idle = [b for b in self._bases.values() if b.users == 0 and b.ready.is_set()]
            for b in idle:
                del self._bases[b.commit]
            self._recent[:] = [c for c in self._recent if c in self._bases]
        for b in idle:
            self.discard(b.path)
        with contextlib.suppress(OSError):
            self.bases_dir.rmdir()
        with contextlib.suppress(OSError):
            self.bases_dir.parent.rmdir()

    def _fell_back(self, view: View, reason: str) -> None:
        self.enabled = False  # the next steps go straight to full trees
        self.reason = reason
        self.on_fallback(reason)

    # -- bases ------------------------------------------------------------------------------

    def _acquire(self, commit: str) -> Base:
        """The base for a step from `commit`: one close enough to it, or a new one."""
        with self._lock:
            candidates = [b for b in self._bases.values() if b.error is None]
        best: Base | None = None
        distance = MAX_SEED_FILES + 1
        for base in candidates:
            if base.commit == commit:
                best, distance = base, 0
                break
        if best is None:
            for base in candidates:
                base.ready.wait()
                if base.error is not None:
                    continue
                changed = _distance(self.git_dir, base.commit, commit)
                if changed < distance:
                    best, distance = base, changed
        with self._lock:
            if best is None or distance > MAX_SEED_FILES or best.commit not in self._bases:
                best = self._bases.get(commit)
                if best is None:
                    best = Base(commit, self.bases_dir / commit, {})
                    self._bases[commit] = best
                    build = True
                else:
                    build = False
            else:
                build = False
            best.users += 1
            self._recent[:] = [c for c in self._recent if c != best.commit] + [best.commit]
        if build:
            try:
                self._build(best)
            except BaseException as e:
                best.error = e
                with self._lock:
                    self._bases.pop(best.commit, None)
                raise
            finally:
                best.ready.set()
        best.ready.wait()
        if best.error is not None:
            raise best.error
        return best

    def _build(self, base: Base) -> None:
        """Write the commit's tree once, owned by the container's user (so that its files stay
        writable through the overlay, which copies them up), into a folder only the host reaches:
        no container mounts a base itself, and overlayfs never writes its lower layer."""
        self.bases_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{base.commit[:12]}-", dir=self.bases_dir))
        try:
            treedata.materialize(self.git_dir, base.commit, tmp)
            if os.getuid() == 0:
                _chown_tree(tmp, *container_ids())
            tmp.chmod(0o755)
            if base.path.exists() or base.path.is_symlink():
                self.discard(base.path)  # a killed run's, not in this process's registry
            tmp.rename(base.path)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        entries, base.sizes = list_tree_sizes(self.git_dir, base.commit)
        base.entries = dict(sorted(entries.items()))
        base.dirs = _ancestors(base.entries)

    def _release(self, base: Base) -> None:
        with self._lock:
            base.users -= 1
            stale = [
                b
                for c, b in self._bases.items()
                if b.users == 0 and b.ready.is_set() and c not in self._recent[-KEEP_BASES:]
            ]
            for b in stale:
                del self._bases[b.commit]
        for b in stale:
            self.discard(b.path)


def remove_bases(state_dir: Path, prefix: str = "") -> None:
    """The bases of supervisors no longer running (at start: a killed run's), never one a view
    of this process uses (an adopted worker's, see sandbox/adopt.py), nor those of another
    process or task running meanwhile. `prefix` ("wf<id>-"): only that task's bases folder (and
    those of dead processes); without it, every task's."""
    root = state_dir / "bases"
    if root.is_symlink():
        root.unlink()
        return
    if not root.is_dir():
        return
    owner = prefix.rstrip("-")
    for entry in root.iterdir():
        pid = entry.name[3:] if entry.name.startswith("pid") else ""
        if pid.isdigit() and int(pid) != os.getpid() and process_alive(int(pid)):
            continue  # another supervisor's, in use
        if owner and not pid.isdigit() and entry.name != owner:
            continue  # another task's: its own start, resume or abandon removes them
        if entry.is_symlink() or not entry.is_dir():
            entry.unlink()
            continue
        with _VIEWS_LOCK:
            shared = _REGISTRIES.get(str(entry))
        if shared is None:
            shutil.rmtree(entry, ignore_errors=True)
            continue
        with shared.lock:
            used = {b.path.name for b in shared.bases.values() if b.users}
            building = any(not b.ready.is_set() for b in shared.bases.values())
            for commit in [c for c, b in shared.bases.items() if not b.users]:
                del shared.bases[commit]
            shared.recent[:] = [c for c in shared.recent if c in shared.bases]
        for item in entry.iterdir():
            if item.name in used or (building and item.name.startswith(".")):
                continue  # in use, or being written
            if item.is_symlink() or not item.is_dir():
                item.unlink()
            else:
                shutil.rmtree(item, ignore_errors=True)
        with contextlib.suppress(OSError):
            entry.rmdir()  # only when empty
    with contextlib.suppress(OSError):
        root.rmdir()  # only when empty


def list_tree_sizes(git_dir: Path, commit: str) -> tuple[dict[str, Entry], dict[str, int]]:
    """`commit`'s entries and the sizes of its blobs (read once per base)."""
    out = treedata.git_bytes(git_dir, "ls-tree", "-r", "-z", "-l", "--full-tree", commit)
    entries: dict[str, Entry] = {}
    sizes: dict[str, int] = {}
    for record in out.split(b"\0"):
        if not record:
            continue
        meta, _, raw = record.partition(b"\t")
        mode, _, sha, size = meta.decode().split()
        path = os.fsdecode(raw)
        entries[path] = Entry(mode, sha)
        sizes[path] = int(size) if size.isdigit() else 0
    return entries, sizes


def tree_diff(git_dir: Path, a: str, b: str) -> dict[str, Entry | None]:
    """The entries of `b` that differ from `a`'s, by path (None: not in `b`)."""
    out = treedata.git_bytes(git_dir, "diff-tree", "-r", "-z", "--no-renames", a, b)
    diff: dict[str, Entry | None] = {}
    fields = out.split(b"\0")
    for meta, raw in zip(fields[0::2], fields[1::2], strict=False):
        if not meta.startswith(b":"):
            continue
        _, new_mode, _, new_sha, _ = meta[1:].decode().split(" ")
        path = os.fsdecode(raw)
        diff[path] = None if new_mode == "000000" else Entry(new_mode, new_sha)
    return diff


def _distance(git_dir: Path, a: str, b: str) -> int:
    out = treedata.git_bytes(git_dir, "diff-tree", "-r", "-z", "--no-renames", "--name-only", a, b)
    return sum(1 for p in out.split(b"\0") if p)


def _chown_tree(root: Path, uid: int, gid: int) -> None:
    os.lchown(root, uid, gid)
    for dirpath, dirs, files in os.walk(root):
        for name in [*dirs, *files]:
            os.lchown(Path(dirpath, name), uid, gid)


# -- seeding an upper layer ------------------------------------------------------------------


def _ancestors(paths: object) -> set[str]:
    dirs: set[str] = set()
    for p in paths:  # type: ignore[attr-defined]
        parts = p.split("/")
        for i in range(1, len(parts)):
            dirs.add("/".join(parts[:i]))
    return dirs


def seed(
    git_dir: Path, base: Base, commit: str, upper: Path
) -> tuple[dict[str, Stamp], dict[str, Entry]]:
    """Make base + `upper` show `commit`: its files that differ from the base's are written into
    `upper`, and what the base has that `commit` has not is hidden by a whiteout at the topmost
    path where the two part (a whole directory at once). Returns the stamps of the files written
    and the commit's entries, sorted."""
    if base.commit == commit:
        return {}, base.entries
    # From the difference alone (not the commit's whole tree, which grows with the repository).
    diff = tree_diff(git_dir, base.commit, commit)
    target = dict(base.entries)
    for path, entry in diff.items():
        if entry is None:
            target.pop(path, None)
        else:
            target[path] = entry
    if any(p not in base.entries for p, e in diff.items() if e is not None):
        target = dict(sorted(target.items()))
    changed = {p: e for p, e in diff.items() if e is not None}
    stamps = treedata.materialize(git_dir, commit, upper, entries=changed) if changed else {}
    keys = list(target)  # sorted

    def target_dir(d: str) -> bool:
        i = bisect.bisect_left(keys, d + "/")
        return i < len(keys) and keys[i].startswith(d + "/")

    hidden: set[str] = set()
    for path in (p for p, e in diff.items() if e is None and p in base.entries):
        parts = path.split("/")
        for i in range(1, len(parts) + 1):
            top = "/".join(parts[:i])
            if not target_dir(top):
                break
        else:
            continue  # a directory of the commit's, written into the upper layer, covers it
        if top in target or top in hidden:
            continue  # replaced by a file of the commit, or hidden already
        hidden.add(top)
    for top in sorted(hidden):
        parent, _, _ = top.rpartition("/")
        (upper / parent).mkdir(mode=0o755, parents=True, exist_ok=True)
        os.mknod(upper / top, stat.S_IFCHR | 0o600, os.makedev(0, 0))
    return stamps, target
