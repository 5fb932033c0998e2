"""The state schema written once (supervisor/state/records.py `TABLES`, state/columns.py),
checked against real databases:

- what the migrations build, on SQLite and PostgreSQL, is what the rows declare: every column's
  type, nullability, primary key and reference;
- a workflow and its events written by each path (the store on SQLite and on PostgreSQL, the
  fast sqlite3 writer on SQLite) read back as the same records through each reader (the store;
  the sqlite3 reader where the database is SQLite): the same values, JSON and times alike.
"""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import pytest
from sqlalchemy import inspect

from supervisor.state.columns import Kind, columns
from supervisor.state.reader import DECODED, StateReader
from supervisor.state.records import TABLES, Event, EventSpec, Workflow
from supervisor.state.store import Store
from supervisor.state.writer import TaskWriter

if TYPE_CHECKING:
    from pathlib import Path

    from supervisor.state.writer import TaskRows

# Each kind as the migrations spell it (supervisor/state/migrations.py, postgres.py).
SQLITE_TYPES = {
    Kind.INTEGER: {"INTEGER"},
    Kind.VARCHAR: {"VARCHAR"},
    Kind.TEXT: {"TEXT"},
    Kind.JSON: {"JSON"},
    Kind.TIME: {"DATETIME"},
    Kind.FLOAT: {"FLOAT", "DOUBLE PRECISION"},
    Kind.BOOLEAN: {"BOOLEAN"},
}
POSTGRES_TYPES = {
    Kind.INTEGER: {"integer"},
    Kind.VARCHAR: {"character varying"},
    Kind.TEXT: {"text"},
    Kind.JSON: {"json"},
    Kind.TIME: {"timestamp with time zone"},
    Kind.FLOAT: {"double precision"},
    Kind.BOOLEAN: {"boolean"},
}


def test_the_migrated_schema_is_the_one_the_rows_declare(tmp_path: Path, state_url: str) -> None:
    with Store(tmp_path / "state.db", url=state_url) as store, store.engine.connect() as conn:
        inspector = inspect(conn)
        for table, row in TABLES.items():
            found = {c["name"]: c for c in inspector.get_columns(table)}
            assert list(found) == [c.name for c in columns(row)], table
            keys = inspector.get_pk_constraint(table)["constrained_columns"]
            assert keys == [c.name for c in columns(row) if c.key], table
            refs = {
                (fk["constrained_columns"][0], f"{fk['referred_table']}.id")
                for fk in inspector.get_foreign_keys(table)
            }
            assert refs == {(c.name, c.references) for c in columns(row) if c.references}, table
            for column in columns(row):
                if not column.key:  # SQLite reports an INTEGER PRIMARY KEY nullable
                    assert found[column.name]["nullable"] == column.nullable, (table, column)
            if state_url:
                spelled = conn.exec_driver_sql(
                    "SELECT column_name, data_type FROM information_schema.columns "
                    "WHERE table_name = %(t)s",
                    {"t": table},
                ).all()
                types = POSTGRES_TYPES
            else:
                spelled = [
                    (r[1], r[2]) for r in conn.exec_driver_sql(f"PRAGMA table_info({table})")
                ]
                types = SQLITE_TYPES
            kinds = {c.name: c.kind for c in columns(row)}
            assert {
                (name, kind) for name, kind in spelled if kind not in types[kinds[name]]
            } == set()


def test_a_column_name_is_one_kind_in_every_table() -> None:
    """The sqlite3 reader decodes a column by its name alone (reader.DECODED)."""
    for row in TABLES.values():
        for column in columns(row):
            assert DECODED.get(column.name, column.kind) == column.kind, (row, column)


SECRET = "glpat-abcdefghijklmnopqrst"
PAYLOAD = {
    "text": 'é, ünïcode, 🚀, "quoted", back\\slash, tab\t',
    "numbers": [0, -1, 2**53, 0.1, 1e-9, 3.5],
    "flags": [True, False, None],
    "nested": {"a": {"b": [{"c": "d"}]}, "empty": {}, "none": []},
}


def written(state: TaskRows) -> int:
    """A task, its first events, an event and the task abandoned: what every path writes."""
    wf = state.create_workflow(
        description=f"Add multiply; the key is {SECRET}",
        cli="claude",
        base_branch=None,
        base_sha="a" * 40,
        branch_for_id=lambda i: f"ai/{i}-add-multiply",
        definition={"initial_step": "plan", "steps": {"plan": {"role": "planner"}}},
        first_step="plan",
        context={"pinned": PAYLOAD},
        events=[EventSpec("checks_pinned", status="allowed", payload=PAYLOAD)],
    )
    state.add_event(
        wf.id,
        EventSpec(
            "worker_finished", step="plan", role="planner", status="succeeded",
            payload={"why": SECRET}, input_tokens=1200, output_tokens=0, cost_usd=0.1234567,
        ),
    )  # fmt: skip
    state.add_event(wf.id, EventSpec("bare"))
    state.update_workflow(
        wf.id,
        status="abandoned",
        current_step=None,
        context={**state.workflow(wf.id).context, "left": SECRET},
        events=[EventSpec("submission_failed", status="abandoned", payload={"error": "refused"})],
    )
    return wf.id


