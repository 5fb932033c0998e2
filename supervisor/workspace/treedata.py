"""Reading and writing git trees as data, so that nothing a worker wrote is ever interpreted.

A worker owns its worktree: it can write a `.gitattributes` with a filter, a `.git` that points
at a git dir of its own (whose config names hooks or an fsmonitor), symlinks to host files. Git run
*in* that worktree would honour all of it, on the host. So the host never does: worktrees are
filled from blobs (no checkout, so no smudge filters or eol conversions), candidates are built by
walking the file system with lstat (never following a symlink; a symlink is recorded as one) and
hashing with `hash-object --no-filters` into a temporary index, and every reader of a candidate
gets blobs from the object database, not paths. Every git call here runs against the main
repository's git dir with hooks, fsmonitor and the untracked cache off.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import shutil
import stat
import subprocess
import tempfile
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

from supervisor.core.errors import CandidateRefusedError, GitError
from supervisor.guard.visible import visible

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
MAX_SYMLINK_HOPS = 40


@dataclass(frozen=True)
class Entry:
    mode: str
    sha: str


@dataclass(frozen=True)
class SnapshotLimits:
    max_bytes: int = 200 * 1024 * 1024
    max_files_added: int = 2000


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


def escapes(path: str, target: str, links: dict[str, str]) -> bool:
    """Whether symlink `path` -> `target` resolves outside the repository root, following the
    tree's other symlinks (`links`: path -> target) the way the kernel would."""
    if target.startswith("/"):
        return True
    parts = [*path.split("/")[:-1], *target.split("/")]
    resolved: list[str] = []
    hops = 0
    while parts:
        part = parts.pop(0)
        if part in ("", "."):
            continue
        if part == "..":
            if not resolved:
                return True
            resolved.pop()
            continue
        resolved.append(part)
        current = "/".join(resolved)
        if current in links:
            hops += 1
            if hops > MAX_SYMLINK_HOPS:
                return True  # a loop: refused rather than resolved
            link = links[current]
            if link.startswith("/"):
                return True
            resolved.pop()
            parts = [*link.split("/"), *parts]
    return False


def hashable(path: Path, tmp: Path, i: int) -> str:
    """`path` as `hash-object --stdin-paths` can take it: one line. A name with a newline (a
    worker may make one) is hashed from a copy the host makes, read without following a link."""
    if "\n" not in str(path):
        return str(path)
    copy = tmp / f"nl{i}"
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as source, copy.open("wb") as target:
        shutil.copyfileobj(source, target)
    return str(copy)


def unreadable(error: OSError) -> CandidateRefusedError:
    """A path the host cannot read as data (a directory chain deeper than PATH_MAX, a name the
    file system refuses, a folder the worker made unreadable): the candidate is refused, with
    the path shortened, instead of the error taking the supervisor down."""
    name = os.fsdecode(error.filename or "")
    shown = name if len(name) <= 160 else f"{name[:80]}…{name[-40:]} ({len(name)} characters)"
    return CandidateRefusedError(
        f"The worktree holds a path the host cannot read as data "
        f"({error.strerror or type(error).__name__}): {visible(shown, lines=False)}.",
        "Keep paths short and directory chains shallow (well under 4096 bytes a path), and "
        "leave every folder readable; the candidate was refused.",
        kind="unreadable_path",
    )


def snapshot_tree(
    git_dir: Path,
    worktree: Path,
    base: str,
    limits: SnapshotLimits = SnapshotLimits(),
    stamps: dict[str, Stamp] | None = None,
) -> str:
    """The tree of what `worktree` holds now (see `_snapshot_tree`); a path the host cannot
    read is a refused candidate (`unreadable`), never an OSError out of the step."""
    try:
        return _snapshot_tree(git_dir, worktree, base, limits, stamps)
    except OSError as e:
        raise unreadable(e) from e


