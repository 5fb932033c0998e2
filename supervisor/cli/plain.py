"""Small output helpers for the command line: JSON for scripts, quieter --help."""

from __future__ import annotations

import dataclasses
import json
import sys
from typing import Any

from typer.core import TyperOption

_display_type = getattr(TyperOption, "display_type_rich", None)


def _no_flag_type(self: TyperOption, ctx: Any) -> str | None:
    """Typer 0.29 labels every flag `<bool>` in --help; a flag takes no value, so it gets none."""
    return None if self.is_flag else _display_type(self, ctx)  # type: ignore[misc]


def hide_flag_types() -> None:
    """A no-op on the pinned typer 0.28, which shows no type for a flag (tests/test_cli.py)."""
    if _display_type is not None:
        TyperOption.display_type_rich = _no_flag_type  # type: ignore[attr-defined]


def json_out(data: object) -> None:
    """JSON on stdout, whole: for scripts, never shortened to the terminal's width."""
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")


def plain(record: object) -> dict[str, Any]:
    """A state record (a dataclass) as JSON-ready data."""
    return dataclasses.asdict(record)  # type: ignore[call-overload,no-any-return]
