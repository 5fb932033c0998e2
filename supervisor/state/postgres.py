"""PostgreSQL as the state database, for a team that shares one across hosts (issue 15).

SQLite stays the default; `state.url: postgresql+psycopg://user:pass@host/db` (the user's own
config, or $SUPERVISOR_STATE_URL: supervisor/state/location.py) switches `Store` to this. The
tables, the migrations' version numbers and the rules are the same; what differs is spelled here:
- each migration's SQL in PostgreSQL's dialect (`PG_MIGRATIONS`, the same versions as
  `migrations.MIGRATIONS`, so an upgrade is the same sequence on both);
- the events table is append-only by a trigger that raises on UPDATE and DELETE, as in SQLite;
- schema set-up is serialised across hosts by a transaction-level advisory lock, not a file lock;
- concurrent writers: every write is one transaction at READ COMMITTED, whose UPDATEs take row
  locks, and the one read-modify-write (an approval vote) locks its approval row first
  (`SELECT ... FOR UPDATE`, a no-op in SQLite, whose writers are serialised by the database lock).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from supervisor.core.errors import StateError, StateUnavailableError

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection, Engine

# Any 64-bit constant held by no other application on the database: "supervis" in ASCII.
SETUP_LOCK_KEY = 0x7375706572766973

_APPEND_ONLY = [
    """CREATE FUNCTION events_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
       BEGIN RAISE EXCEPTION 'events are append-only'; END $$""",
    """CREATE TRIGGER events_no_update BEFORE UPDATE ON events
       FOR EACH ROW EXECUTE FUNCTION events_append_only()""",
    """CREATE TRIGGER events_no_delete BEFORE DELETE ON events
       FOR EACH ROW EXECUTE FUNCTION events_append_only()""",
    # TRUNCATE skips row triggers; a statement trigger refuses it too.
    """CREATE TRIGGER events_no_truncate BEFORE TRUNCATE ON events
       FOR EACH STATEMENT EXECUTE FUNCTION events_append_only()""",
]

PG_MIGRATIONS: dict[int, list[str]] = {
    1: [
        """CREATE TABLE workflows (
            id SERIAL PRIMARY KEY,
            description TEXT NOT NULL,
            status VARCHAR NOT NULL,
            current_step VARCHAR,
            cli VARCHAR NOT NULL,
            base_branch VARCHAR,
            base_sha VARCHAR NOT NULL,
            task_branch VARCHAR NOT NULL,
            definition JSON NOT NULL,
            context JSON NOT NULL,
            error TEXT,
            created_at TIMESTAMP WITH TIME ZONE NOT NULL,
            updated_at TIMESTAMP WITH TIME ZONE NOT NULL
        )""",
        """CREATE TABLE steps (
            id SERIAL PRIMARY KEY,
            workflow_id INTEGER NOT NULL REFERENCES workflows (id),
            name VARCHAR NOT NULL,
            attempt INTEGER NOT NULL,
            role VARCHAR,
            status VARCHAR NOT NULL,
            worktree VARCHAR,
            container_id VARCHAR,
            output JSON,
            error TEXT,
            started_at TIMESTAMP WITH TIME ZONE NOT NULL,
            finished_at TIMESTAMP WITH TIME ZONE
        )""",
        """CREATE TABLE events (
            id SERIAL PRIMARY KEY,
            workflow_id INTEGER REFERENCES workflows (id),
            step VARCHAR,
            type VARCHAR NOT NULL,
            role VARCHAR,
            status VARCHAR,
            payload JSON NOT NULL,
            input_tokens INTEGER,
            output_tokens INTEGER,
            cost_usd DOUBLE PRECISION,
            timestamp TIMESTAMP WITH TIME ZONE NOT NULL
        )""",
        """CREATE TABLE checkpoints (
            id SERIAL PRIMARY KEY,
            workflow_id INTEGER NOT NULL REFERENCES workflows (id),
            step VARCHAR NOT NULL,
            git_sha VARCHAR,
            status VARCHAR NOT NULL,
            next_step VARCHAR,
            timestamp TIMESTAMP WITH TIME ZONE NOT NULL
        )""",
        """CREATE TABLE approvals (
            id SERIAL PRIMARY KEY,
            workflow_id INTEGER NOT NULL REFERENCES workflows (id),
            step VARCHAR NOT NULL,
            status VARCHAR NOT NULL,
            reason TEXT,
            requested_at TIMESTAMP WITH TIME ZONE NOT NULL,
            decided_at TIMESTAMP WITH TIME ZONE
        )""",
        "CREATE INDEX ix_events_workflow ON events (workflow_id, id)",
        "CREATE INDEX ix_steps_workflow ON steps (workflow_id, id)",
        "CREATE INDEX ix_checkpoints_workflow ON checkpoints (workflow_id, id)",
        "CREATE INDEX ix_approvals_workflow ON approvals (workflow_id, id)",
        *_APPEND_ONLY,
    ],
    2: [
        """CREATE TABLE invocations (
            id SERIAL PRIMARY KEY,
            workflow_id INTEGER REFERENCES workflows (id),
            step VARCHAR,
            role VARCHAR NOT NULL,
            cli VARCHAR NOT NULL,
            model VARCHAR,
            task_type VARCHAR,
            success BOOLEAN NOT NULL,
            retries INTEGER NOT NULL,
            duration_s DOUBLE PRECISION NOT NULL,
            input_tokens INTEGER NOT NULL,
            output_tokens INTEGER NOT NULL,
            cost_usd DOUBLE PRECISION NOT NULL,
            error_category VARCHAR,
            timestamp TIMESTAMP WITH TIME ZONE NOT NULL
        )""",
        "CREATE INDEX ix_invocations_time ON invocations (timestamp)",
    ],
    4: [
        "CREATE INDEX IF NOT EXISTS ix_events_usage "
        "ON events (workflow_id, input_tokens, output_tokens, cost_usd)"
    ],
    5: ["CREATE INDEX IF NOT EXISTS ix_events_type ON events (workflow_id, type, id)"],
    6: [
        """CREATE TABLE IF NOT EXISTS web_tokens (
            id SERIAL PRIMARY KEY,
            email VARCHAR NOT NULL,
            digest VARCHAR NOT NULL,
            created_at TIMESTAMP WITH TIME ZONE NOT NULL,
            revoked_at TIMESTAMP WITH TIME ZONE,
            last_used_at TIMESTAMP WITH TIME ZONE
        )""",
        "CREATE UNIQUE INDEX IF NOT EXISTS ux_web_tokens_digest ON web_tokens (digest)",
    ],
}

MIGRATIONS_TABLE = (
    "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, "
    "name VARCHAR NOT NULL, applied_at TIMESTAMP WITH TIME ZONE NOT NULL)"
)


IDLE_IN_TRANSACTION_FLOOR = 5.0  # seconds; a short test lease does not end a loaded writer's


def is_postgres(url: str | None) -> bool:
    return bool(url) and str(url).startswith(("postgresql:", "postgresql+"))


def make_engine(url: str, connect_args: dict[str, Any] | None = None) -> Engine:
    """An engine for `url`; only the psycopg (3) driver is supported, since it is the one pinned."""
    from sqlalchemy import create_engine
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        parsed = make_url(url)
    except ArgumentError as e:
        raise StateError(
            f"state.url is not a database URL: {e}",
            "Write it as postgresql+psycopg://USER:PASSWORD@HOST:PORT/DATABASE.",
        ) from e
    if parsed.drivername not in ("postgresql", "postgresql+psycopg"):
        raise StateError(
            f"state.url uses the driver {parsed.drivername!r}; supervisor ships psycopg (3).",
            "Write it as postgresql+psycopg://USER:PASSWORD@HOST:PORT/DATABASE.",
        )
    try:
        import psycopg  # noqa: F401  (a clear error before SQLAlchemy's)
    except ImportError as e:
        raise StateError(
            "state.url names PostgreSQL but the psycopg driver is not installed.",
            'pip install "psycopg[binary]" (requirements.txt pins it), or unset state.url.',
        ) from e
    from sqlalchemy import event

    from supervisor.state.leases import ttl

    engine = create_engine(
        parsed.set(drivername="postgresql+psycopg"),
        pool_pre_ping=True,
        connect_args={
            "connect_timeout": 10,
            "application_name": "supervisor",
            **(connect_args or {}),
        },
    )
    # A process paused (SIGSTOP) or cut off inside a transaction keeps its session, and the
    # transaction's row locks, for as long as its kernel answers TCP: a host taking its task
    # over then waited on the lease row forever. The server ends a session idle inside a
    # transaction after the lease's time to live; ours are never idle in one (each is a block of
    # statements, no work between them), so only a silent holder's is ended. Set per connection,
    # not as a startup option, which connection poolers such as PgBouncer refuse.
    idle_ms = round(max(ttl(), IDLE_IN_TRANSACTION_FLOOR) * 1000)

    @event.listens_for(engine, "connect")
    def _bounded_idle(dbapi_connection: Any, _record: Any) -> None:
        with dbapi_connection.cursor() as cursor:
            cursor.execute(f"SET idle_in_transaction_session_timeout = {idle_ms}")
        dbapi_connection.commit()

    return engine


def describe(url: str) -> str:
    """The URL without its password, for messages."""
    from sqlalchemy.engine import make_url

    return make_url(url).render_as_string(hide_password=True)


def lock_setup(conn: Connection) -> None:
    """Serialise schema set-up with every other host until the caller's transaction ends."""
    from sqlalchemy import text

    conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": SETUP_LOCK_KEY})


def table_names(conn: Connection) -> list[str]:
    from sqlalchemy import text

    rows = conn.execute(
        text(
            "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() ORDER BY tablename"
        )
    )
    return [str(r[0]) for r in rows]


def unreachable(url: str, error: Any) -> StateError:
    return StateUnavailableError(
        f"The state database {describe(url)} cannot be reached or used: {error}",
        "Check that PostgreSQL runs there, that the user, password and database in state.url "
        "exist (createdb), and that this host may connect (pg_hba.conf).",
    )
