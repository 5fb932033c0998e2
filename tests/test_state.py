"""The state database: versioned schema from empty, append-only events, atomic state changes."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import pytest
from sqlalchemy.exc import DatabaseError, StatementError

from supervisor.core.errors import StateError, UnknownWorkflowError
from supervisor.state.migrations import LATEST_VERSION
from supervisor.state.schema import metadata
from supervisor.state.store import EventSpec, StepRecord, Store

if TYPE_CHECKING:
    from pathlib import Path


def _new_workflow(store: Store) -> int:
    wf = store.create_workflow(
        description="Add a feature",
        cli="claude",
        base_branch="main",
        base_sha="a" * 40,
        branch_for_id=lambda i: f"ai/{i}-add-a-feature",
        definition={"initial_step": "plan", "steps": {}},
        first_step="plan",
    )
    return wf.id


def test_schema_built_from_empty_matches_the_declared_tables(tmp_path: Path) -> None:
    with Store(tmp_path / "state.db") as store:
        tables = set(store.iter_tables())
    assert set(metadata.tables) <= tables
    conn = sqlite3.connect(tmp_path / "state.db")
    versions = [r[0] for r in conn.execute("SELECT version FROM schema_migrations")]
    assert versions == list(range(1, LATEST_VERSION + 1))
    for name, table in metadata.tables.items():
        columns = {r[1] for r in conn.execute(f"PRAGMA table_info({name})")}
        assert columns == {c.name for c in table.columns}, name


def test_database_uses_wal_and_setup_is_idempotent(tmp_path: Path) -> None:
    Store(tmp_path / "state.db").close()
    with Store(tmp_path / "state.db") as store:
        assert store.integrity_ok()
    mode = sqlite3.connect(tmp_path / "state.db").execute("PRAGMA journal_mode").fetchone()[0]
    assert mode == "wal"


def test_a_database_from_a_newer_supervisor_is_refused(tmp_path: Path) -> None:
    Store(tmp_path / "state.db").close()
    conn = sqlite3.connect(tmp_path / "state.db")
    conn.execute("INSERT INTO schema_migrations VALUES (999, 'future', '2030-01-01')")
    conn.commit()
    with pytest.raises(StateError, match="newer supervisor"):
        Store(tmp_path / "state.db")


def test_a_file_that_is_not_a_database_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "state.db").write_text("not sqlite at all " * 100)
    with pytest.raises(StateError, match="cannot be opened"):
        Store(tmp_path / "state.db")


def test_events_are_append_only_in_the_database_itself(tmp_path: Path, state_url: str) -> None:
    with Store(tmp_path / "state.db", url=state_url) as store:
        wf_id = _new_workflow(store)
        store.add_event(wf_id, EventSpec("note", payload={"x": 1}))
        with store.engine.begin() as conn, pytest.raises(DatabaseError, match="append-only"):
            conn.exec_driver_sql("UPDATE events SET type = 'forged'")
        with store.engine.begin() as conn, pytest.raises(DatabaseError, match="append-only"):
            conn.exec_driver_sql("DELETE FROM events")
        assert [e.type for e in store.events(wf_id)] == ["workflow_started", "note"]


def test_one_kind_of_event_is_read_without_the_rest_of_the_log(
    tmp_path: Path, state_url: str
) -> None:
    with Store(tmp_path / "state.db", url=state_url) as store:
        wf_id = _new_workflow(store)
        for n in range(3):
            store.add_event(wf_id, EventSpec("note", payload={"n": n}))
            store.add_event(wf_id, EventSpec("other"))
        notes = store.events(wf_id, of_type="note")
        assert [e.payload["n"] for e in notes] == [0, 1, 2]
        assert store.events(wf_id, of_type="absent") == []


def test_advance_records_checkpoint_event_and_next_step_together(
    tmp_path: Path, state_url: str
) -> None:
    with Store(tmp_path / "state.db", url=state_url) as store:
        wf_id = _new_workflow(store)
        store.advance(
            wf_id,
            step="plan",
            next_step="implement",
            context={"plan": {"status": "COMPLETE"}},
            git_sha="b" * 40,
            events=[EventSpec("plan", step="plan", input_tokens=10, output_tokens=5, cost_usd=0.5)],
        )
        wf = store.workflow(wf_id)
        assert wf.current_step == "implement"
        assert wf.context == {"plan": {"status": "COMPLETE"}}
        assert [c["step"] for c in store.checkpoints(wf_id)] == ["plan"]
        assert store.checkpoints(wf_id)[0]["git_sha"] == "b" * 40
        assert store.usage_totals(wf_id) == {
            "input_tokens": 10,
            "output_tokens": 5,
            "cost_usd": 0.5,
        }


def test_a_failed_transaction_leaves_the_previous_state(tmp_path: Path, state_url: str) -> None:
    with Store(tmp_path / "state.db", url=state_url) as store:
        wf_id = _new_workflow(store)
        # The event is the transaction's last statement: the update before it must roll back.
        # (SQLite's driver serialises JSON through SQLAlchemy, psycopg itself: TypeError.)
        with pytest.raises((StatementError, TypeError)):
            store.advance(
                wf_id,
                step="plan",
                next_step="implement",
                context={"plan": "done"},
                events=[EventSpec("plan", payload={"unserialisable": object()})],
            )
        wf = store.workflow(wf_id)
        assert wf.current_step == "plan"
        assert store.checkpoints(wf_id) == []


def test_a_run_s_clean_up_waits_until_its_step_s_end_has_committed(
    tmp_path: Path, state_url: str
) -> None:
    """What holds a worker's answer is removed only once its step's end is recorded: a failed
    transaction (a crash in it alike) leaves it for `resume` to adopt."""
    cleaned: list[str] = []
    with Store(tmp_path / "state.db", url=state_url) as store:
        wf_id = _new_workflow(store)
        plan = store.start_step(wf_id, "plan", 1, "planner", "/tmp/wt")
        other = store.start_step(wf_id, "review", 1, "reviewer", "/tmp/wt2")
        store.after_record.wait_for(plan, lambda: cleaned.append("plan"))
        store.finish_step(other, "succeeded")
        store.after_record.drain()
        assert cleaned == []
        with pytest.raises((StatementError, TypeError)):
            store.transition(
                wf_id,
                step="plan",
                next_step="implement",
                context={},
                records=[StepRecord(plan, "succeeded")],
                events=[EventSpec("plan", payload={"unserialisable": object()})],
            )
        store.after_record.drain()
        assert cleaned == []
        store.transition(
            wf_id, step="plan", next_step="implement", context={},
            records=[StepRecord(plan, "succeeded")],
        )  # fmt: skip
        store.after_record.drain()  # behind the engine: the next step does not wait for it
        assert cleaned == ["plan"]
        store.finish_step(plan, "succeeded")
        store.after_record.drain()
        assert cleaned == ["plan"]  # once


def test_running_steps_left_by_a_crash_become_interrupted(tmp_path: Path, state_url: str) -> None:
    with Store(tmp_path / "state.db", url=state_url) as store:
        wf_id = _new_workflow(store)
        store.start_step(wf_id, "implement", 1, "implementer", "/tmp/wt")
        assert store.interrupt_running_steps(wf_id) == ["implement"]
        assert store.running_steps(wf_id) == []
        assert store.events(wf_id)[-1].type == "step_interrupted"


def test_an_approval_is_decided_once(tmp_path: Path, state_url: str) -> None:
    with Store(tmp_path / "state.db", url=state_url) as store:
        wf_id = _new_workflow(store)
        store.advance(
            wf_id,
            step="plan",
            next_step="implement",
            context={},
            status="awaiting_approval",
            request_approval=True,
        )
        approval = store.latest_approval(wf_id)
        assert approval is not None and approval.status == "pending"
        store.decide_approval(approval.id, "rejected", "too broad")
        with pytest.raises(StateError, match="already decided"):
            store.decide_approval(approval.id, "approved", None)
        decided = store.latest_approval(wf_id)
        assert decided is not None and decided.reason == "too broad"


def test_times_read_back_are_naive_utc_whatever_the_backend_and_its_zone(
    tmp_path: Path, state_url: str
) -> None:
    # Readers subtract the state's times from each other and from the clock (elapsed time,
    # waits): PostgreSQL must give the same kind as SQLite, even in a session zone far from UTC.
    if state_url:
        import psycopg

        with psycopg.connect(state_url.replace("postgresql+psycopg://", "postgresql://")) as conn:
            conn.execute(
                "DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET timezone TO %L', "
                "current_database(), 'Asia/Kolkata'); END $$"
            )
    before = datetime.now(UTC).replace(tzinfo=None)
    with Store(tmp_path / "state.db", url=state_url) as store:
        wf = store.workflow(_new_workflow(store))
        step_id = store.start_step(wf.id, "plan", 1, "planner", "/tmp/wt")
        (step,) = store.steps(wf.id)
    after = datetime.now(UTC).replace(tzinfo=None)
    for stamp in (wf.created_at, wf.updated_at, step["started_at"]):
        assert stamp.tzinfo is None
        assert before - timedelta(seconds=1) <= stamp <= after + timedelta(seconds=1)
    assert step_id


def test_an_unknown_workflow_id_names_the_fix(tmp_path: Path, state_url: str) -> None:
    with (
        Store(tmp_path / "state.db", url=state_url) as store,
        pytest.raises(UnknownWorkflowError, match="No workflow with id 42") as info,
    ):
        store.workflow(42)
    assert "supervisor status" in info.value.hint


def test_nothing_secret_is_stored_whatever_the_caller_passes(tmp_path: Path) -> None:
    from secret_samples import SAMPLES

    _, line, secret = SAMPLES["sendgrid"]
    path = tmp_path / "state.db"
    with Store(path) as store:
        wf = store.create_workflow(
            description=f"Rotate {line}",
            cli="claude",
            base_branch="main",
            base_sha="a" * 40,
            branch_for_id=lambda i: f"ai/{i}-rotate",
            definition={"initial_step": "plan", "steps": {}},
            first_step="plan",
        )
        step = store.start_step(wf.id, "test", 1, None, None)
        gate = EventSpec("gate", step="test", payload={"output_tail": f"FAIL\n{line}"})
        store.finish_step(step, "failed", error=f"gate failed: {line}", event=gate)
        store.advance(wf.id, step="test", next_step="plan", context={"feedback": {"plan": [line]}})
        store.set_status(wf.id, "failed", error=line, event=EventSpec("workflow_failed"))
        stored = store.workflow(wf.id)
        assert "[REDACTED:sendgrid_api_key]" in stored.description
        assert "[REDACTED:sendgrid_api_key]" in store.events(wf.id)[-2].payload["output_tail"]
    assert secret.encode() not in b"".join(p.read_bytes() for p in tmp_path.glob("state.db*"))
