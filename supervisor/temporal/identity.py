"""A repository's identity across its clones, and the task queue derived from it.

Every clone of one repository (the submitting checkout, each worker host's) has the same root
commit(s), and another repository has other ones; a fork shares its upstream's, but not the
team's shared remote (temporal.remote). So the identity is a digest of the root commits and
the shared remote's URL, and the default task queue is named after it. A worker of another
repository never polls the queue, and when a queue is shared by configuration, the task's identity
(`TaskInput.repository`) lets a worker refuse it instead of running it in the wrong clone.
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


def queue_for(root: Path, settings: TemporalSettings) -> str:
    """temporal.task_queue when set, else one queue per repository."""
    return settings.task_queue or f"supervisor-{repository_id(root, settings.remote)}"
