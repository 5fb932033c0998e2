"""What an MCP tool may reach and how much of it comes back.

The server serves one repository, the one it was started in. A path a model passes (a `repo`,
a target file) is resolved and refused unless it lies inside that repository: a model cannot
point the server at another checkout of the user's. Text a worker or the repository wrote
(summaries, file names, diffs, event payloads) reaches the client as JSON values, never as
markup or instructions of the server's own, and each is cut to a bound so that one event cannot
fill the client's context.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from supervisor.core.errors import SupervisorError

TEXT_LIMIT = 2_000
"""Characters of one string value a result carries (a diff has its own, larger bound)."""
LIST_LIMIT = 200
"""Items of one list a result carries."""


class OutsideRepositoryError(SupervisorError, PermissionError):
    """A tool was given a path outside the repository the server serves."""


@dataclass(frozen=True)
class Scope:
    """The repository this server serves (its root, resolved)."""

    root: Path

    def path(self, given: str | None) -> Path:
        """`given` (absolute, or relative to the root) as a path inside the repository; the
        root itself when nothing is given."""
        if not given:
            return self.root
        candidate = Path(given).expanduser()
        resolved = (candidate if candidate.is_absolute() else self.root / candidate).resolve()
        if resolved != self.root and self.root not in resolved.parents:
            raise OutsideRepositoryError(
                f"The path {given!r} is outside the repository this server serves ({self.root}).",
                "Name a path inside it, or start `supervisor mcp` in the other repository "
                "(a person's choice, in the client's configuration).",
            )
        return resolved

    def relative(self, given: str) -> str:
        """A file argument as a path relative to the root, refused outside it."""
        return self.path(given).relative_to(self.root).as_posix()


def bounded(value: Any, limit: int = TEXT_LIMIT) -> Any:
    """`value` as JSON data with every string cut to `limit` characters and every list to
    LIST_LIMIT items, each cut said in place; times as ISO 8601 in UTC."""
    if isinstance(value, str):
        if len(value) <= limit:
            return value
        return value[:limit] + f"… ({len(value) - limit} more characters not shown)"
    if isinstance(value, dict):
        return {str(k)[:200]: bounded(v, limit) for k, v in value.items()}
    if isinstance(value, list | tuple):
        shown = [bounded(v, limit) for v in value[:LIST_LIMIT]]
        if len(value) > LIST_LIMIT:
            shown.append(f"… ({len(value) - LIST_LIMIT} more not shown)")
        return shown
    if isinstance(value, datetime):
        aware = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
        return aware.astimezone(UTC).isoformat()
    if value is None or isinstance(value, bool | int | float):
        return value
    return bounded(str(value), limit)
