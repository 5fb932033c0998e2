"""The read-only commands' reader: the same records as the store, without SQLAlchemy, and no writes.

`status` and `events` read through supervisor.state.reader (sqlite3) instead of the SQLAlchemy
store, so a person does not wait for SQLAlchemy's import; what they see must not change.
"""

from __future__ import annotations

import sqlite3
from datetime import timedelta
from typing import TYPE_CHECKING

import pytest

from supervisor.core.errors import StateError, UnknownWorkflowError
from supervisor.state.reader import StateReader, open_reader
from supervisor.state.store import EventSpec, Store, now

if TYPE_CHECKING:
    from pathlib import Path


def populated(path: Path) -> tuple[int, int]:
    """Two workflows with steps, events of every shape and an approval each way."""
    with Store(path) as store:
        ids = []
        for description in ("First task", "Second task"):
            wf = store.create_workflow(
                description=description,
                cli="claude",
                base_branch=None if ids else "main",
                base_sha="a" * 40,
                branch_for_id=lambda i: f"ai/{i}-task",
                definition={"initial_step": "plan", "steps": {"plan": {"role": "planner"}}},
                first_step="plan",
            )
            ids.append(wf.id)
            early = now() - timedelta(seconds=5)
            step = store.start_step(wf.id, "plan", 1, "planner", "/tmp/tree", early)
            store.finish_step(
                step,
                "succeeded",
                output={"status": "COMPLETE", "phases": []},
                event=EventSpec("plan", step="plan", role="planner", input_tokens=7, cost_usd=0.5),
            )
            gate = store.start_step(wf.id, "test", 1, None, None)
            store.finish_step(gate, "failed", error="2 tests failed")
            store.add_event(wf.id, EventSpec("note", payload={"nested": {"a": [1, 2]}}))
            store.advance(
                wf.id,
                step="plan",
                next_step="implement",
                context={"plan": {"phases": []}, "feedback": {"plan": ["é, ünïcode"]}},
                status="awaiting_approval",
                request_approval=True,
            )
        store.decide_approval(store.latest_approval(ids[1]).id, "rejected", "Split it")  # type: ignore[union-attr]
        store.set_status(ids[1], "failed", error="a reason")
        return ids[0], ids[1]


def test_the_reader_returns_what_the_store_returns(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    first, second = populated(db)
    reader = StateReader.open(db)
    assert reader is not None
    with reader, Store(db) as store:
        assert reader.workflows() == store.workflows()
        for wf_id in (first, second):
            assert reader.workflow(wf_id) == store.workflow(wf_id)
            assert reader.steps(wf_id) == store.steps(wf_id)
            assert reader.events(wf_id) == store.events(wf_id)
            assert reader.events(wf_id, after_id=2, limit=2) == store.events(
                wf_id, after_id=2, limit=2
            )
            assert reader.usage_totals(wf_id) == store.usage_totals(wf_id)
            assert reader.latest_approval(wf_id) == store.latest_approval(wf_id)
        assert reader.steps(first)[0]["started_at"] < reader.events(first)[1].timestamp
        with pytest.raises(UnknownWorkflowError, match="No workflow with id 99"):
            reader.workflow(99)


def test_the_reader_cannot_write(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    populated(db)
    reader = StateReader.open(db)
    assert reader is not None
    with reader, pytest.raises(sqlite3.OperationalError, match="readonly"):
        reader.conn.execute("DELETE FROM workflows")


def test_what_the_reader_cannot_serve_goes_to_the_store(tmp_path: Path) -> None:
    # No database yet: the store creates it (and then knows no workflow).
    with open_reader(tmp_path / "new" / "state.db") as state:
        assert isinstance(state, Store)
        assert state.workflows() == []
    # An older schema: the store migrates it first.
    db = tmp_path / "old.db"
    populated(db)
    conn = sqlite3.connect(db)
    conn.execute("DELETE FROM schema_migrations WHERE version > 1")
    conn.execute("DROP TABLE invocations")
    conn.execute("DROP TABLE leases")
    conn.commit()
    conn.close()
    assert StateReader.open(db) is None
    with open_reader(db) as state:
        assert isinstance(state, Store)
    with open_reader(db) as state:
        assert isinstance(state, StateReader)  # now at this version
    # A file that is not a database: the store's error, naming the file and the fix.
    junk = tmp_path / "junk.db"
    junk.write_text("not a database")
    with pytest.raises(StateError, match="cannot be opened"):
        open_reader(junk)


def test_usage_totals_follow_every_appended_event_and_an_upgrade_counts_the_old_ones(
    tmp_path: Path,
) -> None:
    """The reader's totals come from running sums a trigger keeps: they match the store's sums
    over the log after more events, and a database from before the sums has them filled in."""
    db = tmp_path / "state.db"
    first, second = populated(db)
    with Store(db) as store:
        store.add_event(first, EventSpec("more", input_tokens=7, output_tokens=2, cost_usd=0.5))
        store.add_event(second, EventSpec("note"))  # no usage: nothing changes
        expected = {wf_id: store.usage_totals(wf_id) for wf_id in (first, second)}
    with StateReader.open(db) as reader:  # type: ignore[union-attr]
        assert {wf_id: reader.usage_totals(wf_id) for wf_id in expected} == expected
        assert reader.usage_totals(99) == {"input_tokens": 0, "output_tokens": 0, "cost_usd": 0.0}
    conn = sqlite3.connect(db)  # back to schema version 3: no sums yet
    conn.execute("DELETE FROM schema_migrations WHERE version = 4")
    conn.execute("DROP TRIGGER events_usage")
    conn.execute("DROP TABLE event_usage")
    conn.commit()
    conn.close()
    Store(db).close()  # the upgrade
    with StateReader.open(db) as reader:  # type: ignore[union-attr]
        assert {wf_id: reader.usage_totals(wf_id) for wf_id in expected} == expected
