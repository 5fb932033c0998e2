"""Small output helpers for the command line: JSON for scripts. Imports nothing but the standard
library: `supervisor status` uses it without loading typer (supervisor/cli/entry.py)."""

from __future__ import annotations

import dataclasses
import json
import sys
from typing import Any


def json_out(data: object) -> None:
    """JSON on stdout, whole: for scripts, never shortened to the terminal's width."""
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")


def plain(record: object) -> dict[str, Any]:
    """A state record (a dataclass) as JSON-ready data."""
    return dataclasses.asdict(record)  # type: ignore[call-overload,no-any-return]
