"""Counts in the words a person reads: `1 commit`, `3 commits`, never `1 commit(s)`.

The standard library only: `status` and the plain outputs use it without loading anything.
"""

from __future__ import annotations


def plural(count: int, one: str, many: str | None = None) -> str:
    """`one` for a count of one, else `many` (by default `one` with an "s"): "file"/"files",
    "thing is"/"things are"."""
    if count == 1:
        return one
    return many if many is not None else f"{one}s"


def counted(count: int, one: str, many: str | None = None) -> str:
    """The count and its noun: `1 commit`, `0 commits`, `3 things are`."""
    return f"{count} {plural(count, one, many)}"
