"""What every command module shares: the lazily imported core modules, the consoles, and the
options every command takes the same way."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperOption

from supervisor.cli.failure import console as console
from supervisor.cli.failure import err_console as err_console


class _Lazy:
    """A module imported on first use: `supervisor.lifecycle.tasks` imports Docker, the engine and
    the workers, which only the commands that run or inspect a sandbox need."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, name: str) -> Any:
        import importlib

        return getattr(importlib.import_module(self._name), name)


tasks = _Lazy("supervisor.lifecycle.tasks")  # the task lifecycle: start, resume, complete
projects = _Lazy("supervisor.lifecycle.opening")  # opening a repository, preflight, previews
images = _Lazy("supervisor.lifecycle.image_commands")  # `supervisor sandbox ...`


RepoOption = Annotated[
    Path,
    typer.Option(
        "--repo", metavar="PATH", help="The git repository to work on.", show_default="cwd"
    ),
]
IdArgument = Annotated[int, typer.Argument(metavar="ID", help="The workflow id.")]
JsonOption = Annotated[bool, typer.Option("--json", help="Machine-readable output (JSON).")]


_display_type = getattr(TyperOption, "display_type_rich", None)


def _no_flag_type(self: TyperOption, ctx: Any) -> str | None:
    """Typer 0.29 labels every flag `<bool>` in --help; a flag takes no value, so it gets none."""
    return None if self.is_flag else _display_type(self, ctx)  # type: ignore[misc]


def hide_flag_types() -> None:
    """A no-op on the pinned typer 0.28, which shows no type for a flag (tests/test_cli.py)."""
    if _display_type is not None:
        TyperOption.display_type_rich = _no_flag_type  # type: ignore[attr-defined]
