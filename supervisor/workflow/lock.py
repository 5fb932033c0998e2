"""One running supervisor per repository.

An exclusive `flock` on `.supervisor/run.lock`: the kernel releases it when the process dies, even
by SIGKILL, so a crash never leaves a stale lock behind that a user must delete by hand.
"""

from __future__ import annotations

import fcntl
import os
from contextlib import contextmanager
from typing import TYPE_CHECKING

from supervisor.errors import WorkflowBusyError

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path


@contextmanager
def repo_lock(state_dir: Path) -> Iterator[None]:
    state_dir.mkdir(parents=True, exist_ok=True)
    path = state_dir / "run.lock"
    with path.open("a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "another process"
            raise WorkflowBusyError(
                f"Another supervisor ({holder}) is running a task in this repository.",
                "Wait for it to finish or stop it; then `supervisor resume <id>` continues "
                "its task.",
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"pid {os.getpid()}")
        handle.flush()
        try:
            yield
        finally:
            handle.seek(0)
            handle.truncate()
            fcntl.flock(handle, fcntl.LOCK_UN)
