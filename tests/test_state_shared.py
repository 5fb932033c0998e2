"""A state database shared by several processes (and, with PostgreSQL, several hosts): concurrent
writers lose nothing and decide an approval exactly once; PostgreSQL keeps the same rules as SQLite.

Real processes, real databases: SQLite's file, and a throwaway PostgreSQL cluster
(tests/pg_support.py) for the `[postgresql]` variants.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy.exc import DatabaseError

from supervisor.core.errors import ConfigError, StateError
from supervisor.state.migrations import LATEST_VERSION
from supervisor.state.schema import metadata
from supervisor.state.store import EventSpec, Store

HERE = Path(__file__).parent
WRITERS, ROUNDS = 4, 15


def _workflow(store: Store) -> int:
    return store.create_workflow(
        description="Shared",
        cli="claude",
        base_branch="main",
        base_sha="a" * 40,
        branch_for_id=lambda i: f"ai/{i}-shared",
        definition={"initial_step": "plan", "steps": {}},
        first_step="plan",
    ).id


def test_concurrent_writers_from_several_processes_lose_nothing(
    tmp_path: Path, state_url: str
) -> None:
    db = tmp_path / "state.db"
    with Store(db, url=state_url) as store:
        wf_id = _workflow(store)
        store.advance(wf_id, step="plan", next_step="plan", context={}, request_approval=True)
        approval = store.latest_approval(wf_id)
        assert approval is not None
    env = {**os.environ, "PYTHONPATH": str(HERE.parent)}
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                str(HERE / "state_writer.py"),
                str(db),
                state_url,
                str(wf_id),
                str(w),
                str(ROUNDS),
                str(approval.id),
                str(WRITERS),
            ],
            env=env,
            stderr=subprocess.PIPE,
            text=True,
        )
        for w in range(WRITERS)
    ]
    errors = [p.communicate(timeout=180)[1] for p in procs]
    assert [p.returncode for p in procs] == [0] * WRITERS, errors
    with Store(db, url=state_url) as store:
        events = store.events(wf_id)
        ticks = sorted(
            (e.payload["writer"], e.payload["round"]) for e in events if e.type == "tick"
        )
        assert ticks == sorted((str(w), r) for w in range(WRITERS) for r in range(ROUNDS))
        ids = [e.id for e in events]
        assert ids == sorted(set(ids))
        steps = store.steps(wf_id)
        assert len(steps) == WRITERS * ROUNDS
        assert {s["status"] for s in steps} == {"succeeded"}
        assert len(store.checkpoints(wf_id)) == 1 + WRITERS * ROUNDS
        # Every writer voted; the approval was decided once, by the last vote.
        assert [e.type for e in events].count("approval_vote") == WRITERS
        decided = [e for e in events if e.type == "approval_decided"]
        assert len(decided) == 1
        assert len(set(decided[0].payload["approvers"])) == WRITERS
        final = store.latest_approval(wf_id)
        assert final is not None and final.status == "approved"


@pytest.mark.xdist_group("postgres")
def test_postgresql_schema_from_empty_matches_the_declared_tables(pg_cluster: object) -> None:
    url = pg_cluster.database()  # type: ignore[attr-defined]
    Store(Path("/nonexistent/state.db"), url=url).close()
    with Store(Path("/nonexistent/state.db"), url=url) as store:  # set-up is idempotent
        assert store.integrity_ok()
        assert set(metadata.tables) <= set(store.iter_tables())
        with store.engine.connect() as conn:
            versions = [r[0] for r in conn.exec_driver_sql("SELECT version FROM schema_migrations")]
            assert sorted(versions) == list(range(1, LATEST_VERSION + 1))
            for name, table in metadata.tables.items():
                rows = conn.exec_driver_sql(
                    "SELECT column_name FROM information_schema.columns WHERE table_name = %(t)s",
                    {"t": name},
                )
                assert {r[0] for r in rows} == {c.name for c in table.columns}, name
    assert not Path("/nonexistent").exists()  # nothing written beside a shared database


@pytest.mark.xdist_group("postgres")
def test_a_postgresql_schema_at_every_migration_opens_without_the_hosts_set_up_lock(
    pg_cluster: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A submission opens the shared store and waits for each round trip: a schema already at
    every migration is not set up again, so it neither waits for another host's set-up lock nor
    takes it (here held by another session; a wait would end in the lock timeout's error)."""
    import psycopg
    from sqlalchemy.engine import make_url

    from supervisor.state.postgres import SETUP_LOCK_KEY

    url = pg_cluster.database()  # type: ignore[attr-defined]
    Store(Path("/nonexistent/state.db"), url=url).close()  # created, every migration recorded
    parts = make_url(url)
    with psycopg.connect(
        host=parts.host, port=parts.port, user=parts.username, password=parts.password,
        dbname=parts.database, autocommit=True,
    ) as other:  # fmt: skip
        other.execute("SELECT pg_advisory_lock(%s)", (SETUP_LOCK_KEY,))
        monkeypatch.setenv("PGOPTIONS", "-c lock_timeout=1000")
        with Store(Path("/nonexistent/state.db"), url=url) as store:
            wf_id = _workflow(store)
            assert store.workflow(wf_id).status == "running"


