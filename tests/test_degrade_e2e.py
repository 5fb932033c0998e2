"""Graceful degradation on real parts: the real `claude` in the real sandbox against the scripted
API, real git and SQLite. A step whose retries are spent runs once more at the minimal level (the
prompt says so), the result is marked degraded in `status`, waits for a person, and its commit
message says what it is."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import TYPE_CHECKING, Any

import pytest
from e2e_support import BAD_CALC, GOOD_CALC, implementer, new_repo, require_sandbox, write_workflow

from supervisor.core.errors import ApprovalRequired
from supervisor.lifecycle import tasks

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.docker
TASK = "Fix multiply in calc.py"
MINIMAL = "REDUCED SCOPE (a minimal attempt"
DEGRADING = (
    "workflow:\n  initial_step: implement\n  steps:\n"
    "    implement: {role: implementer, next: test, max_retries: 0, degrade: [minimal]}\n"
    "    test: {gate: test, next: commit, on_fail: implement}\n"
    "    commit: {action: commit}\n"
)


@pytest.fixture(autouse=True)
def real_parts(api_keys: None) -> None:
    require_sandbox()


def cli(repo: Path, *args: str) -> str:
    return subprocess.run(
        [sys.executable, "-m", "supervisor", *args, "--repo", str(repo)],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        env={**os.environ, "COLUMNS": "200"},
        check=False,
    ).stdout


def test_a_minimal_result_from_the_real_cli_is_marked_and_waits_for_approval(
    tmp_path: Path, serve: Any
) -> None:
    server = serve(implementer(GOOD_CALC, when=MINIMAL), implementer(BAD_CALC))
    repo = new_repo(tmp_path, server.url)
    write_workflow(repo, DEGRADING)

    with pytest.raises(ApprovalRequired):
        tasks.start_task(TASK, repo)

    assert server.player.unused() == []  # the primary run, then the minimal one
    wf = tasks.workflows(repo)[0]
    assert wf.status == "awaiting_approval"
    assert wf.context["degraded"] == {"implement": "minimal"}
    listing = cli(repo, "status")
    assert "degraded: minimal (implement)" in listing
    detail = cli(repo, "status", str(wf.id))
    assert "DEGRADED (minimal) result of step 'implement'" in detail
    branch = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", wf.task_branch], capture_output=True, text=True
    ).stdout.strip()
    assert branch == wf.base_sha  # nothing committed before a person saw it

    tasks.decide(wf.id, repo, approve=True)
    done = tasks.resume(wf.id, repo)

    assert done.status == "completed"
    message = subprocess.run(
        ["git", "-C", str(repo), "log", "-1", "--format=%B", done.task_branch],
        capture_output=True,
        text=True,
    ).stdout
    assert "DEGRADED (minimal) result of step 'implement'" in message