def _snapshot_tree(
    git_dir: Path,
    worktree: Path,
    base: str,
    limits: SnapshotLimits,
    stamps: dict[str, Stamp] | None,
) -> str:
    """The tree of what `worktree` holds now, built from the file system as data.

    Paths come from the base tree plus git's list of untracked, not-ignored files (so .gitignore
    is honoured as patterns); each is lstat-ed with every parent checked to be a real directory,
    so nothing is read through a symlink. A file whose stamp is still the one `materialize`
    recorded keeps its base blob (git's own index does the same); the rest is hashed. Raises
    CandidateRefusedError for a tree over the limits or with a new symlink that points outside
    the repository."""
    base_entries = list_tree(git_dir, base)
    with tempfile.TemporaryDirectory(prefix="supervisor-snap-") as tmp:
        listing = git_bytes(
            git_dir,
            "ls-files",
            "-z",
            "--others",
            "--exclude-standard",
            work_tree=worktree,
            env={"GIT_INDEX_FILE": str(Path(tmp, "none"))},
        )
        paths = set(base_entries) | {
            os.fsdecode(p) for p in listing.split(b"\0") if p and not p.endswith(b"/")
        }
        entries, regular, links, total = _scan(worktree, sorted(paths), base_entries, stamps or {})
        added = sorted(set(entries) - set(base_entries))
        refuse_over_limits(total, len(added), limits)
        old = {p: e.sha for p, e in base_entries.items() if e.mode == SYMLINK}
        old_targets = {p: os.fsdecode(b) for p, b in _targets(git_dir, old).items()}
        new_links = {p: t for p, t in links.items() if old_targets.get(p) != t}
        bad = sorted(p for p, t in new_links.items() if escapes(p, t, links))
        refuse_escaping_links(bad, links)
        targets = Path(tmp, "links")
        targets.mkdir()
        hashed = [hashable(worktree / p, targets, i) for i, p in enumerate(regular)]
        for i, p in enumerate(links):
            (targets / str(i)).write_bytes(os.fsencode(links[p]))
            hashed.append(str(targets / str(i)))
        shas = (
            git_bytes(
                git_dir,
                "hash-object",
                "-w",
                "--no-filters",
                "--stdin-paths",
                input_bytes="\n".join(hashed).encode() + b"\n",
            )
            .decode()
            .split()
            if hashed
            else []
        )
        for path, sha in zip([*regular, *links], shas, strict=True):
            entries[path] = Entry(entries[path].mode, sha)
        info = b"".join(
            f"{e.mode} {e.sha}\t".encode() + os.fsencode(p) + b"\0"
            for p, e in sorted(entries.items())
        )
        index = {"GIT_INDEX_FILE": str(Path(tmp, "index"))}
        if info:
            git_bytes(git_dir, "update-index", "-z", "--index-info", input_bytes=info, env=index)
        return git_bytes(git_dir, "write-tree", env=index).decode().strip()


def _targets(git_dir: Path, links: dict[str, str]) -> dict[str, bytes]:
    blobs = read_blobs(git_dir, list(links.values()))
    return {p: blobs[sha] for p, sha in links.items()}


def _scan(
    worktree: Path, paths: list[str], base: dict[str, Entry], stamps: dict[str, Stamp]
) -> tuple[dict[str, Entry], list[str], dict[str, str], int]:
    """lstat every candidate path: (entries, regular files to hash, symlinks, total bytes)."""
    entries: dict[str, Entry] = {}
    regular: list[str] = []
    links: dict[str, str] = {}
    total = 0
    real_dirs: dict[str, bool] = {"": True}
    for path in paths:
        parts = path.split("/")
        if ".git" in parts or not all(
            _real_dir(worktree, parts[:i], real_dirs) for i in range(1, len(parts))
        ):
            continue
        with contextlib.suppress(FileNotFoundError, NotADirectoryError):
            info = os.lstat(worktree / path)
            if stat.S_ISLNK(info.st_mode):
                links[path] = str((worktree / path).readlink())
                entries[path] = Entry(SYMLINK, "")
            elif stat.S_ISREG(info.st_mode):
                mode = EXECUTABLE if info.st_mode & stat.S_IXUSR else REGULAR
                total += info.st_size
                stamp = (info.st_ino, info.st_size, info.st_mtime_ns)
                if path in base and base[path].mode == mode and stamps.get(path) == stamp:
                    entries[path] = base[path]
                    continue
                entries[path] = Entry(mode, "")
                regular.append(path)
            elif stat.S_ISDIR(info.st_mode) and base.get(path, Entry("", "")).mode == GITLINK:
                entries[path] = base[path]  # a submodule stays what the base says
    return entries, regular, links, total


def _real_dir(worktree: Path, parts: list[str], cache: dict[str, bool]) -> bool:
    key = "/".join(parts)
    if key not in cache:
        try:
            cache[key] = stat.S_ISDIR(os.lstat(worktree / key).st_mode)
        except (FileNotFoundError, NotADirectoryError):  # gone, or not a folder: skipped
            cache[key] = False
    return cache[key]


def refuse_over_limits(total_bytes: int, added: int, limits: SnapshotLimits) -> None:
    """The worktree size and new-file limits, the same for a full worktree and an overlay view."""
    if total_bytes > limits.max_bytes:
        raise CandidateRefusedError(
            f"The worktree holds {total_bytes / 2**20:.0f} MB of files, over the limit of "
            f"{limits.max_bytes / 2**20:.0f} MB.",
            "Do not commit large generated or binary files; raise limits.max_worktree_mb "
            "if the project needs them.",
            kind="worktree_too_large",
        )
    if added > limits.max_files_added:
        raise CandidateRefusedError(
            f"The step added {added} files, over the limit of {limits.max_files_added}.",
            "Add only the files the task needs; raise limits.max_files_added if it needs more.",
            kind="too_many_files",
        )


def refuse_escaping_links(bad: list[str], links: dict[str, str]) -> None:
    """New symlinks whose target leaves the repository (`bad`, with targets in `links`)."""
    if bad:
        raise CandidateRefusedError(
            "Symlinks pointing outside the repository are refused: "
            + ", ".join(f"{p} -> {links[p]}" for p in bad)
            + ".",
            "Remove them; link only to files inside the repository, with relative targets.",
            kind="symlink_escape",
        )
