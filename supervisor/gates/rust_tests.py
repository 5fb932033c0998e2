"""Rust's unit tests live inside the code they test: a `#[cfg(test)] mod tests { ... }` in
`src/lib.rs` is as much the base's specification as a file under `tests/`, but the file cannot be
put back whole without putting back the code too.

So a source file is split where the compiler splits it: its `#[cfg(test)]` modules (found with
tree-sitter's Rust grammar, never compiled or run on the host) are the tests, the rest is code.
A candidate changed the specification when an item of a base test module (a test, a helper, a
`use`) is gone or different; new items beside them are new tests, free as new test files are.
The base oracle's tree gets the candidate's code with the base's test modules spliced back in.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from functools import cache
from itertools import pairwise
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tree_sitter import Node, Parser

MAX_PARSE_BYTES = 1_000_000
MARK = b"cfg(test)"
"""A base file without these bytes has no test module: no parse needed."""


@dataclass(frozen=True)
class Module:
    """One `#[cfg(test)]` module: its bytes in the file, and its items (whitespace-normalized)."""

    start: int
    end: int
    items: tuple[str, ...]


@cache
def _parser() -> Parser:
    import tree_sitter_rust
    from tree_sitter import Language, Parser

    return Parser(Language(tree_sitter_rust.language()))


def modules_of(data: bytes) -> list[Module] | None:
    """The file's top-level `#[cfg(test)]` modules; None when it is too big or does not parse
    (then nothing in it can be told apart)."""
    if len(data) > MAX_PARSE_BYTES:
        return None
    try:
        root = _parser().parse(data).root_node
    except (ValueError, RecursionError, MemoryError):
        return None
    if root.has_error:
        return None
    found: list[Module] = []
    children = root.named_children
    for attribute, item in pairwise(children):
        if attribute.type != "attribute_item" or item.type != "mod_item":
            continue
        if b"".join((_text(data, attribute)).split()) != b"#[cfg(test)]":
            continue
        body = item.child_by_field_name("body")
        if body is None:  # `mod tests;`: the tests are in their own file, a test path
            continue
        items = tuple(
            " ".join(_text(data, n).decode(errors="replace").split())
            for n in body.named_children
            if "comment" not in n.type
        )
        found.append(Module(attribute.start_byte, item.end_byte, items))
    return found


def _text(data: bytes, node: Node) -> bytes:
    return data[node.start_byte : node.end_byte]


def changed(before: bytes, after: bytes) -> bool:
    """Whether `after` removed or changed an item of `before`'s test modules."""
    if MARK not in before:
        return False
    old = modules_of(before)
    if not old:
        return old is None  # an unreadable base: nothing to compare, so nothing is assumed
    new = modules_of(after)
    if new is None:
        return True
    kept = Counter(i for m in new for i in m.items)
    kept.subtract(Counter(i for m in old for i in m.items))
    return any(count < 0 for count in kept.values())


def restored(before: bytes, after: bytes) -> bytes:
    """`after`'s code with `before`'s test modules: in place of its own when it has as many,
    else its own removed and the base's appended. An `after` that does not parse is taken
    whole from `before` (its code cannot be separated from its tests)."""
    old = modules_of(before) or []
    new = modules_of(after)
    if new is None:
        return before
    texts = [before[m.start : m.end] for m in old]
    if len(new) == len(old):
        out, at = b"", 0
        for module, text in zip(new, texts, strict=True):
            out += after[at : module.start] + text
            at = module.end
        return out + after[at:]
    out, at = b"", 0
    for module in new:
        out += after[at : module.start]
        at = module.end
    out += after[at:]
    return out.rstrip(b"\n") + b"\n\n" + b"\n\n".join(texts) + b"\n"
