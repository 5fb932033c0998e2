"""The push of a task's gated commit to the user's remote.

Only the commit the caller names (the one the gates passed) is pushed, to the task's branch on
the remote, as a fast-forward: a branch someone else moved on the remote is refused, not
overwritten. git runs as everywhere on the host, with hooks (a `pre-push` hook of the
repository's) and fsmonitor off; the credentials are the user's own git login (a credential
helper, an SSH key), never handed to the supervisor.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from supervisor.core import process
from supervisor.core.errors import CommandTimeoutError, GitError, ToolFailedError
from supervisor.workspace import treedata

if TYPE_CHECKING:
    from pathlib import Path


def push_commit(repo: Path, remote: str, sha: str, branch: str) -> None:
    argv = ["git", *treedata.SAFE_CONFIG, "-C", str(repo), "push", "--porcelain", "--no-verify"]
    try:
        process.run([*argv, remote, f"{sha}:refs/heads/{branch}"], timeout=300)
    except (ToolFailedError, CommandTimeoutError) as e:
        output = e.output if isinstance(e, ToolFailedError) else e.message
        moved = "non-fast-forward" in output or "fetch first" in output or "rejected" in output
        raise GitError(
            (
                f"{remote} has commits on {branch} that the task's branch lacks; pushing would "
                "drop them."
                if moved
                else f"git push to {remote} failed: {output.strip()[-1500:]}"
            ),
            f"Look at {remote}/{branch} (`git fetch {remote}`); delete or rename it there if it "
            "is not this task's, then run the command again."
            if moved
            else f"Check that you can push to {remote} (`git push --dry-run {remote}`).",
        ) from e
