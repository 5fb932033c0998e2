"""`supervisor --help` and every command's help as a person reads them (issue 59).

Help text is written for the help: a sentence is never broken where a docstring's source line
ended (`trust`, `doctor`, `config show` and `sandbox shell` were), only where the terminal's width
requires; usage and option tables name what to type (`TASK`, `ID`, `N`, `PATH`), never typer's
`{description}`, `<str>` or `<int range> [x>=1]`. The main help and each group's help are kept as
golden files under tests/golden/ at 80 and 120 columns (`UPDATE_GOLDEN=1` rewrites them; a
missing one fails). Every help is rendered in-process (tests/cli_support.py), a few hundredths of
a second each.
"""

from __future__ import annotations

import itertools
import os
import re
from pathlib import Path

import pytest
import typer
from cli_support import supervisor
from rich.cells import cell_len

from supervisor.cli.app import app

GOLDEN = Path(__file__).parent / "golden"
GROUPS = ["", "roles", "role", "config", "sandbox", "web", "pr"]


def commands() -> list[list[str]]:
    """Every command and group's path, `[]` for the main one, as typer builds them."""
    found: list[list[str]] = []

    def walk(command: object, path: list[str]) -> None:
        found.append(path)
        for name, sub in sorted(getattr(command, "commands", {}).items()):
            walk(sub, [*path, name])

    walk(typer.main.get_command(app), [])
    return found


def shown(path: list[str], columns: int) -> str:
    done = supervisor(*path, "--help", columns=columns)
    assert done.returncode == 0, done.stderr
    return "\n".join(line.rstrip() for line in done.stdout.splitlines()) + "\n"


def first_word(text: str) -> str:
    """What rich would have to fit on the line before: a word, or a whole `[default: ...]`,
    which rich keeps together (typer puts it in its own column)."""
    text = text.lstrip()
    if text.startswith("["):
        return text[: text.find("]") + 1]
    return text.split(" ", 1)[0]


def early_breaks(out: str, columns: int) -> list[str]:
    """Lines ended before the width required: the next line's first word had room on them.
    Inside a panel (`│ ... │`), a continuation line starts with blanks where the option or
    command column is; outside, two lines of a paragraph start at the same column. A line that
    starts an item (`$ supervisor ...`, `--option`, a command, a key of the tui), or follows a
    line ending a sentence outside a table, is meant to."""
    found = []
    lines = out.splitlines()
    for line, after in itertools.pairwise(lines):
        boxed = line.startswith("│") and after.startswith("│")
        if boxed:
            inner, nxt = line.rstrip()[1:-1], after.rstrip()[1:-1]
            room = len(inner) - len(inner.rstrip())
            text_at = len(inner) - len(inner.lstrip())  # where this line's text starts
            lead = len(nxt) - len(nxt.lstrip())
            if lead <= max(4, text_at) or nxt.lstrip().startswith(("-", "*")):
                continue  # a new row of the table, not a continuation
        elif line.strip() and after.strip():
            lead = len(line) - len(line.lstrip())
            if lead != len(after) - len(after.lstrip()) or "  " in line.strip():
                continue  # not two lines of one paragraph (the tui's keys are a table)
            if line.rstrip().endswith((".", ":", ".)")):
                continue  # a sentence a line, as the tui's help ends: meant, not folded
            if after.lstrip().startswith(("$", "Usage:")):
                continue
            room = columns - 1 - cell_len(line)
        else:
            continue
        word = first_word(nxt if boxed else after)
        if word and cell_len(word) + 2 <= room:
            found.append(f"{line.strip()!r} then {word!r}")
    return found


def assert_golden(name: str, out: str) -> None:
    path = GOLDEN / f"{name}.txt"
    if os.environ.get("UPDATE_GOLDEN"):
        path.write_text(out)
    assert path.exists(), f"no {path} yet: UPDATE_GOLDEN=1 writes it"
    assert out == path.read_text(), f"differs from {path} (UPDATE_GOLDEN=1 rewrites)"


@pytest.mark.parametrize("columns", [80, 120])
@pytest.mark.parametrize("group", GROUPS, ids=[g or "main" for g in GROUPS])
def test_the_main_help_and_each_group_help_are_as_written(group: str, columns: int) -> None:
    out = shown([group] if group else [], columns)
    assert max(cell_len(line) for line in out.splitlines()) <= columns
    assert_golden(f"help-{group or 'main'}-{columns}", out)


@pytest.mark.parametrize("columns", [80, 120])
def test_no_help_breaks_a_sentence_before_the_width_requires(columns: int) -> None:
    """Every command's, at both widths: the command lists of `supervisor -h`, `config -h` and
    `sandbox -h` kept the line breaks of the docstrings they were made from."""
    broken = {
        " ".join(path) or "supervisor": early_breaks(shown(path, columns), columns)
        for path in commands()
    }
    assert {name: lines for name, lines in broken.items() if lines} == {}


def test_usage_and_options_name_what_to_type() -> None:
    """`supervisor start-task [OPTIONS] TASK`, `--max-parallel N`: what a person reads; never
    typer's `{description}`, `<str>`, `<int range> [x>=1]`."""
    noise = re.compile(r"\{[a-z_]+\}|<[a-z ]+>|\[x[<>]=")
    found = {}
    for path in commands():
        out = shown(path, 120)
        usage = next(line for line in out.splitlines() if "Usage:" in line)
        said = noise.findall(out) + [
            w for w in usage.split()[2 + len(path) :] if re.search("[a-z]", w)
        ]
        if said and path:
            found[" ".join(path)] = said
    assert found == {}
    # TASK is optional: --from-issue gives the text instead
    assert "Usage: supervisor start-task [OPTIONS] [TASK]" in shown(["start-task"], 120)
    assert "Usage: supervisor status [OPTIONS] [ID]" in shown(["status"], 120)
    assert "Usage: supervisor sandbox shell [OPTIONS] [COMMAND]..." in shown(
        ["sandbox", "shell"], 120
    )
    assert re.search(r"--max-parallel +N +Steps this host runs at once", shown(["worker"], 120))


def test_max_parallel_below_1_is_a_usage_error_said_in_words() -> None:
    """Its `[x>=1]` label gone, the check stays: said as the help says it, exit 2."""
    refused = supervisor("worker", "--max-parallel", "0", columns=120)
    assert refused.returncode == 2
    assert "0 steps at once runs nothing; give 1 or more." in refused.stderr
