"""A worker's worktree read as data into a git tree: the candidate a step proposes.

Apart from treedata.py, which moves content between the object database and the file system
(listing trees, reading blobs, writing a worktree), because everything here reads what a worker
wrote and decides whether it may become a commit at all: paths are lstat-ed and never followed,
a file is hashed from its bytes with no filters, and a candidate over the size or new-file
limits, with a new symlink out of the repository, or with a path the host cannot read is refused
(CandidateRefusedError) rather than committed. overlay_tree.py builds the same tree from a
copy-on-write view with these checks.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path

from supervisor.core.errors import CandidateRefusedError
from supervisor.guard.visible import visible
from supervisor.workspace.treedata import (
    EXECUTABLE,
    GITLINK,
    REGULAR,
    SYMLINK,
    Entry,
    Stamp,
    git_bytes,
    list_tree,
    read_blobs,
)

MAX_SYMLINK_HOPS = 40


@dataclass(frozen=True)
class SnapshotLimits:
    """What a candidate may hold: its files' bytes in all, and the files it adds to its base."""

    max_bytes: int = 200 * 1024 * 1024
    max_files_added: int = 2000


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
