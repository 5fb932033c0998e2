"""One line saying why a test gate failed: the runner's counts and the failing tests' names.

Why: the last line of a failed run is rarely the reason. vitest ends on a rule (`⎯⎯⎯[2/2]⎯`),
pnpm on `ELIFECYCLE Test failed`, pytest on its timing line; `supervisor init` showed that line as
the reason a detected gate fails. Each runner prints a summary of its own (pytest's short test
summary, vitest's `FAIL` lines and `Tests` count, jest's `●` headings, unittest's `FAIL:`, go's
`--- FAIL:`, cargo's `failures:` list); this reads it, as text, and falls back to the last line.
"""

from __future__ import annotations

import re

from supervisor.core.parsing import strip_ansi

SHOWN = 3
"""Failing tests named before "and N more"."""
WIDTH = 400

# (the counts line, the failing test names), per runner; the first runner with either wins.
NEVER = re.compile(r"(?!)")
RUNNERS: list[tuple[str, re.Pattern[str], re.Pattern[str]]] = [
    (
        "pytest",
        re.compile(
            r"^=*[ ]*((?:\d+ (?:failed|passed|errors?|skipped|xfailed|xpassed)(?:, )?)+)", re.M
        ),
        re.compile(r"^(?:FAILED|ERROR) (\S+\.py\b\S*)", re.M),
    ),
    (
        "cargo",
        re.compile(r"^test result: FAILED\. ([^\n]*?)(?:; finished in [^\n]*)?$", re.M),
        re.compile(r"^test (\S+) \.\.\. FAILED$", re.M),
    ),
    ("go", NEVER, re.compile(r"^[ \t]*--- FAIL: (\S+)", re.M)),
    (
        "vitest",
        re.compile(r"^[ \t]*Tests[ \t]+(\d+ failed[^\n]*?)[ \t]*$", re.M),
        re.compile(r"^[ \t]*FAIL[ \t]+(\S[^\n]*? > [^\n]*?)[ \t]*$", re.M),
    ),
    (
        "jest",
        re.compile(r"^Tests:[ \t]+(\d+ failed[^\n]*?)[ \t]*$", re.M),
        re.compile(r"^[ \t]*● ([^\n]+? › [^\n]+?)[ \t]*$", re.M),
    ),
    (
        "node:test",
        re.compile(r"^(?:ℹ|#) (fail \d+)[ \t]*$", re.M),
        re.compile(r"^[ \t]*(?:✖ (.+?) \([\d.]+m?s\)|not ok \d+ - (.+?))[ \t]*$", re.M),
    ),
    (
        "unittest",
        re.compile(r"^(FAILED \([^)\n]*\))[ \t]*$", re.M),
        re.compile(r"^(?:FAIL|ERROR): (\S+)", re.M),
    ),
    (
        "ruff",
        re.compile(r"^(Found \d+ errors?)\.?", re.M),
        re.compile(r"^(?:[ \t]*--> )?(\S+:\d+:\d+)(?:: [A-Z]+\d+)?", re.M),
    ),
]


def summarize(output: str) -> str:
    """`2 failed, 3 passed: tests/test_a.py::test_x, tests/test_b.py::test_y` or, for output no
    runner summarised, its last non-empty line."""
    text = strip_ansi(output)
    for _runner, counts, names in RUNNERS:
        count = [m.group(1).strip(" =,") for m in counts.finditer(text)]
        found = (next(g for g in m.groups() if g) for m in names.finditer(text))
        failing = list(dict.fromkeys(found))
        if not failing and not count:
            continue
        head = count[-1] if count else f"{len(failing)} failed"
        shown = ", ".join(failing[:SHOWN])
        more = f" and {len(failing) - SHOWN} more" if len(failing) > SHOWN else ""
        return (f"{head}: {shown}{more}" if failing else head)[:WIDTH]
    return last_line(text)


def last_line(output: str) -> str:
    lines = [line.strip() for line in strip_ansi(output).splitlines() if line.strip()]
    return (lines[-1] if lines else "no output")[:WIDTH]
