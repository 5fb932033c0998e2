"""Reading a repository's (or a worktree's) files on the host without following its links.

A worker or a repository can put a symlink where a config file is expected
(`.supervisor/config.yaml` pointing at the user's own, a Dockerfile pointing at `/etc/shadow`), so
every host-side read of their files goes through here: a regular file reached through real
directories only, never a `..`, never an absolute path. The trust checks, the project image, the
approval policy and the context packer all read this way.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

NEVER_READ = frozenset({".repomixignore"})
"""Names no host-side read returns: Repomix would obey them if a pack carried them."""


def readable(rel: str) -> bool:
    """A relative path that stays inside the tree it is read from."""
    parts = rel.split("/")
    return (
        bool(rel) and not rel.startswith("/") and ".." not in parts and parts[-1] not in NEVER_READ
    )


def read_regular(root: Path, paths: list[str]) -> dict[str, bytes]:
    """The bytes of each path under `root` that is a regular file reached through real
    directories only: nothing is read through a symlink."""
    found: dict[str, bytes] = {}
    for rel in paths:
        if not readable(rel):
            continue
        parts = rel.split("/")
        try:
            if any(
                not stat.S_ISDIR(os.lstat(root.joinpath(*parts[:i])).st_mode)
                for i in range(1, len(parts))
            ):
                continue
            fd = os.open(root / rel, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            continue
        with os.fdopen(fd, "rb") as handle:
            if stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                found[rel] = handle.read()
    return found
