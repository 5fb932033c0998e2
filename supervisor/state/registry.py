"""The repositories this user ran tasks in, so that one dashboard (`supervisor web`) can find them
all without being told each path.

A list of repository roots in `~/.supervisor/repositories.json` (the user's own directory, never a
repository's: a repository must not choose which others the dashboard opens), most recent last.
It is a convenience, never a condition of a task: remembering fails silently (a read-only or full
home must not stop a task), and a file that is not what this module writes (hand-edited, truncated,
hostile, huge) reads as empty and is replaced on the next write. Writers take an fcntl lock on a
sibling file and replace the list atomically, so two tasks started at once both stay listed.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from supervisor.core.config import user_dir
from supervisor.state.location import STATE_DIR

if TYPE_CHECKING:
    from collections.abc import Iterator

log = logging.getLogger(__name__)

FILE_NAME = "repositories.json"
LIMIT = 500
"""Roots kept: the oldest go first. A dashboard opens each one's database, so no unbounded list."""
MAX_BYTES = 1_000_000
"""A file larger than this is not one this module wrote (500 paths of ~4 KB at most: 2 MB would be
absurd paths), and reading it whole must not cost the dashboard's start."""


def registry_file() -> Path:
    return user_dir() / FILE_NAME


def remember(repo: Path) -> None:
    """Add `repo`'s resolved root as the most recent. Never raises: the registry only helps the
    dashboard find repositories, and a task must start even when the home cannot be written."""
    try:
        root = str(Path(repo).resolve())
        path = registry_file()
        path.parent.mkdir(parents=True, exist_ok=True)
        with _locked(path):
            roots = [r for r in _read(path) if r != root]
            roots.append(root)
            _write(path, roots[-LIMIT:])
    except (OSError, ValueError) as e:
        log.debug("could not remember %s in the repository registry: %s", repo, e)


def repositories() -> list[Path]:
    """The remembered roots that still hold a state database, most recent first. A repository
    whose database is gone (deleted, moved, never created because its state is shared) is left
    out, not an error: the list is a memory, and the dashboard shows what it can open."""
    seen: set[str] = set()
    found: list[Path] = []
    for root in reversed(_read(registry_file())):
        if root in seen:
            continue
        seen.add(root)
        if state_db_of(Path(root)).is_file():
            found.append(Path(root))
    return found


def state_db_of(root: Path) -> Path:
    """The SQLite state database of the repository at `root`. Not
    location.state_db_beside_git: that one answers None whenever $GIT_DIR is set, which would
    hide every repository from a dashboard started in such an environment."""
    return root / STATE_DIR / "state.db"


def _read(path: Path) -> list[str]:
    """The roots in `path`; anything else than a list of absolute paths as strings reads as none."""
    try:
        with path.open("rb") as handle:
            raw = handle.read(MAX_BYTES + 1)
    except OSError:
        return []
    if len(raw) > MAX_BYTES:
        return []
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):
        return []
    if not isinstance(data, dict) or data.get("version") != 1:
        return []
    roots = data.get("repositories")
    if not isinstance(roots, list):
        return []
    return [r for r in roots if _is_root(r)][-LIMIT:]


def _is_root(item: object) -> bool:
    return (
        isinstance(item, str)
        and 0 < len(item) <= 4096
        and Path(item).is_absolute()
        and not any(ord(c) < 32 or ord(c) == 127 for c in item)
    )


def _write(path: Path, roots: list[str]) -> None:
    """Replace `path` whole (temp file, fsync, rename): a reader or a crash never sees half."""
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    temp = Path(name)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump({"version": 1, "repositories": roots}, handle, indent=1)
            handle.write("\n")
            handle.flush()
            os.fsync(handle.fileno())
        temp.replace(path)
    except BaseException:
        with contextlib.suppress(OSError):
            temp.unlink()
        raise


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Held across read-modify-write: two writers at once would each drop the other's root."""
    with path.with_name(path.name + ".lock").open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