EXPECTED_WORKFLOW = {
    "description": "Add multiply; the key is [REDACTED:gitlab_token]",
    "status": "abandoned",
    "current_step": None,
    "cli": "claude",
    "base_branch": None,
    "base_sha": "a" * 40,
    "definition": {"initial_step": "plan", "steps": {"plan": {"role": "planner"}}},
    "context": {"pinned": PAYLOAD, "left": "[REDACTED:gitlab_token]"},
    "error": None,
}
EXPECTED_EVENTS = [
    ("workflow_started", None, None, None,
     {"description": "Add multiply; the key is [REDACTED:gitlab_token]"}, None, None, None),
    ("checks_pinned", None, None, "allowed", PAYLOAD, None, None, None),
    ("worker_finished", "plan", "planner", "succeeded", {"why": "[REDACTED:gitlab_token]"},
     1200, 0, 0.1234567),
    ("bare", None, None, None, {}, None, None, None),
    ("submission_failed", None, None, "abandoned", {"error": "refused"}, None, None, None),
]  # fmt: skip

PATHS = [
    pytest.param("store", "sqlite", id="store-sqlite"),
    pytest.param("writer", "sqlite", id="writer-sqlite"),
    pytest.param(
        "store", "postgresql", id="store-postgresql", marks=pytest.mark.xdist_group("postgres")
    ),
]


def readers(db: Path, url: str) -> list[Any]:
    if url:
        return [Store(db, url=url)]
    reader = StateReader.open(db)
    assert reader is not None
    return [Store(db), reader]


@pytest.mark.parametrize(("path", "backend"), PATHS)
def test_a_row_written_by_each_path_reads_back_the_same(
    tmp_path: Path, request: pytest.FixtureRequest, path: str, backend: str
) -> None:
    url = str(request.getfixturevalue("pg_cluster").database()) if backend == "postgresql" else ""
    db = tmp_path / "state.db"
    before = datetime.now(UTC).replace(tzinfo=None)
    with Store(db, url=url) as store:
        if path == "store":
            wf_id = written(store)
    if path == "writer":
        writer = TaskWriter.open(db)
        assert writer is not None
        with writer:
            wf_id = written(writer)
    after = datetime.now(UTC).replace(tzinfo=None)

    seen: list[tuple[Workflow, list[Event], Event | None]] = []
    for reader in readers(db, url):
        with reader:
            seen.append((reader.workflow(wf_id), reader.events(wf_id), reader.last_event(wf_id)))
    for wf, events, last in seen:
        assert (wf, events, last) == seen[0]  # every reader, the same records
        assert {k: getattr(wf, k) for k in EXPECTED_WORKFLOW} == EXPECTED_WORKFLOW
        assert wf.task_branch == f"ai/{wf_id}-add-multiply"
        times = [wf.created_at, wf.updated_at, *(e.timestamp for e in events)]
        assert all(t.tzinfo is None and before <= t <= after for t in times), times
        assert wf.created_at <= wf.updated_at
        assert [
            (e.type, e.step, e.role, e.status, e.payload, e.input_tokens, e.output_tokens,
             e.cost_usd)
            for e in events
        ] == EXPECTED_EVENTS  # fmt: skip
        assert {e.workflow_id for e in events} == {wf_id}
        assert [e.id for e in events] == sorted({e.id for e in events})
        assert last == events[-1]
        assert all(isinstance(e.cost_usd, float) for e in events if e.cost_usd is not None)


def test_the_sqlite3_reader_reads_every_table_as_the_store_does(tmp_path: Path) -> None:
    """Steps, approvals and raw rows of each table, decoded by kind, equal the store's."""
    db = tmp_path / "state.db"
    with Store(db) as store:
        wf_id = written(store)
        step = store.start_step(wf_id, "plan", 1, "planner", "/w/1")
        store.finish_step(
            step, "succeeded", output=PAYLOAD,
            invocation={"workflow_id": wf_id, "step": "plan", "role": "planner", "cli": "claude",
                        "success": True, "retries": 0, "duration_s": 1.5, "input_tokens": 3,
                        "output_tokens": 4, "cost_usd": 0.25},
        )  # fmt: skip
        store.advance(wf_id, step="plan", next_step="code", context={}, request_approval=True)
        expected_steps = store.steps(wf_id)
        expected_approval = store.latest_approval(wf_id)
        with store.engine.connect() as conn:
            by_store = {
                table: [dict(r._mapping) for r in conn.execute(store_table.select())]
                for table, store_table in _store_tables().items()
            }
    reader = StateReader.open(db)
    assert reader is not None
    with reader:
        assert reader.steps(wf_id) == expected_steps
        assert expected_steps[0]["output"] == PAYLOAD
        assert reader.latest_approval(wf_id) == expected_approval
        for table, rows in by_store.items():
            assert reader._rows(f"SELECT * FROM {table}") == rows, table
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT count(*) FROM invocations").fetchone() == (1,)
    conn.close()


def _store_tables() -> dict[str, Any]:
    from supervisor.state import schema

    return dict(schema.metadata.tables)
