"""`supervisor init` as a new user meets it, in a real terminal (tmux) with the real Docker build:
what it detected comes first, then one checklist of role packs, then progress while the project
image builds and the gates run, then what to do next.

Two projects, each built once: a Python project with a failing test (the reason shown is pytest's
summary of it), and a Node project with no dependencies and no lock file (its generated
Dockerfile used to fail on `mv node_modules`), on which `sandbox shell` then runs a command that
writes into the checkout's copy.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from e2e_support import missing, remove_project_images, require_sandbox
from test_tui_tmux import Terminal, wait_for

if TYPE_CHECKING:
    from collections.abc import Iterator

pytestmark = pytest.mark.docker
BUILD_SECONDS = 900  # a cold build installs pytest from PyPI; a scripted stall is not possible
REPO_ROOT = Path(__file__).resolve().parent.parent


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def make(root: Path, files: dict[str, str]) -> Path:
    root.mkdir(parents=True)
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "upstream")
    return root


@pytest.fixture(autouse=True)
def real_parts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    require_sandbox()
    if shutil.which("tmux") is None:
        missing("tmux not installed (scripts/setup.sh installs it)")
    monkeypatch.setenv("SUPERVISOR_USER_DIR", str(tmp_path / "user"))
    yield
    remove_project_images(tmp_path)


def init_in_terminal(repo: Path) -> Terminal:
    """`supervisor init` in a terminal that stays open after it exits, its exit code on screen."""
    init = f"{sys.executable} -m supervisor init --repo {repo}"
    return Terminal(
        ["env", f"PYTHONPATH={REPO_ROOT}", "sh", "-c", f"{init}; echo EXIT=$?; sleep 3600"], repo
    )


def number_of(screen: str, title: str) -> str:
    line = next(line for line in screen.splitlines() if f"] {title}" in line)
    return line.split("[")[0].strip()


def test_init_on_a_python_project_shows_before_it_asks_and_reports_the_failing_test(
    tmp_path: Path,
) -> None:
    repo = make(
        tmp_path / "py",
        {
            "pyproject.toml": '[project]\nname = "calc"\nversion = "1"\ndependencies = []\n',
            "calc.py": "def add(a, b):\n    return a + b\n",
            "tests/test_calc.py": "from calc import add\n\n\ndef test_add():\n"
            "    assert add(1, 2) == 3\n\n\ndef test_add_negative():\n"
            "    assert add(-1, -2) == -4\n",
        },
    )
    term = init_in_terminal(repo)
    try:
        asked = wait_for(
            lambda: "Numbers to toggle" in (s := term.screen()) and s, 180, term.screen
        )
        # The detection is on screen above the one question, with its evidence.
        assert asked.index("Detected") < asked.index("Gates") < asked.index("Role packs")
        assert "python3 -m pytest -q  (tests/test_calc.py (tests))" in asked
        assert "] Rust" not in asked and "] Go " not in asked  # no packs for other languages
        security = number_of(asked, "Security auditing")
        term.keys(security, "Enter")
        wait_for(lambda: "[x] Security auditing" in term.screen(), 120, term.screen)
        term.keys("Enter")
        # Progress, then the verdict: pytest's own summary, not its timing line.
        done = wait_for(lambda: "EXIT=" in (s := term.screen()) and s, BUILD_SECONDS, term.screen)
        assert "image ready" in done
        assert "✗ test: exit 1: 1 failed, 1 passed: tests/test_calc.py::test_add_negative" in done
        assert "role packs  security" in done
        assert "git add .supervisor" in done and 'supervisor start-task "' in done
        assert "EXIT=0" in done
    finally:
        term.close()
    assert (repo / ".supervisor" / "roles" / "appsec_reviewer.yaml").is_file()


def test_init_on_a_node_project_without_dependencies_builds_and_its_gate_passes(
    tmp_path: Path,
) -> None:
    repo = make(
        tmp_path / "node",
        {
            "package.json": json.dumps(
                {"name": "tiny", "version": "1.0.0", "scripts": {"test": "node --test"}}
            ),
            "test/add.test.js": 'const test = require("node:test");\n'
            'const assert = require("node:assert");\n'
            'test("adds", () => assert.strictEqual(1 + 1, 2));\n',
        },
    )
    term = init_in_terminal(repo)
    try:
        asked = wait_for(
            lambda: "Numbers to toggle" in (s := term.screen()) and s, 180, term.screen
        )
        assert "Package manager  npm  (default (no lock file))" in asked
        term.keys("Enter")
        done = wait_for(lambda: "EXIT=" in (s := term.screen()) and s, BUILD_SECONDS, term.screen)
        assert "✓ test: passed" in done and "EXIT=0" in done
        assert "\x1b" not in done and "cannot stat" not in done
    finally:
        term.close()

    # Running init again knows the files it wrote a minute before.
    again = subprocess.run(
        [
            sys.executable,
            "-m",
            "supervisor",
            "init",
            "--yes",
            "--no-check-gates",
            "--repo",
            str(repo),
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "200", "PYTHONPATH": str(REPO_ROOT)},
        check=False,
    )
    assert again.returncode == 0, again.stderr
    assert "left alone" not in again.stdout and "sandbox/Dockerfile" in again.stdout

    # `sandbox shell` runs on a writable copy of HEAD: a test run may write (coverage) and
    # uncommitted files are not there; the checkout is untouched.
    (repo / "scratch.txt").write_text("not committed\n")
    shell = subprocess.run(
        [sys.executable, "-m", "supervisor", "sandbox", "shell", "--repo", str(repo),
         "sh", "-c", "mkdir coverage && echo made > coverage/out && ls -A && npm test"],
        capture_output=True, text=True, timeout=BUILD_SECONDS,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
    )  # fmt: skip
    assert shell.returncode == 0, shell.stdout + shell.stderr
    assert "coverage" in shell.stdout and "package.json" in shell.stdout
    assert "scratch.txt" not in shell.stdout
    assert not (repo / "coverage").exists()
