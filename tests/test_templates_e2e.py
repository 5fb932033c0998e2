"""Every shipped workflow template, end to end on real parts, delivers the implementation.

The same broken Python project (multiply adds), the same scripted workers (the implementer fixes
multiply, a test engineer adds a test, every reviewer approves), the real CLI of the pipeline
specs (e2e_support.CLI: which CLI runs is not what these specify) in the real sandbox: whatever
the template's steps, the project's own tests pass on the final branch tip, checked out by real
git and run by a real Python, and the branch holds one commit, of a tree that passed every gate.
Each template's wall time is printed (run with `-s` to see it)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from typing import TYPE_CHECKING, Any

import pytest
from e2e_support import (
    BAD_CALC,
    GOOD_CALC,
    implementer,
    planner,
    require_sandbox,
    reviewer,
    run_to_the_end,
    write_config,
    writes,
)

from supervisor.lifecycle import tasks
from supervisor.lifecycle.demo import PLAN, fenced, make_demo_repo

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.docker
TASK = "Fix multiply in calc.py"
TEMPLATES = ["_base", "mvp", "open_source", "enterprise", "security_critical"]
GATES = 'gates:\n  test: "python3 -m unittest -v"\n  lint: "python3 -m compileall -q ."\n'
MORE_TESTS = """import unittest

from calc import multiply


class MoreTest(unittest.TestCase):
    def test_multiply_by_zero(self):
        self.assertEqual(multiply(7, 0), 0)
"""
TYPES = '"""Shared types."""\n\nNumber = int\n'


@pytest.fixture(autouse=True)
def real_parts(api_keys: None) -> None:
    require_sandbox()


@pytest.fixture(scope="module")
def broken_project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Made once: the demo project with multiply broken, committed."""
    repo = make_demo_repo(tmp_path_factory.mktemp("broken") / "repo")
    (repo / "calc.py").write_text(BAD_CALC)
    git(repo, "-c", "user.name=t", "-c", "user.email=t@localhost", "commit", "-qam", "break it")
    return repo


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=True
    ).stdout


def workers() -> list[dict[str, Any]]:
    return [
        planner("Plan:\n" + fenced(PLAN)),
        writes("ROLE: tech_lead", "calc_types.py", TYPES),
        implementer(GOOD_CALC),
        writes("ROLE: test_engineer", "test_more.py", MORE_TESTS),
        {**reviewer(), "repeat": True},
        {**reviewer(when="ROLE: security_auditor"), "repeat": True},
    ]


def project_tests_on(repo: Path, branch: str, where: Path) -> subprocess.CompletedProcess[str]:
    """The project's own tests on `branch`, checked out by git into a fresh directory."""
    where.mkdir()
    archive = subprocess.run(
        ["git", "-C", str(repo), "archive", branch], capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(where)], input=archive, check=True)
    return subprocess.run(
        [sys.executable, "-m", "unittest", "-v"],
        cwd=where,
        capture_output=True,
        text=True,
        check=False,
    )


@pytest.mark.parametrize("template", TEMPLATES)
def test_every_template_delivers_the_fix_on_the_task_branch(
    tmp_path: Path, serve: Any, broken_project: Path, template: str
) -> None:
    server = serve(*workers())
    repo = tmp_path / "repo"
    shutil.copytree(broken_project, repo)
    write_config(repo, server.url)
    with (repo / ".supervisor" / "config.yaml").open("a") as handle:
        handle.write(GATES + f"workflow: {{template: {template}}}\n")
    assert project_tests_on(repo, "main", tmp_path / "before").returncode != 0

    started = time.monotonic()
    wf = run_to_the_end(TASK, repo)
    seconds = time.monotonic() - started
    print(f"\ntemplate {template}: {seconds:.1f} s wall time")

    assert wf.status == "completed"
    result = project_tests_on(repo, wf.task_branch, tmp_path / "after")
    assert result.returncode == 0, result.stderr
    assert "test_multiply" in result.stderr
    if template in ("open_source", "enterprise", "security_critical"):
        assert "test_multiply_by_zero" in result.stderr  # the test engineer's work is kept too
    # One commit on the branch, of a tree every gate passed, naming them and the reviewers.
    commits = git(repo, "rev-list", f"{wf.base_sha}..{wf.task_branch}").split()
    assert len(commits) == 1
    message = git(repo, "log", "-1", "--format=%B", wf.task_branch)
    assert "Gates passed: test" in message
    assert "reviewer" in message
    assert "- calc: add and multiply" in message
    with tasks.reading(repo) as store:
        gates = [e for e in store.events(wf.id) if e.type == "gate" and e.step in ("test", "lint")]
        tree = git(repo, "rev-parse", f"{wf.task_branch}^{{tree}}").strip()
        committed = [e for e in store.events(wf.id) if e.type == "commit"][-1]
        assert committed.payload["tree"] == tree
        assert gates and gates[-1].status == "passed"
