"""What the tamper signals compare (supervisor/gates/test_tamper.py): a test file read as its
tests, each with its markers and assertions. Shared by the Python reader and the JavaScript,
TypeScript and Go readers (test_tamper_js.py), which the signals load only when a file needs
them; kept apart so that neither reader imports the other.
"""

from __future__ import annotations

from dataclasses import dataclass, field

MAX_SNIPPET = 60


@dataclass(frozen=True)
class Operand:
    """One compared side of an assertion: `key` is formatting-free, `literal` its shown text
    when it is a literal (None otherwise)."""

    key: str
    literal: str | None = None


@dataclass(frozen=True)
class Check:
    """One assertion, with what it compares so a bent expectation can be told apart."""

    snippet: str
    actual: str | None = None
    expected: Operand | None = None
    trivial: str | None = None  # why it can no longer fail, when it cannot


@dataclass
class Case:
    """One test as the signals see it: markers that stop it running, its assertions in order,
    and the constructs that swallow their failures."""

    marks: list[str] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)
    swallowed: list[str] = field(default_factory=list)


Cases = dict[str, Case]


def check(snippet: str, operands: list[Operand]) -> Check:
    """An assertion comparing `operands`: the literal one of a pair is the expected value (either
    order, `assertEqual(5, add(2, 3))` too); all literals, or one expression twice, cannot fail."""
    shown = shorten(snippet, MAX_SNIPPET)
    if operands and all(o.literal is not None for o in operands):
        return Check(shown, trivial="compares constants")
    if len(operands) == 2 and operands[0].key == operands[1].key:
        return Check(shown, trivial="compares an expression with itself")
    literals = [o for o in operands if o.literal is not None]
    variables = [o for o in operands if o.literal is None]
    expected = literals[0] if len(operands) == 2 and len(literals) == 1 else None
    return Check(shown, variables[0].key if variables else None, expected)


def shorten(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
