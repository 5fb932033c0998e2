"""What a column of the state database is, read from the row dataclass that declares it.

Every table's columns are written once, as the fields of its row (supervisor/state/records.py):
a field's name is the column's, its type says the kind and whether it may be NULL (`| None`),
and `Annotated` marks say what a Python type alone cannot (free text rather than a short string,
the primary key, a reference to another table). From there:
- supervisor/state/schema.py builds SQLAlchemy's tables (the store's queries);
- supervisor/state/reader.py and writer.py, which use the standard library's sqlite3 for start-up
  speed, read and write SQLite's text forms of the kinds (`to_sqlite`, `from_sqlite`) and build
  their SQL from the same columns;
- supervisor/state/migrations.py and postgres.py still spell the tables in SQL (an applied
  migration never changes); tests/test_state_rows.py checks that what they build is what the rows
  describe, on SQLite and PostgreSQL.

Importing nothing of the package and no SQLAlchemy: the read-only commands load it.
"""

from __future__ import annotations

import json
import types
from datetime import UTC, datetime
from enum import Enum
from functools import cache
from typing import Annotated, Any, NamedTuple, Union, get_args, get_origin, get_type_hints


class Kind(Enum):
    """What a column holds; its SQL type per backend is schema.py's (and the migrations')."""

    INTEGER = "integer"
    VARCHAR = "varchar"  # a name, a status, a sha: short text
    TEXT = "text"  # free text of any length: a description, an error
    JSON = "json"  # a dict, kept as JSON text
    TIME = "time"  # a time in UTC, read back naive
    FLOAT = "float"
    BOOLEAN = "boolean"


class Mark(Enum):
    KEY = "key"  # the primary key, given by the writer (a version, a lease's name)
    ROW_ID = "row_id"  # the primary key, given by the database on insert (autoincrement)


class References:
    """A foreign key: the column holds `table`'s id."""

    def __init__(self, table: str) -> None:
        self.table = table


# The marks as types the records use (mypy sees the plain type).
RowId = Annotated[int, Mark.ROW_ID]
FreeText = Annotated[str, Kind.TEXT]
Json = Annotated[dict[str, Any], Kind.JSON]
WorkflowId = Annotated[int, References("workflows")]

_KINDS: dict[object, Kind] = {
    int: Kind.INTEGER,
    str: Kind.VARCHAR,
    float: Kind.FLOAT,
    bool: Kind.BOOLEAN,
    datetime: Kind.TIME,
    dict: Kind.JSON,
}


class Column(NamedTuple):  # not a dataclass: making one costs every command's start-up more
    name: str
    kind: Kind
    nullable: bool
    key: bool = False
    row_id: bool = False
    references: str | None = None
    """The referenced column, as "table.id"."""


@cache
def columns(row: type) -> tuple[Column, ...]:
    """The columns a row class declares: its annotated fields (its bases' first), in order."""
    hints: dict[str, Any] = {}
    for cls in reversed(row.__mro__):
        hints.update(vars(cls).get("__annotations__", {}))
    if any(isinstance(hint, str) for hint in hints.values()):  # postponed: evaluate them
        hints = get_type_hints(row, include_extras=True)
    return tuple(_column(name, hint) for name, hint in hints.items())


def names(row: type) -> list[str]:
    return [c.name for c in columns(row)]


def _column(name: str, hint: Any) -> Column:
    nullable = False
    if get_origin(hint) in (Union, types.UnionType):
        present = [a for a in get_args(hint) if a is not type(None)]
        assert len(present) == 1, f"{name}: one type, or one type and None"
        nullable, hint = True, present[0]
    marks: tuple[Any, ...] = ()
    if get_origin(hint) is Annotated:
        hint, *rest = get_args(hint)
        marks = tuple(rest)
    kind = next((m for m in marks if isinstance(m, Kind)), None) or _KINDS[get_origin(hint) or hint]
    refs = next((f"{m.table}.id" for m in marks if isinstance(m, References)), None)
    row_id = Mark.ROW_ID in marks
    key = row_id or Mark.KEY in marks
    return Column(name, kind, nullable and not key, key, row_id, refs)


def to_sqlite(column: Column, value: Any) -> Any:
    """A value as SQLAlchemy's SQLite dialect stores it in `column`: JSON text, and a time as
    "YYYY-MM-DD HH:MM:SS.ffffff" in UTC (a naive time is taken as UTC, as schema.UtcDateTime)."""
    if value is None:
        return None
    if column.kind is Kind.JSON:
        return json.dumps(value)
    if column.kind is Kind.TIME:
        if value.tzinfo is not None:
            value = value.astimezone(UTC)
        return value.strftime("%Y-%m-%d %H:%M:%S.%f")
    return value


def from_sqlite(kind: Kind, value: Any) -> Any:
    """What `to_sqlite` wrote (or SQLAlchemy did), as the store reads it back."""
    if value is None:
        return None
    if kind is Kind.JSON:
        return json.loads(value)
    if kind is Kind.TIME:
        return datetime.fromisoformat(value)
    if kind is Kind.BOOLEAN:
        return bool(value)
    return value
