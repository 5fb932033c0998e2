"""The task's refs from the shared remote into the submitting checkout, for a person about to
decide: with a remote (temporal.remote), the candidate of a review was made on a worker host and
exists only there and on the remote, so the diff an approval shows is fetched first.

Only the supervisor's refs of the task move (`refs/supervisor/wf<id>/*`, never a branch that
may be checked out); git runs with hooks off; the URL is the one the user's own supervisor
recorded at submission. Imports neither pydantic nor the Temporal SDK (`status` loads this).
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from supervisor.core import process
from supervisor.core.errors import SupervisorError

if TYPE_CHECKING:
    from pathlib import Path

    from supervisor.state.records import Workflow

SAFE = ["-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false"]


def submitted_remote(wf_id: int, repo: Path) -> str | None:
    from supervisor.state.location import state_db_beside_git
    from supervisor.state.reader import open_reader

    db = state_db_beside_git(repo)
    if db is None:
        from supervisor.workspace.host_git import STATE_DIR, find_repo_root

        db = find_repo_root(repo) / STATE_DIR / "state.db"
    with open_reader(db) as state:
        found = [e.payload for e in state.events(wf_id) if e.type == "temporal_submitted"]
    url = found[-1].get("remote") if found else None
    return str(url) if url else None


def fetch_task_refs(wf: Workflow, repo: Path) -> None:
    """Fetch the task's supervisor refs when the task went to a shared remote; a remote out of
    reach leaves the local refs (the diff then says what is missing)."""
    with contextlib.suppress(SupervisorError):
        url = submitted_remote(wf.id, repo)
        if not url:
            return
        own = f"refs/supervisor/wf{wf.id}"
        process.run(
            ["git", *SAFE, "-C", str(repo), "fetch", "--no-tags", "--quiet", url,
             f"+{own}/*:{own}/*"],
            timeout=60,
        )  # fmt: skip
