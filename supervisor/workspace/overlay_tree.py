"""The tree a copy-on-write workspace holds, read from its upper layer alone (see overlay.py).

The result must be the tree `candidate_tree.snapshot_tree` would build from the same files
written in full, so the same rules apply, to the merged view as overlayfs shows it: a path of the
step's commit is kept, changed or gone by what the upper layer says at it or above it (whiteout,
opaque directory, a non-directory over a directory); a new path counts when .gitignore does not
exclude it; symlinks are recorded, never followed; FIFOs, sockets and devices are not files.
The worker wrote the upper layer, so it is read with lstat and `O_NOFOLLOW` semantics only, and
what git itself must judge (.gitignore patterns, nested repositories) is judged on a host-made
copy of just those files, never on the upper layer itself.
"""

from __future__ import annotations

import bisect
import contextlib
import os
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path

from supervisor.workspace import candidate_tree, treedata
from supervisor.workspace.candidate_tree import SnapshotLimits
from supervisor.workspace.overlay import DIR, LNK, OPAQUE_XATTR, OTHER, REG, WHITEOUT, Base, View
from supervisor.workspace.treedata import (
    EXECUTABLE,
    GITLINK,
    REGULAR,
    SYMLINK,
    Entry,
)

ZERO = "0" * 40
MAX_GIT_COPY = 2000  # entries of a nested `.git` copied for git to judge it a repository


@dataclass(frozen=True)
class Node:
    kind: str
    size: int = 0
    mode: int = 0
    opaque: bool = False
    stamp: tuple[int, int, int] = (0, 0, 0)


def read_upper(upper: Path) -> dict[str, Node]:
    """Every entry of the upper layer by relative path, never following a symlink."""
    nodes: dict[str, Node] = {}
    pending = [""]
    while pending:
        rel = pending.pop()
        with os.scandir(upper / rel if rel else upper) as it:
            for item in it:
                path = f"{rel}/{item.name}" if rel else item.name
                info = item.stat(follow_symlinks=False)
                mode = info.st_mode
                if stat.S_ISDIR(mode):
                    opaque = False
                    with contextlib.suppress(OSError):
                        value = os.getxattr(item.path, OPAQUE_XATTR, follow_symlinks=False)
                        opaque = value == b"y"
                    nodes[path] = Node(DIR, opaque=opaque)
                    pending.append(path)
                elif stat.S_ISREG(mode):
                    stamp = (info.st_ino, info.st_size, info.st_mtime_ns)
                    nodes[path] = Node(REG, info.st_size, mode, stamp=stamp)
                elif stat.S_ISLNK(mode):
                    nodes[path] = Node(LNK)
                elif stat.S_ISCHR(mode) and info.st_rdev == 0:
                    nodes[path] = Node(WHITEOUT)
                else:
                    nodes[path] = Node(OTHER)
    return nodes


class Merged:
    """Lookups in base + upper as overlayfs resolves them."""

    def __init__(self, base: Base, upper: dict[str, Node], start: dict[str, Entry]) -> None:
        self.start = start
        self.base = base.entries
        self.base_dirs = base.dirs
        self.upper = upper

    def touched(self, paths: list[str]) -> list[str]:
        """The paths (sorted) that the upper layer may change: at or under an entry other than a
        directory merged with the base's (a whiteout, a non-directory, an opaque directory, a
        directory over a base file). The rest are the base's own files, as the commit has them.
        """
        hits: set[str] = set()
        for name, node in self.upper.items():
            if node.kind == DIR and not node.opaque and name in self.base_dirs:
                continue
            if name in self.start:
                hits.add(name)
            i = bisect.bisect_left(paths, name + "/")
            while i < len(paths) and paths[i].startswith(name + "/"):
                hits.add(paths[i])
                i += 1
        return sorted(hits)

    def lookup(self, path: str) -> tuple[str, Node | Entry | None]:
        """("upper", node) or ("lower", base entry) for what the merged view holds at `path`;
        ("none", None) when nothing is there or a parent is not a directory."""
        parts = path.split("/")
        lower = True
        for i in range(1, len(parts) + 1):
            prefix = "/".join(parts[:i])
            last = i == len(parts)
            node = self.upper.get(prefix)
            if node is not None:
                if node.kind == WHITEOUT:
                    return "none", None
                if last:
                    return "upper", node
                if node.kind != DIR:
                    return "none", None
                if node.opaque or prefix not in self.base_dirs:
                    lower = False
                continue
            if not lower:
                return "none", None
            if last:
                entry = self.base.get(path)
                return ("lower", entry) if entry is not None else ("none", None)
            if prefix not in self.base_dirs:
                return "none", None
        return "none", None


