"""Reading and writing git trees as data, so that nothing a worker wrote is ever interpreted.

A worker owns its worktree: it can write a `.gitattributes` with a filter, a `.git` that points
at a git dir of its own (whose config names hooks or an fsmonitor), symlinks to host files. Git run
*in* that worktree would honour all of it, on the host. So the host never does: worktrees are
filled from blobs (no checkout, so no smudge filters or eol conversions), candidates are built by
walking the file system with lstat (never following a symlink; a symlink is recorded as one) and
hashing with `hash-object --no-filters` into a temporary index (candidate_tree.py), and every
reader of a candidate gets blobs from the object database, not paths. Every git call here runs
against the main repository's git dir with hooks, fsmonitor and the untracked cache off.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import subprocess
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

from supervisor.core.errors import GitError

# Hooks, fsmonitor (a command git runs), the untracked cache (state git writes into the index).
SAFE_CONFIG = (
    "-c",
    "core.hooksPath=/dev/null",
    "-c",
    "core.fsmonitor=false",
    "-c",
    "core.untrackedCache=false",
)
REGULAR, EXECUTABLE, SYMLINK, GITLINK = "100644", "100755", "120000", "160000"
EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"


@dataclass(frozen=True)
class Entry:
    mode: str
    sha: str


def git_bytes(
    git_dir: Path,
    *args: str,
    input_bytes: bytes | None = None,
    env: dict[str, str] | None = None,
    work_tree: Path | None = None,
    timeout: float = 300,
) -> bytes:
    """git against an explicit git dir (never discovered from a path a worker controls)."""
    argv = ["git", f"--git-dir={git_dir}", *SAFE_CONFIG]
    if work_tree is not None:
        argv.append(f"--work-tree={work_tree}")
    argv += args
    try:
        proc = subprocess.run(
            argv,
            input=input_bytes,
            stdin=None if input_bytes is not None else subprocess.DEVNULL,
            capture_output=True,
            timeout=timeout,
            env={**os.environ, **(env or {})},
            check=False,
        )
    except subprocess.TimeoutExpired as e:
        raise GitError(
            f"git {' '.join(args[:2])} did not finish within {timeout:.0f} s.",
            "Check the repository with `git fsck`; nothing was changed.",
        ) from e
    if proc.returncode != 0:
        raise GitError(
            f"git {' '.join(args[:3])} failed: {proc.stderr.decode(errors='replace')[-1500:]}",
            "Check the repository's state with `git status`; nothing was changed by the failed "
            "command.",
        )
    return proc.stdout


OBJECT_NAME = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
"""A full object name (SHA-1 or SHA-256): it names the same content for as long as it exists,
unlike a ref or an abbreviation."""


def list_tree(git_dir: Path, commit: str) -> dict[str, Entry]:
    """Every entry of `commit`'s tree, recursively: path -> (mode, sha). A commit named by its
    full object name is listed once per process (a step lists its base several times: its
    files, its view, its pack, its gate's checks); a ref is listed every time."""
    if OBJECT_NAME.fullmatch(commit):
        return dict(_listed(str(git_dir), commit))
    return _list_tree(git_dir, commit)


@functools.lru_cache(maxsize=32)
def _listed(git_dir: str, commit: str) -> dict[str, Entry]:
    return _list_tree(Path(git_dir), commit)


def _list_tree(git_dir: Path, commit: str) -> dict[str, Entry]:
    out = git_bytes(git_dir, "ls-tree", "-r", "-z", "--full-tree", commit)
    entries: dict[str, Entry] = {}
    for record in out.split(b"\0"):
        if not record:
            continue
        meta, _, path = record.partition(b"\t")
        mode, _, sha = meta.decode().split(" ")
        entries[os.fsdecode(path)] = Entry(mode, sha)
    return entries


def read_blobs(git_dir: Path, shas: list[str]) -> dict[str, bytes]:
    """The contents of blobs, by sha: those read before in this process from memory (a step
    reads its base's files for its worktree, its pack and its checks), the rest in one
    `cat-file --batch`."""
    wanted = list(dict.fromkeys(shas))
    blobs = _BLOBS.take(git_dir, wanted)
    missing = [sha for sha in wanted if sha not in blobs]
    if not missing:
        return blobs
    out = git_bytes(git_dir, "cat-file", "--batch", input_bytes="\n".join(missing).encode() + b"\n")
    pos = 0
    for sha in missing:
        end = out.index(b"\n", pos)
        header = out[pos:end].decode().split(" ")
        if len(header) != 3:
            raise GitError(f"Object {sha} is missing from the repository.", "Run `git fsck`.")
        size = int(header[2])
        blobs[sha] = out[end + 1 : end + 1 + size]
        pos = end + 1 + size + 1
    _BLOBS.keep(git_dir, {sha: blobs[sha] for sha in missing})
    return blobs


class _Blobs:
    """Blobs by repository and full object name, the most recently used up to BUDGET bytes. By
    repository too: a process serving several (a team worker) must not hand one repository's
    file to another whose tree names an object it does not have."""

    BUDGET = 64 << 20
    LARGEST = 1 << 20

    def __init__(self) -> None:
        self._kept: OrderedDict[tuple[str, str], bytes] = OrderedDict()
        self._size = 0
        self._lock = threading.Lock()

    def take(self, git_dir: Path, shas: list[str]) -> dict[str, bytes]:
        found: dict[str, bytes] = {}
        with self._lock:
            for sha in shas:
                data = self._kept.get((str(git_dir), sha))
                if data is not None:
                    self._kept.move_to_end((str(git_dir), sha))
                    found[sha] = data
        return found

    def keep(self, git_dir: Path, blobs: dict[str, bytes]) -> None:
        with self._lock:
            for sha, data in blobs.items():
                key = (str(git_dir), sha)
                if len(data) > self.LARGEST or not OBJECT_NAME.fullmatch(sha) or key in self._kept:
                    continue
                self._kept[key] = data
                self._size += len(data)
            while self._size > self.BUDGET:
                _, dropped = self._kept.popitem(last=False)
                self._size -= len(dropped)


_BLOBS = _Blobs()


Stamp = tuple[int, int, int]
"""(inode, size, mtime in ns) of a file as written from a blob: unchanged, its blob is reused."""


def materialize(
    git_dir: Path,
    commit: str,
    dest: Path,
    *,
    symlinks: bool = True,
    paths: set[str] | None = None,
    entries: dict[str, Entry] | None = None,
) -> dict[str, Stamp]:
    """Write `commit`'s files under `dest` exactly as stored (no filters, no eol conversion);
    the stamps of the regular files written.

    `symlinks=False` leaves symlinks out entirely: what the host itself reads must be regular
    files it wrote. `entries`: just these of `commit`'s (known already), not its whole tree."""
    if entries is None:
        entries = list_tree(git_dir, commit)
    if paths is not None:
        entries = {p: e for p, e in entries.items() if p in paths}
    blobs = read_blobs(git_dir, [e.sha for e in entries.values() if e.mode != GITLINK])
    stamps: dict[str, Stamp] = {}
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
    # Directory descriptors, so each file is created by name in its parent (as git does) rather
    # than by resolving its whole path again: thousands of files per worktree.
    dirs = {"": os.open(dest, os.O_RDONLY | os.O_DIRECTORY)}

    def directory(rel: str) -> int:
        if rel not in dirs:
            parent, _, name = rel.rpartition("/")
            fd = directory(parent)
            with contextlib.suppress(FileExistsError):
                os.mkdir(name, 0o755, dir_fd=fd)
            dirs[rel] = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
        return dirs[rel]

    try:
        for path, entry in sorted(entries.items()):
            parent, _, name = path.rpartition("/")
            at = directory(parent)
            if entry.mode == GITLINK:
                directory(path)
            elif entry.mode == SYMLINK:
                if symlinks:
                    os.symlink(os.fsdecode(blobs[entry.sha]), name, dir_fd=at)
            else:
                fd = os.open(name, flags, 0o755 if entry.mode == EXECUTABLE else 0o644, dir_fd=at)
                try:
                    data = memoryview(blobs[entry.sha])
                    while data:
                        data = data[os.write(fd, data) :]
                    info = os.fstat(fd)
                    stamps[path] = (info.st_ino, info.st_size, info.st_mtime_ns)
                finally:
                    os.close(fd)
    finally:
        for fd in dirs.values():
            os.close(fd)
    return stamps


class CommitFiles:
    """A candidate commit's files, read as blobs; symlinks and submodules are not files here."""

    def __init__(self, git_dir: Path, commit: str) -> None:
        self.git_dir = git_dir
        self.commit = commit
        self._entries = list_tree(git_dir, commit)
        self._cache: dict[str, bytes] = {}

    def files(self) -> list[str]:
        return sorted(p for p, e in self._entries.items() if e.mode in (REGULAR, EXECUTABLE))

    def symlinks(self) -> list[str]:
        return sorted(p for p, e in self._entries.items() if e.mode == SYMLINK)

    def entry(self, path: str) -> Entry | None:
        return self._entries.get(path)

    def link_target(self, path: str) -> str:
        """What a symlink of the commit points to, as recorded (never followed)."""
        sha = self._entries[path].sha
        return os.fsdecode(read_blobs(self.git_dir, [sha])[sha])

    def read(self, path: str) -> bytes | None:
        """A regular file's bytes; None for a symlink, a submodule or a missing path."""
        return self.read_many([path]).get(path)

    def read_many(self, paths: list[str]) -> dict[str, bytes]:
        regular = [
            p
            for p in paths
            if p not in self._cache
            and p in self._entries
            and self._entries[p].mode in (REGULAR, EXECUTABLE)
        ]
        blobs = read_blobs(self.git_dir, [self._entries[p].sha for p in regular])
        for p in regular:
            self._cache[p] = blobs[self._entries[p].sha]
        return {p: self._cache[p] for p in paths if p in self._cache}
