"""Control characters made visible, with the standard library only.

The rich-free half of supervisor/guard/textsafe.py: `supervisor status <id>` printed to a pipe
writes plain text (supervisor/cli/status_plain.py) and must not import rich to escape it.
"""

from __future__ import annotations

import re

_CONTROLS = "\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069"
"""C0 but tab and newline, DEL, C1, and the bidirectional overrides (which reorder what a person
reads: "Trojan source"). Tab and newline are layout, handled by `lines`."""
UNSAFE = re.compile(f"[{_CONTROLS}]")
_UNSAFE_ONE_LINE = re.compile(f"[{_CONTROLS}\t\n]")


def _shown(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(value: object, *, lines: bool = True) -> str:
    """`value` as text whose every control character is shown, never obeyed: ESC becomes the
    four characters `\\x1b`. `lines`: newlines and tabs are kept (where the layout has room for
    them); without it they are shown as `\\x0a` and `\\x09` too, for one-line places (a table
    cell holding an identifier, a window title)."""
    text = value if isinstance(value, str) else str(value)
    return (UNSAFE if lines else _UNSAFE_ONE_LINE).sub(_shown, text)
