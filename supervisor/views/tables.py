"""A listing (supervisor/views/listing.py) drawn for a terminal, fitted to its width when drawn.

Rich, left to itself, makes a too-wide table fit by cutting or folding every column, identifiers
included (`implementer_fa…`, a branch folded over three lines). Here the widths are chosen
first: identifier and short columns get their whole width, free-text columns share what is left
(each at least MIN_TEXT, cut with "…" beyond; a value read whole, at least its longest word, so
that it wraps at its spaces and a model name is never folded), and where the identifiers alone
do not fit, each item is drawn as a block of lines, identifiers first, instead of a table (after
leaving out the columns marked optional, if that is enough).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.cells import cell_len
from rich.console import Group
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from supervisor.views.listing import Cell, Kind, Listing, shown

if TYPE_CHECKING:
    from collections.abc import Callable

    from rich.console import Console, ConsoleOptions, OverflowMethod, RenderableType, RenderResult

MIN_TEXT = 12
"""Fewer columns than this for a free-text column, and the listing is drawn as blocks."""


OVERFLOW: dict[Kind, OverflowMethod] = {
    "id": "ignore",
    "short": "ignore",
    "text": "ellipsis",
    "wrap": "fold",
}
"""Identifiers get their whole width, so they never overflow; free text is cut, values wrap."""


def edges(columns: int) -> int:
    """What a rich table with its default box and padding adds to its columns' widths."""
    return 3 * columns + 1


def widths(listing: Listing, width: int) -> list[int] | None:
    """Each column's width in a table of at most `width` cells, or None where the identifier
    and short columns, whole, leave too little room for the free text."""
    cols = listing.columns
    natural = [
        max([cell_len(c.header), *(cell_len(shown(r[i], c.kind)) for r in listing.rows)])
        for i, c in enumerate(cols)
    ]
    free = [i for i, c in enumerate(cols) if c.kind in ("text", "wrap")]
    room = width - edges(len(cols)) - sum(n for i, n in enumerate(natural) if i not in free)
    floors = {i: min(natural[i], max(MIN_TEXT, cell_len(cols[i].header))) for i in free}
    for i in free:  # a value read whole wraps at its spaces, never inside a word (a model name)
        if cols[i].kind == "wrap":
            words = (w for r in listing.rows for w in shown(r[i], "wrap").split(" "))
            floors[i] = max(floors[i], *(cell_len(w) for w in words), 0)
    if room < sum(floors.values()):
        return None
    out = list(natural)
    left = room
    for k, i in enumerate(sorted(free, key=lambda i: natural[i])):
        share = left // (len(free) - k)
        out[i] = min(natural[i], max(share, floors[i]))
        left -= out[i]
    return out if left >= 0 else None


def _cell(cell: str | Cell, kind: Kind, style: str = "") -> Text:
    own = cell.style if isinstance(cell, Cell) else ""
    if kind == "wrap":
        return Text(shown(cell, kind), style=own or style, overflow="fold")
    return Text(shown(cell, kind), style=own or style, no_wrap=True, overflow="ellipsis")


def table(listing: Listing, sizes: list[int]) -> Table:
    drawn = Table(title=listing.title or None, title_justify="left")
    for column, size in zip(listing.columns, sizes, strict=True):
        drawn.add_column(
            column.header,
            width=size,
            no_wrap=column.kind != "wrap",
            overflow=OVERFLOW[column.kind],
        )
    for row in listing.rows:
        drawn.add_row(*(_cell(c, col.kind) for c, col in zip(row, listing.columns, strict=True)))
    return drawn


def blocks(listing: Listing, width: int) -> RenderableType:
    """Each item as lines: its first value and its short values (numbers, times, statuses) on
    one line, then `header: value` a line for the others. An identifier longer than the
    terminal is left whole for the terminal to wrap; free text is cut with "…"."""
    parts: list[RenderableType] = []
    if listing.title:
        parts.append(Text(listing.title, style="italic"))
    cols = listing.columns
    for row in listing.rows:
        parts.append(_cell(row[0], cols[0].kind, "bold"))
        pairs = [
            Text.assemble((f"{column.header}: ", "dim"), _cell(cell, "short"))
            for column, cell in zip(cols[1:], row[1:], strict=True)
            if column.kind == "short" and shown(cell, "short")
        ]
        line = Text("")
        for pair in pairs:  # packed into lines of `width`, never split inside a pair
            if line and cell_len(line.plain) + 2 + cell_len(pair.plain) > width:
                parts.append(line)
                line = Text("")
            line.append_text(Text("  ") + pair)
        if line:
            parts.append(line)
        for column, cell in zip(cols[1:], row[1:], strict=True):
            if column.kind == "short" or not shown(cell, column.kind):
                continue
            line = Text.assemble((f"  {column.header}: ", "dim"), _cell(cell, column.kind))
            if column.kind == "text":
                line.no_wrap, line.overflow = True, "ellipsis"
            else:
                line.no_wrap, line.overflow = False, "fold"
            parts.append(line)
    return Group(*parts)


class Fitted:
    """A listing drawn at the width it is given when printed: a table, or `narrow()` (blocks by
    default) where its identifiers would not fit a table."""

    def __init__(
        self, listing: Listing, narrow: Callable[[], RenderableType] | None = None
    ) -> None:
        self.listing = listing
        self.narrow = narrow

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        sizes = widths(self.listing, options.max_width)
        if sizes is not None:
            yield table(self.listing, sizes)
            return
        fewer = self.listing.without_optional()
        sizes = widths(fewer, options.max_width)
        if sizes is not None and len(fewer.columns) < len(self.listing.columns):
            yield table(fewer, sizes)
        elif self.narrow is not None:
            yield self.narrow()
        else:
            yield blocks(self.listing, options.max_width)

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return Measurement(1, options.max_width)


def fitted(listing: Listing, narrow: Callable[[], RenderableType] | None = None) -> Fitted:
    return Fitted(listing, narrow)