@pytest.mark.xdist_group("postgres")
def test_postgresql_events_cannot_be_truncated_and_a_newer_schema_is_refused(
    pg_cluster: object,
) -> None:
    url = pg_cluster.database()  # type: ignore[attr-defined]
    with Store(Path("state.db"), url=url) as store:
        wf_id = _workflow(store)
        store.add_event(wf_id, EventSpec("note"))
        with store.engine.begin() as conn, pytest.raises(DatabaseError, match="append-only"):
            conn.exec_driver_sql("TRUNCATE events CASCADE")
        assert [e.type for e in store.events(wf_id)] == ["workflow_started", "note"]
        with store.engine.begin() as conn:
            conn.exec_driver_sql(
                "INSERT INTO schema_migrations VALUES (999, 'future', '2030-01-01T00:00:00Z')"
            )
    with pytest.raises(StateError, match="newer supervisor") as info:
        Store(Path("state.db"), url=url)
    assert "://supervisor:***@127.0.0.1" in str(info.value)  # the password is not shown


def test_an_unreachable_postgresql_names_the_fix(tmp_path: Path) -> None:
    from pg_support import free_port

    url = f"postgresql+psycopg://u:secret@127.0.0.1:{free_port()}/nope"
    with pytest.raises(StateError, match="cannot be reached") as info:
        Store(tmp_path / "state.db", url=url)
    assert "secret" not in str(info.value)
    assert "pg_hba.conf" in info.value.hint
    with pytest.raises(StateError, match="driver 'mysql'"):
        Store(tmp_path / "state.db", url="mysql://u@h/db")


def test_state_url_comes_from_the_user_config_never_the_project(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from supervisor.state.location import state_url

    user = tmp_path / "user"
    user.mkdir()
    monkeypatch.setenv("SUPERVISOR_USER_DIR", str(user))
    monkeypatch.delenv("SUPERVISOR_STATE_URL", raising=False)
    repo = tmp_path / "repo" / ".supervisor"
    repo.mkdir(parents=True)
    (repo / "config.yaml").write_text("state:\n  url: postgresql+psycopg://evil@attacker/db\n")
    monkeypatch.chdir(tmp_path / "repo")
    assert state_url() is None
    (user / "config.yaml").write_text("cli: claude\nstate:\n  url: postgresql+psycopg://me@db/s\n")
    assert state_url() == "postgresql+psycopg://me@db/s"
    monkeypatch.setenv("SUPERVISOR_STATE_URL", "postgresql+psycopg://env@db/s")
    assert state_url() == "postgresql+psycopg://env@db/s"
    monkeypatch.delenv("SUPERVISOR_STATE_URL")
    (user / "config.yaml").write_text("state:\n  url: 42\n")
    with pytest.raises(ConfigError, match="must be a database URL"):
        state_url()


def test_a_project_config_cannot_choose_the_state_database_nor_unvetted_temporal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from supervisor.core.config import load_settings
    from supervisor.guard.trust import guarded_settings

    monkeypatch.setenv("SUPERVISOR_USER_DIR", str(tmp_path / "user"))
    repo = tmp_path / "repo"
    (repo / ".supervisor").mkdir(parents=True)
    config = repo / ".supervisor" / "config.yaml"
    config.write_text("state:\n  url: postgresql+psycopg://evil@attacker/db\n")
    with pytest.raises(ConfigError, match="user's choice") as info:
        load_settings(repo)
    assert "~/.supervisor/config.yaml" in info.value.hint
    # The Temporal server a task is submitted to is credential routing: trusted or refused.
    config.write_text("temporal: {address: 'attacker:7233', task_queue: q}\n")
    assert guarded_settings(repo) == {"temporal.address": "attacker:7233"}
