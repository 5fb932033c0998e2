"""Versioned schema changes, applied in order and recorded in `schema_migrations`.

Each migration is plain SQL so that an old database and a new one built from empty end up with the
same schema; a later change appends a migration, it never edits an applied one. SQLAlchemy is
imported by the functions that apply them, so that reading LATEST_VERSION (the read-only commands
do, supervisor.state.reader) costs nothing.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

MIGRATIONS: list[tuple[int, str, list[str]]] = [
    (
        1,
        "initial schema",
        [
            """CREATE TABLE workflows (
                id INTEGER PRIMARY KEY AUTOINCREMENT,
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
                created_at DATETIME NOT NULL,
                updated_at DATETIME NOT NULL
            )""",
            """CREATE TABLE steps (
                id INTEGER PRIMARY KEY AUTOINCREMENT,
                workflow_id INTEGER NOT NULL REFERENCES workflows (id),
                name VARCHAR NOT NULL,
                attempt INTEGER NOT NULL,
                role VARCHAR,
                status VARCHAR NOT NULL,
                worktree VARCHAR,
                container_id VARCHAR,
                output JSON,
                error TEXT,
                started_at DATETIME NOT NULL,
                finished_at DATETIME
            )""",
            """CREATE TABLE events (
                id INTEGER PRIMARY KEY AUTOINCREMENT,
                workflow_id INTEGER REFERENCES workflows (id),
                step VARCHAR,
                type VARCHAR NOT NULL,
                role VARCHAR,
                status VARCHAR,
                payload JSON NOT NULL,
                input_tokens INTEGER,
                output_tokens INTEGER,
                cost_usd FLOAT,
                timestamp DATETIME NOT NULL
            )""",
            """CREATE TABLE checkpoints (
                id INTEGER PRIMARY KEY AUTOINCREMENT,
                workflow_id INTEGER NOT NULL REFERENCES workflows (id),
                step VARCHAR NOT NULL,
                git_sha VARCHAR,
                status VARCHAR NOT NULL,
                next_step VARCHAR,
                timestamp DATETIME NOT NULL
            )""",
            """CREATE TABLE approvals (
                id INTEGER PRIMARY KEY AUTOINCREMENT,
                workflow_id INTEGER NOT NULL REFERENCES workflows (id),
                step VARCHAR NOT NULL,
                status VARCHAR NOT NULL,
                reason TEXT,
                requested_at DATETIME NOT NULL,
                decided_at DATETIME
            )""",
            "CREATE INDEX ix_events_workflow ON events (workflow_id, id)",
            "CREATE INDEX ix_steps_workflow ON steps (workflow_id, id)",
            "CREATE INDEX ix_checkpoints_workflow ON checkpoints (workflow_id, id)",
            "CREATE INDEX ix_approvals_workflow ON approvals (workflow_id, id)",
            # Append-only is a property of the database, not only of the code that writes to it.
            """CREATE TRIGGER events_no_update BEFORE UPDATE ON events
               BEGIN SELECT RAISE(ABORT, 'events are append-only'); END""",
            """CREATE TRIGGER events_no_delete BEFORE DELETE ON events
               BEGIN SELECT RAISE(ABORT, 'events are append-only'); END""",
        ],
    ),
]

MIGRATIONS.append(
    (
        2,
        "worker invocation metrics",
        [
            """CREATE TABLE invocations (
                id INTEGER PRIMARY KEY AUTOINCREMENT,
                workflow_id INTEGER REFERENCES workflows (id),
                step VARCHAR,
                role VARCHAR NOT NULL,
                cli VARCHAR NOT NULL,
                model VARCHAR,
                task_type VARCHAR,
                success BOOLEAN NOT NULL,
                retries INTEGER NOT NULL,
                duration_s FLOAT NOT NULL,
                input_tokens INTEGER NOT NULL,
                output_tokens INTEGER NOT NULL,
                cost_usd FLOAT NOT NULL,
                error_category VARCHAR,
                timestamp DATETIME NOT NULL
            )""",
            "CREATE INDEX ix_invocations_time ON invocations (timestamp)",
        ],
    )
)

# Who runs each task, step or component right now, and which workers poll which queue: a lease
# row per holder, renewed while it lives (supervisor/state/leases.py). Times are epoch seconds.
LEASES_TABLE = """CREATE TABLE leases (
    name VARCHAR PRIMARY KEY,
    workflow_id INTEGER,
    holder VARCHAR NOT NULL,
    host VARCHAR NOT NULL,
    pid INTEGER NOT NULL,
    doing VARCHAR NOT NULL,
    heartbeat_at DOUBLE PRECISION NOT NULL,
    expires_at DOUBLE PRECISION NOT NULL
)"""
MIGRATIONS.append((3, "runner leases", [LEASES_TABLE]))

MIGRATIONS.append(
    (
        4,
        "running usage totals",
        # `status <id>` shows a workflow's tokens and cost: summing them over 100,000 events read
        # every row of the log. A trigger keeps the sums as events are appended (the log is
        # append-only, so they only grow); the reader reads one row. PostgreSQL, read through
        # the store, sums from an index instead (supervisor/state/postgres.py).
        [
            """CREATE TABLE IF NOT EXISTS event_usage (
                workflow_id INTEGER PRIMARY KEY REFERENCES workflows (id),
                input_tokens INTEGER NOT NULL,
                output_tokens INTEGER NOT NULL,
                cost_usd FLOAT NOT NULL
            )""",
            """INSERT OR REPLACE INTO event_usage
               SELECT workflow_id, coalesce(sum(input_tokens), 0),
                      coalesce(sum(output_tokens), 0), coalesce(sum(cost_usd), 0.0)
               FROM events WHERE workflow_id IS NOT NULL GROUP BY workflow_id""",
            """CREATE TRIGGER IF NOT EXISTS events_usage AFTER INSERT ON events
               WHEN NEW.workflow_id IS NOT NULL
               BEGIN
                 INSERT INTO event_usage VALUES (
                   NEW.workflow_id, coalesce(NEW.input_tokens, 0),
                   coalesce(NEW.output_tokens, 0), coalesce(NEW.cost_usd, 0.0))
                 ON CONFLICT (workflow_id) DO UPDATE SET
                   input_tokens = input_tokens + excluded.input_tokens,
                   output_tokens = output_tokens + excluded.output_tokens,
                   cost_usd = cost_usd + excluded.cost_usd;
               END""",
        ],
    )
)

MIGRATIONS.append(
    (
        5,
        "events by type",
        # `status` finds a task's newest `temporal_submitted` event: without this index SQLite
        # walked the whole log of a 100,000-event task (35 ms of a 0.15 s target).
        ["CREATE INDEX IF NOT EXISTS ix_events_type ON events (workflow_id, type, id)"],
    )
)

# `supervisor web`'s personal sign-in tokens in team mode (supervisor/state/web_tokens.py): the
# sha256 digest of each, never the token, unique so that a lookup finds at most one person.
WEB_TOKENS_TABLE = """CREATE TABLE IF NOT EXISTS web_tokens (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    email VARCHAR NOT NULL,
    digest VARCHAR NOT NULL,
    created_at DATETIME NOT NULL,
    revoked_at DATETIME,
    last_used_at DATETIME
)"""
WEB_TOKENS_INDEX = "CREATE UNIQUE INDEX IF NOT EXISTS ux_web_tokens_digest ON web_tokens (digest)"
MIGRATIONS.append((6, "web sign-in tokens", [WEB_TOKENS_TABLE, WEB_TOKENS_INDEX]))

LATEST_VERSION = MIGRATIONS[-1][0]


def applied_versions(conn: Connection) -> set[int]:
    from sqlalchemy import text

    if conn.dialect.name == "postgresql":
        from supervisor.state.postgres import MIGRATIONS_TABLE

        conn.execute(text(MIGRATIONS_TABLE))
    else:
        conn.execute(
            text(
                "CREATE TABLE IF NOT EXISTS schema_migrations ("
                "version INTEGER PRIMARY KEY, name VARCHAR NOT NULL, applied_at DATETIME NOT NULL)"
            )
        )
    return {row[0] for row in conn.execute(text("SELECT version FROM schema_migrations"))}


def migrate(conn: Connection) -> list[int]:
    """Apply every migration not yet recorded, inside the caller's transaction. PostgreSQL runs
    the same versions, spelled in its dialect (supervisor/state/postgres.py)."""
    from sqlalchemy import text

    from supervisor.state.schema import schema_migrations

    dialect: dict[int, list[str]] = {}
    if conn.dialect.name == "postgresql":
        from supervisor.state.postgres import PG_MIGRATIONS

        dialect = PG_MIGRATIONS
    done = applied_versions(conn)
    newly: list[int] = []
    for version, name, sqlite_statements in MIGRATIONS:
        if version in done:
            continue
        statements = dialect.get(version, sqlite_statements)
        for statement in statements:
            conn.execute(text(statement))
        conn.execute(
            schema_migrations.insert().values(
                version=version, name=name, applied_at=datetime.now(UTC)
            )
        )
        newly.append(version)
    return newly
