"""A task's change against its base, read as data: what the TUI's approval screen and the MCP
server's `task_diff` show.

Git runs with hooks, the fsmonitor and external diff/textconv drivers off, on the candidate's
commit (blobs), never a worktree's files: a worker cannot make the host run anything by what it
committed. The diff is cut at a limit the caller chooses, saying how much was left out.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from supervisor.core import process
from supervisor.core.errors import SupervisorError

if TYPE_CHECKING:
    from pathlib import Path

    from supervisor.state.records import Workflow

GIT = ["git", "-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false"]
AS_DATA = ["--no-ext-diff", "--no-textconv"]


def head_of(wf: Workflow) -> str:
    """What a task's change is: its candidate while one waits for approval, else its branch."""
    return str(wf.context.get("candidate") or f"refs/heads/{wf.task_branch}")


def _git(repo: Path, *args: str) -> str:
    return process.run([*GIT, "-C", str(repo), *args]).stdout


def changed_files(repo: Path, base: str, head: str) -> list[tuple[str, str, str]]:
    """(added, deleted, path) per changed file; "-" for a binary file's counts."""
    try:
        out = _git(repo, "diff", "--numstat", *AS_DATA, base, head, "--")
    except SupervisorError:
        return []
    found = []
    for line in out.splitlines():
        parts = line.split("\t", 2)
        if len(parts) == 3:
            found.append((parts[0], parts[1], parts[2]))
    return found


def diff_text(repo: Path, base: str, head: str, limit: int = 400_000) -> str:
    try:
        out = _git(repo, "diff", *AS_DATA, "--no-color", base, head, "--")
    except SupervisorError as e:
        return f"(diff unavailable: {e.message})"
    if len(out) > limit:
        return out[:limit] + f"\n... ({len(out) - limit} more characters not shown)\n"
    return out
