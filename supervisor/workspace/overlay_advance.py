"""Bringing a copy-on-write view that is already mounted from its commit to a later one.

A worker container prepared for the step after next (workflow/lookahead.py `beyond`) mounts its
view before the commit it should show exists: the running step is still making it. Once that
commit is known, its difference from the view's commit is written *through the mount* (an
archive the container engine unpacks into the running container), never into the upper layer
beside it: overlayfs defines no result for a layer changed under a mounted overlay.

Only what an archive can say exactly: new and changed files and symlinks, new directories. A
difference that deletes a path (or turns a file into a directory), holds a submodule, or is
larger than MAX_FILES / MAX_BYTES is not advanced: the caller makes a fresh preparation, as it
did before. The host then reads back from the upper layer each path the archive named, and
keeps the preparation only when every one holds exactly what the commit says.
"""

from __future__ import annotations

import io
import os
import stat
import tarfile
import time
from collections.abc import Callable
from pathlib import Path

from supervisor.workspace import treedata
from supervisor.workspace.overlay import View, container_ids, tree_diff
from supervisor.workspace.treedata import EXECUTABLE, REGULAR, SYMLINK, Entry, Stamp

MAX_FILES = 500
MAX_BYTES = 20 * 1024 * 1024


Changes = dict[str, tuple[Entry, bytes]]
"""What a commit adds to or changes in a view's commit: path -> (entry, content)."""


def difference(git_dir: Path, view: View, commit: str) -> Changes | None:
    """What `commit` adds to or changes in the view's commit, with its contents; None when the
    difference is not one an archive can bring (see above)."""
    diff = tree_diff(git_dir, view.commit, commit)
    entries: dict[str, Entry] = {}
    for path, entry in diff.items():
        if entry is None or entry.mode not in (REGULAR, EXECUTABLE, SYMLINK) or not _plain(path):
            return None  # `_plain`: the engine refuses these too; never sent
        entries[path] = entry
    if len(entries) > MAX_FILES:
        return None
    blobs = treedata.read_blobs(git_dir, sorted({e.sha for e in entries.values()}))
    if sum(len(blobs[e.sha]) for e in entries.values()) > MAX_BYTES:
        return None
    return {path: (entry, blobs[entry.sha]) for path, entry in entries.items()}


def archive(git_dir: Path, view: View, commit: str) -> bytes | None:
    """An uncompressed tar of `difference`, owned by the sandbox's user; None as there."""
    changes = difference(git_dir, view, commit)
    return None if changes is None else _tar(view, changes)


def _tar(view: View, changes: Changes) -> bytes:
    shown = {d for p in view.start for d in _parents(p)}
    uid, gid = container_ids()
    now = time.time()
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        made: set[str] = set()
        for path in sorted(changes):
            for folder in _parents(path):
                if folder in shown or folder in made:
                    continue
                made.add(folder)
                info = _info(folder, uid, gid, now)
                info.type, info.mode = tarfile.DIRTYPE, 0o755
                tar.addfile(info)
            entry, content = changes[path]
            info = _info(path, uid, gid, now)
            if entry.mode == SYMLINK:
                info.type, info.linkname, info.mode = tarfile.SYMTYPE, os.fsdecode(content), 0o777
                tar.addfile(info)
            else:
                info.size, info.mode = len(content), 0o755 if entry.mode == EXECUTABLE else 0o644
                tar.addfile(info, io.BytesIO(content))
    return out.getvalue()


def settle(view: View, commit: str, changes: Changes) -> bool:
    """After the archive went in: the view stands for `commit` when its upper layer holds each
    file and link of `changes` exactly (content, executable bit, link target; read with lstat,
    through no link); what the archive did not name is the view's as before. False leaves the
    view as it was, for the caller to discard."""
    stamps: dict[str, Stamp] = {}
    for path, (entry, content) in changes.items():
        held = _held(view.upper, path, entry, content)
        if held is None:
            return False
        if entry.mode != SYMLINK:
            stamps[path] = held
    view.commit = commit
    view.start = dict(sorted({**view.start, **{p: e for p, (e, _) in changes.items()}}.items()))
    view.stamps = {**view.stamps, **stamps}
    return True


def _held(upper: Path, path: str, entry: Entry, content: bytes) -> Stamp | None:
    """The stamp of `path` in the upper layer when it is exactly `entry` (`content`), with
    only real directories above it; else None."""
    parts = path.split("/")
    try:
        for i in range(1, len(parts)):
            if not stat.S_ISDIR(os.lstat(upper.joinpath(*parts[:i])).st_mode):
                return None
        where = upper / path
        info = os.lstat(where)
        if entry.mode == SYMLINK:
            # os.readlink, not Path.readlink: a Path drops a target's "//" and trailing "/".
            target = os.readlink(where)  # noqa: PTH115
            linked = stat.S_ISLNK(info.st_mode) and target == os.fsdecode(content)
            return (0, 0, 0) if linked else None
        executable = bool(info.st_mode & stat.S_IXUSR)
        if not stat.S_ISREG(info.st_mode) or executable != (entry.mode == EXECUTABLE):
            return None
        fd = os.open(where, os.O_RDONLY | os.O_NOFOLLOW)
        with os.fdopen(fd, "rb") as f:
            if f.read(len(content) + 1) != content:
                return None
    except OSError:
        return None
    return (info.st_ino, info.st_size, info.st_mtime_ns)


def advance(
    git_dir: Path,
    view: View,
    commit: str,
    put: Callable[[bytes], None],
) -> bool:
    """Bring the mounted `view` to `commit` through `put` (the archive into the running
    container's workspace); False when it cannot be, or did not come out exactly so."""
    if view.mode != "overlay":
        return False
    if view.commit == commit:
        return True
    changes = difference(git_dir, view, commit)
    if changes is None:
        return False
    if changes:
        put(_tar(view, changes))
    return settle(view, commit, changes)


def _plain(path: str) -> bool:
    """A relative path of named parts only: nothing an archive could place outside the
    workspace, whatever the commit's tree holds."""
    return not path.startswith("/") and all(part not in ("", ".", "..") for part in path.split("/"))


def _parents(path: str) -> list[str]:
    parts = path.split("/")[:-1]
    return ["/".join(parts[: i + 1]) for i in range(len(parts))]


def _info(name: str, uid: int, gid: int, mtime: float) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.uid, info.gid, info.mtime = uid, gid, mtime
    return info
