"""A submission's writes without SQLAlchemy (supervisor/state/writer.py), on a real SQLite file:

- what `TaskWriter` writes (a task's row and first events, an event, the task abandoned after a
  failure) is what `Store` writes: the same records read back through the store and the sqlite3
  reader, the same text in the file, every free text redacted;
- a write that fails leaves nothing and no lock behind;
- it serves only a database already at this schema version: a repository with none yet (its
  first command) goes to the store, which creates it.
"""

from __future__ import annotations

import sqlite3
from dataclasses import replace
from typing import TYPE_CHECKING

import pytest

from supervisor.core.errors import StateError
from supervisor.state.reader import StateReader
from supervisor.state.records import EventSpec, Workflow
from supervisor.state.store import Store
from supervisor.state.writer import TaskWriter, open_writer

if TYPE_CHECKING:
    from pathlib import Path

    from supervisor.state.writer import TaskRows

SECRET = "glpat-abcdefghijklmnopqrst"


def create(state: TaskRows, branch_for_id: object = lambda i: f"ai/{i}-add-multiply") -> Workflow:
    return state.create_workflow(
        description=f"Add multiply; the staging key is {SECRET}",
        cli="claude",
        base_branch="main",
        base_sha="a" * 40,
        branch_for_id=branch_for_id,
        definition={"initial_step": "plan", "steps": {"plan": {"role": "planner"}}},
        first_step="plan",
        context={"pinned": {"gates": ["test"], "note": "é, ünïcode"}},
        events=[EventSpec("checks_pinned", status="allowed", payload={"gates": ["test"]})],
    )


def submitted_then_undone(state: TaskRows) -> int:
    """What a submission writes, then what its undo writes (supervisor/temporal/client.py)."""
    wf = create(state)
    state.add_event(wf.id, EventSpec("gates_skipped", status="skipped", payload={"why": SECRET}))
    state.update_workflow(
        wf.id,
        status="abandoned",
        current_step=None,
        context={**state.workflow(wf.id).context, "left": SECRET},
        events=[EventSpec("submission_failed", status="abandoned", payload={"error": "refused"})],
    )
    return wf.id


def existing(db: Path) -> TaskWriter:
    Store(db).close()  # the database a repository's earlier commands made
    writer = TaskWriter.open(db)
    assert writer is not None
    return writer


def test_the_writer_writes_what_the_store_writes(tmp_path: Path) -> None:
    by_store, by_writer = tmp_path / "store.db", tmp_path / "writer.db"
    with Store(by_store) as store:
        first = submitted_then_undone(store)
    with existing(by_writer) as writer:
        second = submitted_then_undone(writer)
        assert writer.workflow(second).task_branch == f"ai/{second}-add-multiply"

    with Store(by_store) as expected, Store(by_writer) as written:
        wf = written.workflow(second)
        untimed = {"created_at": None, "updated_at": None}
        assert replace(wf, **untimed) == replace(expected.workflow(first), **untimed)  # type: ignore[arg-type]
        assert wf.created_at <= wf.updated_at and wf.created_at.tzinfo is None
        events = [replace(e, id=0, timestamp=None) for e in written.events(second)]  # type: ignore[arg-type]
        assert events == [replace(e, id=0, timestamp=None) for e in expected.events(first)]  # type: ignore[arg-type]
        assert [e.type for e in events] == [
            "workflow_started", "checks_pinned", "gates_skipped", "submission_failed"
        ]  # fmt: skip
        assert SECRET not in repr(wf) + repr(events)
    reader = StateReader.open(by_writer)
    assert reader is not None
    with reader, Store(by_writer) as store:
        assert reader.workflow(second) == store.workflow(second)
        assert reader.events(second) == store.events(second)

    def stored(db: Path) -> list[tuple[object, ...]]:
        conn = sqlite3.connect(db)
        rows = conn.execute(
            "SELECT typeof(created_at), length(created_at), length(updated_at), definition, "
            "context, status, current_step, error FROM workflows UNION ALL "
            "SELECT typeof(timestamp), length(timestamp), NULL, payload, NULL, status, type, step "
            "FROM events ORDER BY 6, 7"
        ).fetchall()
        conn.close()
        return rows

    assert stored(by_writer) == stored(by_store)


def test_a_write_that_fails_leaves_nothing_and_no_lock(tmp_path: Path) -> None:
    db = tmp_path / "state.db"

    def unnamed(wf_id: int) -> str:
        raise StateError("No branch name.", "None.")

    with existing(db) as writer:
        with pytest.raises(StateError, match="No branch name"):
            create(writer, branch_for_id=unnamed)
        with Store(db) as store:  # it writes at once: the failed transaction holds nothing
            assert store.workflows() == []
            create(store)
        assert [wf.id for wf in writer.workflows()] == [1]


def test_a_repository_without_a_state_database_is_written_through_the_store(
    tmp_path: Path,
) -> None:
    db = tmp_path / "new" / ".supervisor" / "state.db"
    assert TaskWriter.open(db) is None
    with open_writer(db) as state:
        assert isinstance(state, Store)
        create(state)
    with open_writer(db) as state:
        assert isinstance(state, TaskWriter)  # now at this version
        assert create(state).id == 2
