"""A set-up made once per test run and shared by every pytest-xdist process that needs it.

A session fixture is made once per process; with `-n 3` an expensive one (a project image built
from a lock file) would be made up to three times, or its specs pinned to one process, which then
runs them all one after another (the `ts_project` group was a third of the run that way,
benchmarks/test-durations.md). Here the first process to ask makes it under an exclusive lock on a
file in the run's shared temporary directory (the parent of every process's base temp under xdist);
the others wait on the lock and find it made. Users register under the same lock, so the last one
to leave removes what must not outlive the run, and one arriving after that makes it again."""

from __future__ import annotations

import contextlib
import fcntl
import os
import uuid
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    import pytest


def shared_dir(factory: pytest.TempPathFactory, name: str) -> Path:
    """`name` in the directory every process of this run shares (its own base temp without
    xdist: then this process is the whole run)."""
    base = factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@contextlib.contextmanager
def locked(folder: Path) -> Iterator[None]:
    """Exclusive among the run's processes (fcntl: released by the kernel if one dies)."""
    with (folder / "lock").open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _users(folder: Path) -> set[str]:
    path = folder / "users"
    return set(path.read_text().split()) if path.is_file() else set()


def join(folder: Path) -> str:
    """Called under `locked`: a user of the shared set-up until it calls `leave` with the token
    returned (one per fixture, not per process: pytest may set up one fixture of two modules)."""
    token = f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
    (folder / "users").write_text("\n".join(sorted(_users(folder) | {token})))
    return token


def leave(folder: Path, token: str) -> bool:
    """Called under `locked`: True when no other user is left."""
    left = _users(folder) - {token}
    (folder / "users").write_text("\n".join(sorted(left)))
    return not left
