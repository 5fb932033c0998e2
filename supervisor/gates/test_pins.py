"""Test files are pinned from the task's base commit: a candidate may add tests, never remove them.

Why: the test gate runs whatever tests the candidate holds. A worker that deletes a test file,
empties it or drops its failing test functions makes the suite pass on broken code ("Ran 0
tests … OK"). Protecting every test file outright would stop the work that legitimately adds
tests, so each test file of the base commit is pinned with its number of test functions, and a
candidate fails when a pinned file is gone, empty or holds fewer. What a test-engineer step added
and a gate then accepted is pinned too (the workflow's `test_pins`).

Files are read as git blobs and counted with patterns, never imported or run on the host. The
counts are a floor, not an audit: an assertion rewritten to `assert True` keeps its count (the
runner's own count and the reviewer are the other layers).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import pathspec

from supervisor.core import process
from supervisor.workspace.treedata import CommitFiles

if TYPE_CHECKING:
    from pathlib import Path

TEST_FILES = pathspec.GitIgnoreSpec.from_lines(
    [
        # Python: what unittest discovery (`test*.py`) and pytest (`test_*.py`, `*_test.py`) find.
        "test*.py",
        "*_test.py",
        # JavaScript/TypeScript: vitest's, jest's and mocha's default globs.
        "*.test.[jt]s",
        "*.test.[cm][jt]s",
        "*.test.[jt]sx",
        "*.spec.[jt]s",
        "*.spec.[cm][jt]s",
        "*.spec.[jt]sx",
        "__tests__/**/*.[jt]s",
        "__tests__/**/*.[jt]sx",
        "__tests__/**/*.[cm][jt]s",
        # Go and Rust integration tests.
        "*_test.go",
        "/tests/**/*.rs",
    ]
)
PY_TEST = re.compile(rb"^[ \t]*(?:async[ \t]+)?def[ \t]+test\w*[ \t]*\(", re.M)
JS_TEST = re.compile(rb"(?<![\w.$])(?:it|test)[ \t]*(?:\.[ \t]*\w+[ \t]*)*\(")
JS_COMMENT = re.compile(rb"/\*.*?\*/|(?<![:\\])//[^\n]*", re.S)
GO_TEST = re.compile(rb"^func[ \t]+(?:Test|Fuzz|Example)\w*[ \t]*\(", re.M)
RUST_TEST = re.compile(rb"#\[[ \t]*(?:\w+::)*test\b")


def count_functions(path: str, data: bytes) -> int:
    """The number of test functions in a test file, by the conventions of its language."""
    if path.endswith(".py"):
        return len(PY_TEST.findall(data))
    if path.endswith(".go"):
        return len(GO_TEST.findall(data))
    if path.endswith(".rs"):
        return len(RUST_TEST.findall(data))
    return len(JS_TEST.findall(JS_COMMENT.sub(b"", data)))


def is_test_file(path: str) -> bool:
    return TEST_FILES.match_file(path)


def pins_at(git_dir: Path, commit: str) -> dict[str, int]:
    """Every test file of `commit` with its number of test functions; Rust sources with unit
    tests (`#[test]` under src/) count as test files too."""
    files = CommitFiles(git_dir, commit)
    paths = [p for p in files.files() if is_test_file(p)]
    rust = [p for p in files.files() if p.endswith(".rs") and p not in paths]
    pins = {p: count_functions(p, data) for p, data in files.read_many(paths).items()}
    for p, data in files.read_many(rust).items():
        if RUST_TEST.search(data):
            pins[p] = count_functions(p, data)
    return pins


def merged(*pin_sets: dict[str, int]) -> dict[str, int]:
    """The floor each pinned file must keep: the highest count any pin set gave it."""
    floor: dict[str, int] = {}
    for pins in pin_sets:
        for path, count in pins.items():
            floor[path] = max(count, floor.get(path, 0))
    return floor


def weakened(
    git_dir: Path, pins: dict[str, int], base: str, head: str, allowed: list[str]
) -> list[str]:
    """The pinned test files `head` deleted, emptied or thinned, each named with what happened:
    `test_calc.py (deleted)`, `tests/a.py (renamed to b.py)`, `test_x.py (2 test functions,
    now 1)`. `allowed`: patterns a person allowed for this task (`--allow-protected`)."""
    exempt = pathspec.GitIgnoreSpec.from_lines(allowed)
    files = CommitFiles(git_dir, head)
    now = files.read_many(list(pins))
    found: list[str] = []
    missing = [p for p in sorted(pins) if p not in now and not exempt.match_file(p)]
    renamed = _renames(git_dir, base, head) if missing else {}
    for path in missing:
        gone = f"renamed to {renamed[path]}" if path in renamed else "deleted"
        found.append(f"{path} ({gone})")
    for path in sorted(now):
        if exempt.match_file(path):
            continue
        data, floor = now[path], pins[path]
        if not data.strip():
            found.append(f"{path} (emptied)")
        elif (count := count_functions(path, data)) < floor:
            found.append(f"{path} ({floor} test functions, now {count})")
    return found


def _renames(git_dir: Path, base: str, head: str) -> dict[str, str]:
    argv = ["git", "--git-dir", str(git_dir), "diff", "-z", "-M", "--name-status"]
    out = process.run([*argv, "--diff-filter=R", base, head], check=False).stdout
    fields = out.split("\0")
    # -z: "R100", old path, new path, one field each
    return {fields[i + 1]: fields[i + 2] for i in range(0, len(fields) - 2, 3)}


def feedback(found: list[str]) -> str:
    return (
        f"The step weakened the task's tests: {', '.join(found)}. The test files of the task's "
        "base commit (and the tests a test engineer added) are pinned: keep every test file and "
        "every test function, and make the code pass them (add tests freely; if a test really "
        "is wrong, report it under blockers; a person can allow it for one task with "
        "`supervisor start-task --allow-protected PATTERN`)."
    )


TEST_ROLES = frozenset({"test_engineer"})
"""Roles whose added tests become pinned once a counted gate accepts them."""


def proposal(
    git_dir: Path, role: str, head: str, tree: str, floor: dict[str, int]
) -> dict[str, Any]:
    """The workflow context a test engineer's candidate adds: the test files it added or
    strengthened (`tests_proposed`), pinned by the gate step once a counted gate passes them."""
    if role not in TEST_ROLES:
        return {}
    added = {p: n for p, n in pins_at(git_dir, head).items() if n > floor.get(p, -1)}
    return {"tests_proposed": {"tree": tree, "pins": added}} if added else {}
