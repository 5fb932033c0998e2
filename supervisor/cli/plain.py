"""Small output helpers for the command line: JSON for scripts. Imports nothing but the standard
library: `supervisor status` uses it without loading typer (supervisor/cli/entry.py)."""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console


def json_out(data: object) -> None:
    """JSON on stdout, whole: for scripts, never shortened to the terminal's width."""
    sys.stdout.write(json.dumps(data, indent=2, default=json_value) + "\n")


def json_time(moment: datetime) -> str:
    """A time as every `--json` writes it: ISO 8601 with its offset, in UTC
    (`2026-01-02T03:04:05.123456+00:00`). The state keeps UTC without a zone (state/schema.py
    UtcDateTime); written so, a script would read it in its own zone. `events --json` from
    SQLite writes the same text in SQL (supervisor/state/reader.py `_EVENT_JSON`)."""
    aware = moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
    return aware.astimezone(UTC).isoformat()


def json_value(value: object) -> object:
    """What JSON has no type for: a time as `json_time` writes it, anything else as text."""
    return json_time(value) if isinstance(value, datetime) else str(value)


def plain(record: object) -> dict[str, Any]:
    """A state record (a dataclass) as JSON-ready data."""
    return dataclasses.asdict(record)  # type: ignore[call-overload,no-any-return]


PIPE_WIDTH = 1000
"""Width for output that is not a terminal: lines as long as they need, nothing cut."""


def fit_to_output(console: Console) -> None:
    """A terminal keeps rich's width; a pipe or a file gets PIPE_WIDTH (rich would otherwise
    assume 80 columns and cut identifiers like `implementer_fa…`), unless COLUMNS says."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit():
        console.width = int(columns)
    elif not console.is_terminal:
        console.width = PIPE_WIDTH
    else:
        console.width = None  # type: ignore[assignment]  # back to the terminal's own width