def snapshot_tree(git_dir: Path, view: View, limits: SnapshotLimits) -> str:
    """The tree of what the view's workspace holds now; raises CandidateRefusedError like
    `candidate_tree.snapshot_tree` for a tree over the limits or with a symlink out of the
    repository."""
    start = view.start
    sizes = view.base.sizes  # an untouched path of the commit is the base's own file
    upper = read_upper(view.upper)
    merged = Merged(view.base, upper, start)
    # What each touched path of the commit becomes, and each new path in the upper layer.
    final: dict[str, Entry | None] = {}
    to_hash: list[str] = []
    links: dict[str, str] = {}
    new_sizes: dict[str, int] = {}
    for path in merged.touched(list(start)):
        final[path] = _resolve(view, merged, path, start[path], to_hash, links, new_sizes, sizes)
    fresh = sorted(
        p
        for p, n in upper.items()
        if n.kind in (REG, LNK) and p not in start and ".git" not in p.split("/")
    )
    with tempfile.TemporaryDirectory(prefix="supervisor-snap-") as tmp:
        for path in _not_ignored(git_dir, view, merged, fresh, Path(tmp, "shadow")):
            final[path] = _resolve(view, merged, path, None, to_hash, links, new_sizes, sizes)
        kept = (p for p, e in start.items() if e.mode in (REGULAR, EXECUTABLE) and p not in final)
        total = sum(sizes.get(p, 0) for p in kept) + sum(new_sizes.values())
        added = [p for p, e in final.items() if e is not None and p not in start]
        candidate_tree.refuse_over_limits(total, len(added), limits)
        old = {p: e.sha for p, e in start.items() if e.mode == SYMLINK}
        blobs = treedata.read_blobs(git_dir, list(old.values()))
        old_targets = {p: os.fsdecode(blobs[sha]) for p, sha in old.items()}
        all_links = {p: t for p, t in old_targets.items() if p not in final} | links
        bad = sorted(
            p
            for p, t in links.items()
            if old_targets.get(p) != t and candidate_tree.escapes(p, t, all_links)
        )
        candidate_tree.refuse_escaping_links(bad, links)
        shas = _hash(git_dir, view, to_hash, links, Path(tmp, "links"))
        lines: list[bytes] = []
        for path, entry in sorted(final.items()):  # removals first: a file may become a dir
            if entry is None and path in start:
                lines.append(f"0 {ZERO}\t".encode() + os.fsencode(path) + b"\0")
        for path, entry in sorted(final.items()):
            if entry is not None:
                sha = entry.sha or shas[path]
                lines.append(f"{entry.mode} {sha}\t".encode() + os.fsencode(path) + b"\0")
        index = {"GIT_INDEX_FILE": str(Path(tmp, "index"))}
        treedata.git_bytes(git_dir, "read-tree", view.commit, env=index)
        if lines:
            info = b"".join(lines)
            args = ("update-index", "-z", "--index-info")
            treedata.git_bytes(git_dir, *args, input_bytes=info, env=index)
        return treedata.git_bytes(git_dir, "write-tree", env=index).decode().strip()


def _resolve(
    view: View,
    merged: Merged,
    path: str,
    start: Entry | None,
    to_hash: list[str],
    links: dict[str, str],
    sizes: dict[str, int],
    known: dict[str, int],
) -> Entry | None:
    """What `path` holds in the merged view, as a tree entry (sha "" while still to hash)."""
    where, found = merged.lookup(path)
    if isinstance(found, Entry):  # the base's own file, as the commit has it (or not)
        if found.mode in (REGULAR, EXECUTABLE):
            sizes[path] = known.get(path, 0)
        return found
    node = found
    if where != "upper" or node is None:
        return None
    if node.kind == REG:
        mode = EXECUTABLE if node.mode & stat.S_IXUSR else REGULAR
        sizes[path] = node.size
        if start is not None and start.mode == mode and view.stamps.get(path) == node.stamp:
            return start  # seeded from the commit and not touched since
        to_hash.append(path)
        return Entry(mode, "")
    if node.kind == LNK:
        links[path] = str((view.upper / path).readlink())
        return Entry(SYMLINK, "")
    if node.kind == DIR and start is not None and start.mode == GITLINK:
        return start  # a submodule stays what the commit says
    return None


