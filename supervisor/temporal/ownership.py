"""Which repository a state database belongs to: the one whose live tasks it holds.

A state database (state.url, or a clone's `.supervisor/state.db`) is one repository's: its task
ids name tasks of that repository's clones (their branches, their refs on the team's remote). A
task submitted to it from another repository's checkout (a copied config, a shared
`SUPERVISOR_STATE_URL`) is one no worker can run: this repository's workers refuse the database
from then on, and the other's never read it. So ownership is checked where a task is written
(`start-task --backend temporal`, before anything is) as where tasks are run (`supervisor
worker`, before it polls), by the same query: the repositories that the submissions of the
database's live tasks recorded (the `temporal_submitted` event, supervisor/temporal/client.py).
An abandoned task counts for nothing: `abandon` of a misplaced task hands the database back.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from supervisor.core.errors import StateError

if TYPE_CHECKING:
    from pathlib import Path

# One statement both drivers run (the light sqlite3 reader and SQLAlchemy's PostgreSQL or SQLite).
OTHERS_SQL = (
    "SELECT e.workflow_id, e.payload FROM events e JOIN workflows w ON w.id = e.workflow_id "
    "WHERE e.type = 'temporal_submitted' AND w.status <> 'abandoned' ORDER BY e.workflow_id"
)
FIX = (
    "Give each repository its own database (state.url or SUPERVISOR_STATE_URL; "
    "`bash scripts/setup-scaleout.sh --trial` prints one per repository)"
)


class ForeignTasks(dict[int, dict[str, Any]]):
    """Task id -> its submission's record, for the live tasks of other repositories."""

    def repositories(self) -> list[str]:
        return sorted({str(s.get("repository")) for s in self.values()})

    def said(self) -> str:
        """`repository X (task(s) 3, 4, submitted from host:/path)`, one per repository."""
        parts = []
        for repo in self.repositories():
            ids = [i for i, s in self.items() if s.get("repository") == repo]
            shown = ", ".join(map(str, ids[:5])) + (", ..." if len(ids) > 5 else "")
            checkouts = [str(self[i]["checkout"]) for i in ids if self[i].get("checkout")]
            whence = f", submitted from {checkouts[0]}" if checkouts else ""
            parts.append(f"repository {repo} (task(s) {shown}{whence})")
        return "; ".join(parts)


def foreign_tasks(store: Any, own: str) -> ForeignTasks:
    """The live tasks whose submission recorded a repository other than `own`. `store`: a
    `Store` (its SQLAlchemy engine) or a light sqlite3 reader or writer (its `conn`)."""
    conn = getattr(store, "conn", None)
    if conn is not None:
        rows = list(conn.execute(OTHERS_SQL).fetchall())
    else:
        from sqlalchemy import text

        with store.engine.connect() as connection:
            rows = list(connection.execute(text(OTHERS_SQL)).fetchall())
    found = ForeignTasks()
    for row in rows:
        wf_id, payload = row[0], row[1]
        data = payload if isinstance(payload, dict) else json.loads(payload or "{}")
        if data.get("repository") not in (None, "", own):
            found[int(wf_id)] = data
    return found


def where_state(state_dir: Path) -> str:
    from supervisor.state.location import state_url

    return "The shared state database (state.url)" if state_url() else str(state_dir / "state.db")


def refuse_submission(store: Any, own: str, root: Path, state_dir: Path) -> None:
    """Refuse, before anything is written, a task of repository `own` (the checkout `root`)
    for a database that holds live tasks of another repository."""
    others = foreign_tasks(store, own)
    if others:
        raise StateError(
            f"{where_state(state_dir)} belongs to {others.said()}; this checkout ({root}) is "
            f"repository {own}, so its task is not submitted there.",
            f"{FIX}, and set this repository's; a task submitted there by mistake goes with "
            "`supervisor abandon <id>` from any clone.",
        )


def refuse_worker(store: Any, own: str, state_dir: Path) -> None:
    """Refuse to poll for a database holding live tasks of another repository: their ids name
    other tasks in this clone."""
    others = foreign_tasks(store, own)
    if others:
        raise StateError(
            f"{where_state(state_dir)} holds tasks of another repository: {others.said()}; "
            f"this clone is repository {own}.",
            f"{FIX}, and set this one's; or, if those tasks were submitted here by mistake, "
            f"`supervisor abandon {min(others)}` (each of them) hands the database back.",
        )
