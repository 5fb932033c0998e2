"""A repository's identity across its clones, and the task queue derived from it.

Every clone of one repository (the submitting checkout, each worker host's) has the same root
commit(s), and another repository has other ones; a fork shares its upstream's, but not the
team's shared remote (temporal.remote). So the identity is a digest of the root commits and
the shared remote's URL, and every task queue is named after it: a queue named by configuration
(temporal.task_queue) or on the command line (`worker --queue`) is that name with the identity
appended. So a worker of another repository never polls this repository's queue, whatever both
were configured with (a shared queue handed a task to whichever worker polled, and one of the
wrong repository could only fail it). The task's identity (`TaskInput.repository`) stays the
last guard of a worker's activities.
"""

from __future__ import annotations

import functools
import hashlib
from typing import TYPE_CHECKING

from supervisor.core import process
from supervisor.core.errors import GitError, ToolFailedError
from supervisor.workspace import treedata

if TYPE_CHECKING:
    from pathlib import Path

    from supervisor.core.config import TemporalSettings


@functools.cache
def repository_id(root: Path, remote: str | None = None) -> str:
    try:
        roots = process.run(
            ["git", *treedata.SAFE_CONFIG, "-C", str(root), "rev-list", "--max-parents=0", "HEAD"]
        ).stdout.split()
    except ToolFailedError as e:
        raise GitError(
            f"{root} has no commit to tell which repository it is: {e.output.strip()[-300:]}",
            "Commit something first (git commit), then submit or start a worker.",
        ) from e
    return hashlib.sha256(" ".join([*sorted(roots), remote or ""]).encode()).hexdigest()[:12]


def queue_for(root: Path, settings: TemporalSettings, named: str | None = None) -> str:
    """The repository's queue: `named` (`worker --queue`), else temporal.task_queue, else
    "supervisor", with the repository's identity appended (unless the name already ends with
    it: the default name, given back on a command line)."""
    own = repository_id(root, settings.remote)
    base = named or settings.task_queue or "supervisor"
    return base if base.endswith(f"-{own}") else f"{base}-{own}"
