"""The approval policy and budgets on real parts: the real `supervisor` command, the real `claude`
binary in the real Docker sandbox against the scripted model API, real git and SQLite."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import TYPE_CHECKING, Any

import pytest
from e2e_support import GOOD_CALC, implementer, new_repo, require_sandbox, reviewer, write_workflow

from supervisor.lifecycle import tasks
from supervisor.lifecycle.demo import fenced

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.docker

WORKFLOW = (
    "workflow:\n  initial_step: implement\n  steps:\n"
    "    implement: {role: implementer, next: test, max_retries: 2}\n"
    "    test: {gate: test, next: review, on_fail: implement}\n"
    "    review: {role: reviewer, next: commit, on_reject: implement}\n"
    "    commit: {action: commit}\n"
)
TOKEN_CODE = "def issue_token(user):\n    return 'token-' + user\n"


@pytest.fixture(autouse=True)
def real_parts(api_keys: None) -> None:
    require_sandbox()


def cli(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "supervisor", *args, "--repo", str(repo)],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        env={**os.environ, "COLUMNS": "200"},
        check=False,
        timeout=600,
    )


def writes_auth_code() -> dict[str, Any]:
    """An implementer that adds auth/tokens.py next to a correct calc.py."""
    report = {
        "status": "SUCCESS",
        "summary": "token issuing",
        "files_created": ["auth/tokens.py"],
        "files_modified": ["calc.py"],
    }
    return {
        "when": "ROLE: implementer",
        "turns": [
            {"tool_use": {"name": "Read", "input": {"file_path": "calc.py"}}},
            {
                "tool_use": {
                    "name": "Write",
                    "input": {"file_path": "calc.py", "content": GOOD_CALC},
                }
            },
            {
                "tool_use": {
                    "name": "Write",
                    "input": {"file_path": "auth/tokens.py", "content": TOKEN_CODE},
                }
            },
            {"text": "Done.\n" + fenced(report)},
        ],
    }


def show(done: subprocess.CompletedProcess[str]) -> str:
    return f"exit {done.returncode}\nstdout:\n{done.stdout}\nstderr:\n{done.stderr}"


def test_a_candidate_touching_auth_stops_with_exit_code_10_showing_its_risk_level_and_reasons(
    tmp_path: Path, serve: Any
) -> None:
    server = serve(writes_auth_code(), reviewer())
    repo = new_repo(tmp_path, server.url)
    write_workflow(repo, WORKFLOW)

    started = cli(repo, "start-task", "Add token issuing", "--yes")

    assert started.returncode == 10, show(started)
    assert "risk: high (needs one approval)" in started.stderr, show(started)
    assert "why: sensitive paths: auth (auth/tokens.py)" in started.stderr
    wf = tasks.workflows(repo)[0]
    assert (wf.status, wf.current_step) == ("awaiting_approval", "commit")
    branch_files = subprocess.run(
        ["git", "-C", str(repo), "ls-tree", "-r", "--name-only", wf.task_branch],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert "auth/tokens.py" not in branch_files  # nothing committed before the approval

    approved = cli(repo, "approve", str(wf.id), "--as", "lead@example.com")
    assert approved.returncode == 0, show(approved)
    assert "risk: high" in approved.stdout
    resumed = cli(repo, "resume", str(wf.id))
    assert resumed.returncode == 0, show(resumed)
    shown = subprocess.run(
        ["git", "-C", str(repo), "show", f"{wf.task_branch}:auth/tokens.py"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert shown == TOKEN_CODE


def test_a_task_past_its_budget_waits_in_budget_exceeded_and_approve_extend_resumes_it(
    tmp_path: Path, serve: Any
) -> None:
    server = serve(implementer(GOOD_CALC), reviewer())
    # One turn of the real CLI costs several cents by its own accounting: a one-cent budget is
    # crossed within the first step, and claude's own --max-budget-usd stops it there.
    repo = new_repo(tmp_path, server.url, "budgets:\n  task: {usd: 0.01}\n", cli="claude")
    write_workflow(repo, WORKFLOW)

    started = cli(repo, "start-task", "Implement add and multiply", "--yes")

    assert started.returncode == 10, show(started)
    assert "paused: the task spent $" in started.stderr, show(started)
    assert "of $0.01" in started.stderr
    assert "approve 1 --extend" in started.stderr
    turns = [r for r in server.requests if r.kind == "scripted"]
    assert len(turns) == 1, "claude stopped at its own budget flag after one turn"
    wf = tasks.workflows(repo)[0]
    assert (wf.status, wf.current_step) == ("budget_exceeded", "implement")
    status = cli(repo, "status", "1")
    assert "task budget: $" in status.stdout and "of $0.01" in status.stdout, show(status)

    still = cli(repo, "resume", "1")
    assert still.returncode == 10, show(still)  # no extension, no progress
    extended = cli(repo, "approve", "1", "--extend", "2.00")
    assert extended.returncode == 0, show(extended)
    resumed = cli(repo, "resume", "1")

    assert resumed.returncode == 0, show(resumed)
    assert tasks.workflows(repo)[0].status == "completed"
    with tasks.reading(repo) as store:
        events = store.events(1)
    assert [e.payload["usd"] for e in events if e.type == "budget_extended"] == [2.0]
    assert [e.type for e in events].count("budget_exceeded") == 1
