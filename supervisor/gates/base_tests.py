"""The tests of the task's base commit are its specification: what a candidate did to them, and
the candidate's code with them put back.

Why: a worker judged by the tests can make them pass by rewriting them (an assertion turned into
`assertEqual(5, 5)`, a skip decorator, an expected value changed to match wrong code, assertions
wrapped in `try/except`), keeping the count of tests and functions that test_pins and
test_counts check. Reading the change cannot prove anything either way, but running the base's
own tests on the candidate's code can: when a candidate changed, deleted or renamed a test file
that existed when the task started, the test gate also runs on `restored()`, the candidate's
tree with every test file of the base put back as it was and every test file the candidate
added left out (a new test module could patch the runner for the old ones). Both runs must pass;
when only the candidate's own does, the candidate changes the specification, which is a
person's decision (gates/base_oracle.py).

Everything here is git data: trees and blobs of the main repository's object database, never a
worktree, never anything run on the host.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import pathspec
from pydantic import Field

from supervisor.core.strict_model import StrictModel
from supervisor.gates import rust_tests
from supervisor.gates.test_pins import TEST_FILES
from supervisor.workspace import treedata

SUPPORT = pathspec.GitIgnoreSpec.from_lines(
    [
        # Where tests and what they read live, at any depth: helpers, fixtures, expected data.
        "**/tests/**",
        "**/test/**",
        "**/__tests__/**",
        "**/testdata/**",
        # pytest's fixtures and hooks, which every test below them runs through.
        "conftest.py",
    ]
)
"""Test support beyond the test files themselves (test_pins.TEST_FILES): changing an expected
output under `tests/fixtures/` or a fixture in `conftest.py` changes what the tests say."""

DIFF_LIMIT = 60_000
"""Characters of the test diff kept for a person (status, the TUI's approval screen)."""
MAX_SIGNALS = 40


def is_spec(path: str) -> bool:
    """Whether `path` belongs to the tests (a test file or their support files)."""
    return TEST_FILES.match_file(path) or SUPPORT.match_file(path)


@dataclass(frozen=True)
class SpecChanges:
    """What a candidate did to the base's tests: each changed path with how (modified,
    deleted, type changed)."""

    changed: dict[str, str]

    def __bool__(self) -> bool:
        return bool(self.changed)

    @property
    def modified(self) -> list[str]:
        """The changed test files that still exist (the ones whose text can be compared)."""
        return [p for p, how in self.changed.items() if how == "modified"]

    def describe(self) -> list[str]:
        """`test_calc.py (modified)`, one per path, as a person reads them."""
        return [f"{path} ({how})" for path, how in sorted(self.changed.items())]


HOW = {"M": "modified", "D": "deleted", "T": "type changed"}


def changes(git_dir: Path, base: str, head: str) -> SpecChanges:
    """The base's test paths that `head` modified, deleted or turned into another kind of
    entry (a symlink, a submodule). Added paths are not changes to the specification."""
    out = treedata.git_bytes(
        git_dir, "diff", "--no-renames", "--name-status", "-z", "--no-ext-diff", base, head, "--"
    )
    fields = out.split(b"\0")
    changed: dict[str, str] = {}
    sources: list[str] = []
    for status, raw in zip(fields[0::2], fields[1::2], strict=False):
        path = os.fsdecode(raw)
        how = HOW.get(status.decode()[:1])
        if how is not None and is_spec(path):
            changed[path] = how
        elif how == "modified" and path.endswith(".rs"):
            sources.append(path)
    for path in _mixed(git_dir, base, head, sources):
        changed[path] = "test module modified"
    return SpecChanges(changed)


def _mixed(git_dir: Path, base: str, head: str, paths: list[str]) -> dict[str, bytes]:
    """The Rust sources among `paths` whose `#[cfg(test)]` modules `head` changed: each with
    its text for the oracle's tree (`head`'s code, the base's test modules)."""
    if not paths:
        return {}
    before = treedata.CommitFiles(git_dir, base).read_many(paths)
    with_tests = [p for p, data in before.items() if rust_tests.MARK in data]
    after = treedata.CommitFiles(git_dir, head).read_many(with_tests)
    return {
        p: rust_tests.restored(before[p], after[p])
        for p in with_tests
        if p in after and rust_tests.changed(before[p], after[p])
    }


IDENTITY = {
    "GIT_AUTHOR_NAME": "supervisor",
    "GIT_AUTHOR_EMAIL": "supervisor@localhost",
    "GIT_COMMITTER_NAME": "supervisor",
    "GIT_COMMITTER_EMAIL": "supervisor@localhost",
}


def restored(git_dir: Path, base: str, head: str) -> str:
    """A commit (child of `head`, on no branch) of `head`'s tree with the base's tests: every
    test path of `base` as it is there, no test path `base` does not have. The rest (the code
    under test, the build) is `head`'s."""
    tree = _restored_tree(git_dir, base, head)
    message = f"{head[:12]} with the tests of {base[:12]}"
    out = treedata.git_bytes(git_dir, "commit-tree", tree, "-p", head, "-m", message, env=IDENTITY)
    return out.decode().strip()


def _restored_tree(git_dir: Path, base: str, head: str) -> str:
    theirs = treedata.list_tree(git_dir, head)
    everything = treedata.list_tree(git_dir, base)
    ours = {p: e for p, e in everything.items() if is_spec(p)}
    # A file of the candidate where the base's tests need a directory (`tests` where the base
    # has `tests/test_a.py`), or below one of the base's test files, gives way to the tests.
    held = {parent for p in ours for parent in _parents(p)}
    entries = {
        p: e
        for p, e in theirs.items()
        if not is_spec(p) and p not in held and not any(q in ours for q in _parents(p))
    }
    entries.update(ours)
    # Rust sources keep their code and get the base's `#[cfg(test)]` modules back.
    sources = [
        p
        for p, e in entries.items()
        if p.endswith(".rs") and p in everything and everything[p].sha != e.sha
    ]
    for path, text in _mixed(git_dir, base, head, sources).items():
        blob = treedata.git_bytes(
            git_dir, "hash-object", "-w", "--no-filters", "--stdin", input_bytes=text
        )
        entries[path] = treedata.Entry(entries[path].mode, blob.decode().strip())
    info = b"".join(
        f"{e.mode} {e.sha}\t".encode() + os.fsencode(p) + b"\0" for p, e in sorted(entries.items())
    )
    with tempfile.TemporaryDirectory(prefix="supervisor-spec-") as tmp:
        index = {"GIT_INDEX_FILE": str(Path(tmp, "index"))}
        if info:
            treedata.git_bytes(
                git_dir, "update-index", "-z", "--index-info", input_bytes=info, env=index
            )
        return treedata.git_bytes(git_dir, "write-tree", env=index).decode().strip()


def _parents(path: str) -> list[str]:
    """`a/b/c.py` -> `a`, `a/b`."""
    parts = path.split("/")
    return ["/".join(parts[:i]) for i in range(1, len(parts))]


def diff(git_dir: Path, base: str, head: str, paths: list[str]) -> str:
    """The candidate's diff of the base's test files it changed, bounded, for a person."""
    if not paths:
        return ""
    text = treedata.git_bytes(
        git_dir,
        "diff",
        "--no-color",
        "--no-ext-diff",
        "--no-textconv",
        base,
        head,
        "--",
        *(f":(literal){p}" for p in paths),
    ).decode(errors="replace")
    return text if len(text) <= DIFF_LIMIT else text[:DIFF_LIMIT] + "\n[... diff shortened]\n"


class SpecChange(StrictModel):
    """What a candidate did to the base's tests, and what the base's tests say of its code."""

    tree: str
    """The candidate's tree, which this verdict is about."""
    gate: str
    command: str
    changed: list[str]
    """`test_calc.py (modified)`, one per changed test path of the base."""
    signals: list[str] = Field(default_factory=list)
    """Static tamper signals in the changed files (supervisor/gates/test_tamper.py)."""
    base_tests: Literal["passed", "failed"]
    failing: str = ""
    """Why the base's tests failed on the candidate's code (the runner's summary)."""
    oracle: str
    """The commit the base's tests ran on: the candidate's code with the base's tests."""
    diff: str = ""
    """The candidate's diff of the base's test files, bounded, for the person who decides."""

    @property
    def contradicts(self) -> bool:
        return self.base_tests == "failed"

    def lines(self) -> list[str]:
        """What a reviewer and a person are told, one line each."""
        said = [f"existing tests changed: {', '.join(self.changed)}"]
        if self.contradicts:
            said.append(f"the base's tests fail on this code: {self.failing}")
        else:
            said.append("the base's tests still pass on this code")
        return said + [f"tamper signal: {s}" for s in self.signals]


def joined(verdicts: list[dict[str, Any] | None], tree: str) -> dict[str, Any] | None:
    """The fan-out's components' verdicts as one, about the integrated `tree` their merge made:
    the base's tests fail on it when they failed on any component's code."""
    found = [SpecChange.model_validate(v) for v in verdicts if v]
    if not found:
        return None
    failed = [v for v in found if v.contradicts]
    return SpecChange(
        tree=tree,
        gate=found[0].gate,
        command=found[0].command,
        changed=sorted({c for v in found for c in v.changed}),
        signals=[s for v in found for s in v.signals][:MAX_SIGNALS],
        base_tests="failed" if failed else "passed",
        failing="; ".join(v.failing for v in failed)[:2000],
        oracle=(failed or found)[0].oracle,
        diff="".join(v.diff for v in found)[:DIFF_LIMIT],
    ).model_dump()
