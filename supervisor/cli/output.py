"""Where a listing goes: plain rows to a pipe, a fitted table to a terminal.

Above supervisor/views/listing.py (the rows) and supervisor/views/tables.py (the terminal's drawing,
imported only when there is a terminal to draw for), so a piped listing loads no rich.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from supervisor.views.listing import Listing, plain

if TYPE_CHECKING:
    from rich.console import Console


def show(console: Console, *listings: Listing) -> None:
    """Print `listings`: plain rows when stdout is not a terminal, else tables that fit it (or,
    where its identifiers do not fit a table, each item as a block of lines)."""
    if not console.is_terminal:
        console.file.write("\n".join(plain(one) for one in listings if one.rows))
        console.file.flush()
        return
    from supervisor.views.tables import fitted

    for one in listings:
        console.print(fitted(one))
