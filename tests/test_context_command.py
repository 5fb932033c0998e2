"""`supervisor context <role>` says what it packs for, in words (issue 59): a `--target` that does
not exist is refused (exit 2) rather than packed as nothing; with no target it says that nothing
is targeted and what it packs anyway, instead of printing empty tables. The real command line on a
real git repository."""

from __future__ import annotations

import json
import subprocess
from typing import TYPE_CHECKING

import pytest
from cli_support import supervisor

if TYPE_CHECKING:
    from pathlib import Path

EMPTY_TABLE = ("┃ file ┃", "┃ section ┃")


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SUPERVISOR_USER_DIR", str(tmp_path / "user"))
    root = tmp_path / "repo"
    (root / "src").mkdir(parents=True)
    (root / "src" / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "init"], check=True)
    return root


def test_a_target_that_does_not_exist_is_refused(repo: Path) -> None:
    done = supervisor("context", "implementer", "--target", "nosuch.py", "--repo", str(repo))
    assert done.returncode == 2, done.stdout
    said = " ".join(done.stderr.split())
    assert "--target nosuch.py" in said and "does not exist" in said
    assert "fix:" in said
    assert done.stdout == ""


def test_without_a_target_it_says_nothing_is_targeted_in_words(repo: Path) -> None:
    done = supervisor("context", "implementer", "--repo", str(repo))
    assert done.returncode == 0, done.stderr
    said = " ".join(done.stdout.split())
    assert "targets none: no --target given, and the working tree has no changes" in said
    assert "files packed none: the role's prompt and the task only" in said
    assert "pruned nothing: it all fits the budget" in said
    for table in EMPTY_TABLE:
        assert table not in done.stdout, done.stdout


def test_a_target_is_named_with_what_it_packs(repo: Path) -> None:
    done = supervisor("context", "implementer", "--target", "src/calc.py", "--repo", str(repo))
    assert done.returncode == 0, done.stderr
    said = " ".join(done.stdout.split())
    assert "targets src/calc.py (--target)" in said
    assert "src/calc.py" in said.split("targets src/calc.py (--target)", 1)[1]
    data = json.loads(
        supervisor(
            "context", "implementer", "--target", "src/calc.py", "--json", "--repo", str(repo)
        ).stdout
    )
    assert data["targets"] == ["src/calc.py"] and "src/calc.py" in data["files"]


def test_the_working_trees_changes_are_the_targets_when_none_is_given(repo: Path) -> None:
    (repo / "src" / "calc.py").write_text("def add(a, b):\n    return b + a\n")
    done = supervisor("context", "implementer", "--repo", str(repo))
    said = " ".join(done.stdout.split())
    assert "targets src/calc.py (the working tree's changes)" in said
