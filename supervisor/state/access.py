"""A repository's task state for the commands a person runs between runs: status, events, approve
and reject.

They look up the repository's root and nothing else: no configuration, Docker, engine or workers,
so they start fast (and still work while the configuration is being edited). Reads go through the
sqlite3 reader (supervisor.state.reader); the one write here, a decision, through `Store`.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from supervisor.errors import StateError
from supervisor.state.reader import open_reader
from supervisor.workspace import STATE_DIR, find_repo_root

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from supervisor.state.reader import StateReader
    from supervisor.state.records import Workflow
    from supervisor.state.store import Store


def state_db(path: Path) -> Path:
    """The state database of the repository that holds `path`."""
    return find_repo_root(path) / STATE_DIR / "state.db"


@contextlib.contextmanager
def reading(path: Path) -> Iterator[StateReader | Store]:
    with open_reader(state_db(path)) as state:
        yield state


def workflows(path: Path) -> list[Workflow]:
    db = state_db(path)
    if not db.exists():
        return []
    with open_reader(db) as state:
        return state.workflows()


def supervisors(path: Path, found: list[Workflow]) -> dict[int, int | None]:
    """For each running workflow, the pid of the supervisor running it, or None when none does
    (it crashed or was killed: `supervisor resume <id>` continues it, beside other tasks)."""
    from supervisor.locks import task_holder

    state_dir = state_db(path).parent
    return {wf.id: task_holder(state_dir, wf.id) for wf in found if wf.status == "running"}


def decide(wf_id: int, path: Path, *, approve: bool, reason: str | None = None) -> Workflow:
    """Record a human decision on the pending approval; `resume` acts on it."""
    from supervisor.state.store import Store

    with Store(state_db(path)) as store:
        wf = store.workflow(wf_id)
        approval = store.latest_approval(wf_id)
        if wf.status != "awaiting_approval" or approval is None or approval.status != "pending":
            raise StateError(
                f"Workflow {wf_id} is not waiting for approval (status: {wf.status}).",
                f"Run `supervisor status {wf_id}` to see where it stands.",
            )
        store.decide_approval(approval.id, "approved" if approve else "rejected", reason)
        return store.workflow(wf_id)
