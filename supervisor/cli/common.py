"""What every command module shares: the lazily imported core modules, the consoles, and the
options every command takes the same way."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console


class _Lazy:
    """A module imported on first use: `supervisor.tasks` imports Docker, the engine and the
    workers, which only the commands that run or inspect a sandbox need."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, name: str) -> Any:
        import importlib

        return getattr(importlib.import_module(self._name), name)


tasks = _Lazy("supervisor.tasks")  # the task lifecycle: start, resume, complete
projects = _Lazy("supervisor.project")  # opening a repository, preflight, previews
images = _Lazy("supervisor.image_commands")  # `supervisor sandbox ...`

console = Console()
err_console = Console(stderr=True)

RepoOption = Annotated[
    Path, typer.Option("--repo", help="The git repository to work on.", show_default="cwd")
]
JsonOption = Annotated[bool, typer.Option("--json", help="Machine-readable output (JSON).")]
