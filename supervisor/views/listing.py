"""One way for every listing to print: plain rows for a pipe, a table that fits for a terminal.

Anchored on what `gh` and `docker` do. A listing piped to another program (stdout is not a
terminal) is one item a line, its values tab-separated and whole, with no header and no table
edges, so `cut -f2`, `grep` and `awk` work on it and nothing is lost to a width. A terminal gets a
table (supervisor/views/tables.py) in which identifiers (ids, step and role names, branches, SHAs,
image tags, paths) are never cut or folded: only free text (a task, an event's details, a
description) is shortened, with "…"; where even the identifiers do not fit the terminal, each item
becomes a block of lines instead.

No rich here: a piped `supervisor status` should not pay for importing it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from supervisor.guard.visible import visible

Kind = Literal["id", "text", "wrap", "short"]
"""`id`: shown whole on one line, always (a name, a branch, a SHA, a path); `short`: a short value
shown whole (a number, a time, a status); `text`: free text, shortened with "…" to what the
terminal has; `wrap`: a value that must be read whole (a setting, what doctor found), wrapped over
lines where it is long."""


@dataclass(frozen=True)
class Column:
    header: str
    kind: Kind = "id"
    optional: bool = False
    """A terminal too narrow for the whole table leaves this column out before it gives up the
    table for blocks (as `gh` drops columns); a pipe always gets it."""


@dataclass(frozen=True)
class Cell:
    """A value with the style a terminal shows it in (a status's colour); a pipe gets the value."""

    value: str
    style: str = ""


@dataclass
class Listing:
    title: str
    columns: list[Column]
    rows: list[list[str | Cell]] = field(default_factory=list)

    def without_optional(self) -> Listing:
        keep = [i for i, c in enumerate(self.columns) if not c.optional]
        return Listing(
            self.title, [self.columns[i] for i in keep], [[r[i] for i in keep] for r in self.rows]
        )

    def add(self, *cells: str | Cell) -> None:
        if len(cells) != len(self.columns):
            raise ValueError(f"{self.title}: {len(cells)} cells for {len(self.columns)} columns")
        self.rows.append(list(cells))


_SPACE = re.compile(r"\s+")


def value(cell: str | Cell) -> str:
    return cell.value if isinstance(cell, Cell) else cell


def shown(cell: str | Cell, kind: Kind) -> str:
    """A cell's text on one line: free text with its line breaks as spaces, anything else with
    them shown as `\\x0a` (a tab or newline inside a worker's component id must not start a new
    row or column); control characters never reach the output (supervisor/guard/visible.py)."""
    raw = value(cell)
    if kind in ("text", "wrap"):
        return visible(_SPACE.sub(" ", raw).strip(), lines=False)
    return visible(raw, lines=False)


def plain(listing: Listing) -> str:
    """The rows, tab-separated, whole: what a pipe gets."""
    kinds = [c.kind for c in listing.columns]
    return "".join(
        "\t".join(shown(cell, kind) for cell, kind in zip(row, kinds, strict=True)) + "\n"
        for row in listing.rows
    )
