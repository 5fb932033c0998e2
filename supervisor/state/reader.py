"""Reading the state database with the standard library's sqlite3, for the commands that only look.

A person waits for `status` and `events`, and importing SQLAlchemy alone took 0.39 s of an 0.8 s
`status`. `StateReader` reads the same tables and returns the same records as `Store`'s read
methods, whose names and signatures it mirrors, so a renderer takes either. It opens the database
read-only and only when it is already at this supervisor's schema version: anything else (no
database yet, an older one to migrate, a newer one to refuse, a file that is not a database) is
`Store`'s business, and `open_reader` hands those cases to it.
"""

from __future__ import annotations

import re
import sqlite3
from typing import TYPE_CHECKING, Any, Self

from supervisor.core.errors import UnknownWorkflowError
from supervisor.state.busy import busy_timeout
from supervisor.state.columns import Kind, columns, from_sqlite, names
from supervisor.state.migrations import LATEST_VERSION
from supervisor.state.records import TABLES, Approval, Event, Workflow

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from supervisor.state.store import Store

# The columns read back other than as SQLite gives them (JSON text, times), by name: a name is
# the same kind in every table (tests/test_state_rows.py).
DECODED = {
    c.name: c.kind
    for row in TABLES.values()
    for c in columns(row)
    if c.kind in (Kind.JSON, Kind.TIME, Kind.BOOLEAN)
}


class StateReader:
    """Read-only access to `<repo>/.supervisor/state.db` without SQLAlchemy."""

    MODE = "ro"
    """How the file is opened (supervisor/state/writer.py opens it "rw")."""

    def __init__(self, conn: sqlite3.Connection, path: Path) -> None:
        self.conn = conn
        self.path = path

    @classmethod
    def open(cls, path: Path) -> Self | None:
        """A reader, or None when the database is absent or not at this schema version."""
        if not path.is_file():
            return None
        try:
            uri = f"{path.resolve().as_uri()}?mode={cls.MODE}"
            conn = sqlite3.connect(uri, uri=True, timeout=busy_timeout())
        except sqlite3.Error:
            return None
        try:
            version = conn.execute("SELECT max(version) FROM schema_migrations").fetchone()[0]
        except sqlite3.Error:
            version = None
        if version != LATEST_VERSION:
            conn.close()
            return None
        conn.row_factory = sqlite3.Row
        return cls(conn, path)

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _rows(self, sql: str, *params: object) -> list[dict[str, Any]]:
        return [_decode(row) for row in self.conn.execute(sql, params)]

    def workflow(self, wf_id: int) -> Workflow:
        rows = self._rows("SELECT * FROM workflows WHERE id = ?", wf_id)
        if not rows:
            raise UnknownWorkflowError(
                f"No workflow with id {wf_id} in {self.path}.",
                "Run `supervisor status` to list the workflows of this repository.",
            )
        return Workflow(**rows[0])

    def workflows(self) -> list[Workflow]:
        return [Workflow(**r) for r in self._rows("SELECT * FROM workflows ORDER BY id")]

    def steps(self, wf_id: int) -> list[dict[str, Any]]:
        return self._rows("SELECT * FROM steps WHERE workflow_id = ? ORDER BY id", wf_id)

    def events(self, wf_id: int, *, after_id: int = 0, limit: int | None = None) -> list[Event]:
        sql = "SELECT * FROM events WHERE workflow_id = ? AND id > ? ORDER BY id LIMIT ?"
        rows = self._rows(sql, wf_id, after_id, -1 if limit is None else limit)
        return [Event(**r) for r in rows]

    def last_event(self, wf_id: int, of_type: str | None = None) -> Event | None:
        """The newest event (of one type): `status` needs it on a 100,000-event log without
        decoding the log."""
        if of_type is None:
            rows = self._rows(
                "SELECT * FROM events WHERE workflow_id = ? ORDER BY id DESC LIMIT 1", wf_id
            )
        else:
            rows = self._rows(
                "SELECT * FROM events WHERE workflow_id = ? AND type = ? ORDER BY id DESC LIMIT 1",
                wf_id,
                of_type,
            )
        return Event(**rows[0]) if rows else None

    def event_lines(self, wf_id: int, *, chunk: int = 4096) -> Iterator[str]:
        """The workflow's events as JSON lines (`events --json`), in chunks of lines, made by
        SQLite and streamed from a cursor: 100,000 events in well under a second, where building
        an Event and encoding it in Python took 5 s. The same objects as `Event`'s fields with an
        ISO 8601 UTC timestamp (supervisor/cli/plain.py `json_time`'s); like Python's
        `json.dumps`, the text is ASCII (anything else escaped), so no control character of a
        payload reaches a terminal raw."""
        cursor = self.conn.execute(_EVENT_JSON, (wf_id,))
        cursor.row_factory = None
        while rows := cursor.fetchmany(chunk):
            yield _NOT_ASCII.sub(_escaped, "".join(row[0] for row in rows))

    def usage_totals(self, wf_id: int) -> dict[str, float]:
        """The running sums the events trigger keeps (state/migrations.py, version 3)."""
        row = self.conn.execute(
            "SELECT input_tokens, output_tokens, cost_usd FROM event_usage WHERE workflow_id = ?",
            (wf_id,),
        ).fetchone() or (0, 0, 0.0)
        return {"input_tokens": row[0], "output_tokens": row[1], "cost_usd": float(row[2])}

    def latest_approval(self, wf_id: int) -> Approval | None:
        rows = self._rows(
            "SELECT * FROM approvals WHERE workflow_id = ? ORDER BY id DESC LIMIT 1", wf_id
        )
        if not rows:
            return None
        return Approval(**{name: rows[0][name] for name in names(Approval)})


def open_reader(path: Path) -> StateReader | Store:
    """The fast reader when it can serve; otherwise the full store, which creates, migrates or
    refuses the database with its own errors. A shared PostgreSQL database (`state.url`) is
    always read through the store."""
    from supervisor.state.location import state_url

    reader = None if state_url() else StateReader.open(path)
    if reader is not None:
        return reader
    from supervisor.state.store import Store

    return Store(path)


def _json_field(name: str, kind: Kind) -> str:
    if kind is Kind.JSON:
        return f"json({name})"
    if kind is Kind.TIME:
        # The stored UTC "YYYY-MM-DD HH:MM:SS.ffffff" as supervisor/cli/plain.py json_time
        # writes every time of the JSON output: ISO 8601, no fraction at a whole second, offset
        # +00:00.
        return f"replace(replace({name}, ' ', 'T'), '.000000', '') || '+00:00'"
    return name


_EVENT_JSON = (
    "SELECT json_object("
    + ", ".join(f"'{c.name}', {_json_field(c.name, c.kind)}" for c in columns(Event))
    + ") || char(10) FROM events WHERE workflow_id = ? ORDER BY id"
)
_NOT_ASCII = re.compile("[^\x00-\x7f]")


def _escaped(match: re.Match[str]) -> str:
    """A character outside ASCII as JSON's \\uXXXX (a surrogate pair above the BMP)."""
    code = ord(match.group())
    if code < 0x10000:
        return f"\\u{code:04x}"
    code -= 0x10000
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def _decode(row: sqlite3.Row) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in row.keys():  # noqa: SIM118 (sqlite3.Row is not a mapping)
        kind = DECODED.get(key)
        out[key] = row[key] if kind is None else from_sqlite(kind, row[key])
    return out
