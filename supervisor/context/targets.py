"""The files a dry run of a role's context (`supervisor context`) packs for, and where they came
from: the ones named, else the working tree's changes, else none.

A named file that is not there was once packed as nothing, silently: the dry run then answered a
question nobody asked. It is refused here, naming the file and where it was looked for.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from supervisor.core.errors import UsageError

if TYPE_CHECKING:
    from collections.abc import Callable

Source = Literal["given", "changes", "none"]


@dataclass(frozen=True)
class Targets:
    files: list[str]
    """Paths from the repository's root."""
    source: Source
    """`given` (--target), `changes` (the working tree's), or `none`."""


def resolve(root: Path, given: list[str], changes: Callable[[], list[str]]) -> Targets:
    """`given`, each a file of the repository at `root` (a path from its root, or from the
    current directory inside it); none given, the working tree's `changes`."""
    if given:
        return Targets([_in_repo(root, name) for name in given], "given")
    found = changes()
    return Targets(found, "changes" if found else "none")


def _in_repo(root: Path, name: str) -> str:
    here = (Path.cwd() / name).resolve()
    for path in (root / name, here):
        try:
            rel = path.resolve().relative_to(root.resolve())
        except ValueError:
            continue
        if path.is_file():
            return rel.as_posix()
    kind = "is a directory" if (root / name).is_dir() or here.is_dir() else "does not exist"
    raise UsageError(
        f"--target {name} {kind} in the repository {root}.",
        "Name a file of the repository (a path from its root, e.g. src/app.py), or leave "
        "--target out to pack for what the working tree changes.",
    )