def _hash(
    git_dir: Path, view: View, regular: list[str], links: dict[str, str], tmp: Path
) -> dict[str, str]:
    tmp.mkdir()
    hashed = [candidate_tree.hashable(view.upper / p, tmp, i) for i, p in enumerate(regular)]
    names = list(links)
    for i, p in enumerate(names):
        (tmp / str(i)).write_bytes(os.fsencode(links[p]))
        hashed.append(str(tmp / str(i)))
    if not hashed:
        return {}
    out = treedata.git_bytes(
        git_dir,
        "hash-object",
        "-w",
        "--no-filters",
        "--stdin-paths",
        input_bytes="\n".join(hashed).encode() + b"\n",
    )
    return dict(zip([*regular, *names], out.decode().split(), strict=True))


def _not_ignored(
    git_dir: Path, view: View, merged: Merged, fresh: list[str], shadow: Path
) -> list[str]:
    """The new paths `git ls-files --others --exclude-standard` would list in the merged view.

    Git judges a host-made shadow of the view: an empty stand-in for each new path (a file, or a
    symlink that points nowhere), the merged view's `.gitignore` of every directory on the way,
    and a copy of any nested `.git` (directories and small regular files only), so that patterns
    and nested repositories are judged as on the full tree."""
    if not fresh:
        return []
    shadow.mkdir()
    dirs = {""} | {"/".join(p.split("/")[:i]) for p in fresh for i in range(1, p.count("/") + 1)}
    for d in sorted(dirs):
        if d:
            (shadow / d).mkdir(exist_ok=True)
    for path in fresh:
        target = shadow / path
        if os.path.lexists(target):
            continue
        if merged.upper[path].kind == LNK:
            target.symlink_to("/nonexistent/supervisor-shadow")
        else:
            target.write_bytes(b"")
    blobs_wanted: dict[str, str] = {}
    for d in dirs:
        name = f"{d}/.gitignore" if d else ".gitignore"
        where, found = merged.lookup(name)
        if where == "upper" and not isinstance(found, Entry) and found and found.kind == REG:
            (shadow / name).write_bytes((view.upper / name).read_bytes())
        elif where == "lower" and isinstance(found, Entry) and found.mode in (REGULAR, EXECUTABLE):
            blobs_wanted[name] = found.sha
        dot_git = f"{d}/.git" if d else ".git"
        if d and dot_git in merged.upper:
            _copy_git(view.upper / dot_git, shadow / dot_git)
    blobs = treedata.read_blobs(git_dir, list(blobs_wanted.values()))
    for name, sha in blobs_wanted.items():
        (shadow / name).write_bytes(blobs[sha])
    listing = treedata.git_bytes(
        git_dir,
        "ls-files",
        "-z",
        "--others",
        "--exclude-standard",
        work_tree=shadow,
        env={"GIT_INDEX_FILE": str(shadow.parent / "none")},
    )
    listed = {os.fsdecode(p) for p in listing.split(b"\0") if p and not p.endswith(b"/")}
    return [p for p in fresh if p in listed]


def _copy_git(source: Path, dest: Path) -> None:
    """A nested `.git` as data: directories and regular files up to 64 KB, no symlinks."""
    info = os.lstat(source)
    if stat.S_ISREG(info.st_mode) and info.st_size <= 65536:
        dest.write_bytes(source.read_bytes())
        return
    if not stat.S_ISDIR(info.st_mode):
        return
    count = 0
    for root, dirs, files in os.walk(source):
        rel = os.path.relpath(root, source)
        (dest / rel).mkdir(parents=True, exist_ok=True)
        if Path(rel).parts[:1] == ("objects",):
            dirs[:] = []
            continue
        for name in files:
            count += 1
            if count > MAX_GIT_COPY:
                return
            src = Path(root, name)
            with contextlib.suppress(OSError):
                meta = os.lstat(src)
                if stat.S_ISREG(meta.st_mode) and meta.st_size <= 65536:
                    (dest / rel / name).write_bytes(src.read_bytes())


def snapshot(git_dir: Path, view: View, limits: SnapshotLimits) -> str:
    """The tree the view's workspace holds now: read from its upper layer, or, after a fallback
    to a fully written tree, from that tree. A path the host cannot read (a directory chain
    deeper than PATH_MAX, an unreadable folder) refuses the candidate, never crashes the step."""
    if view.mode == "full":
        return candidate_tree.snapshot_tree(git_dir, view.tree, view.commit, limits, view.stamps)
    try:
        return snapshot_tree(git_dir, view, limits)
    except OSError as e:
        raise candidate_tree.unreadable(e) from e
