"""Attacks with a worker's words and files, by scripted workers through the real `claude` binary
in the real Docker sandbox and the real `supervisor` command line: each one fails.

- A reviewer that approves while listing a security concern does not get the change committed
  unseen: the policy judges the review that just finished, and the run waits for a person.
- Escape sequences and rich markup in a summary, an issue list or a concern reach no terminal raw
  (`start-task`, `status`, `events`, `approve` are captured as bytes: no ESC at all, since rich
  writes no colour to a pipe) and crash no command.
- An answer nested 5,000 deep fails its step with a message naming the bound; the workflow
  fails resumable, and `resume` finishes it.
- A directory chain longer than PATH_MAX in the candidate is refused with feedback, not a crash.
"""

from __future__ import annotations

import os
import subprocess
import sys
from typing import TYPE_CHECKING, Any

import pytest
from e2e_support import (
    GOOD_CALC,
    implementer,
    new_repo,
    planner,
    require_sandbox,
    reviewer,
    write_workflow,
)
from test_attacks_host import attacker, events
from test_workflow_e2e import TASK, file_on_branch, leftovers

from supervisor.lifecycle import tasks
from supervisor.lifecycle.demo import fenced

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.docker

EVIL = "\x1b]0;pwned\x07\x1b[2J[/][link=http://x]click[/link]"
SHOWN = "\\x1b]0;pwned\\x07\\x1b[2J[/][link=http://x]click[/link]"


@pytest.fixture(autouse=True)
def real_parts(api_keys: None) -> None:
    require_sandbox()


def supervisor(repo: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    """The real command line, its output as the bytes a terminal would get."""
    return subprocess.run(
        [sys.executable, "-m", "supervisor", *args, "--repo", str(repo)],
        capture_output=True,
        env={**os.environ, "COLUMNS": "300"},
        timeout=600,
        check=False,
    )


def review(**said: Any) -> dict[str, Any]:
    """An approving review; its prose carries the raw sequences too (streamed as progress)."""
    answer = {"status": "APPROVED", "summary": "fine", "issues": [], **said}
    return reviewer(f"Reviewed {EVIL}\n" + fenced(answer))


def test_a_review_approving_with_a_security_concern_and_hostile_text_waits_and_shows_it_as_text(
    tmp_path: Path, serve: Any
) -> None:
    hostile = review(
        summary=f"summary {EVIL}",
        issues=[{"severity": "minor", "file": "calc.py", "description": f"issue {EVIL}"}],
        security_concerns=[f"concern {EVIL}"],
    )
    server = serve(planner(), implementer(GOOD_CALC), hostile)
    repo = new_repo(tmp_path, server.url)

    started = supervisor(repo, "start-task", TASK, "--yes")

    assert started.returncode == 10, started.stderr.decode()[-3000:]  # waits for approval
    wf = tasks.workflows(repo)[0]
    assert (wf.status, wf.current_step) == ("awaiting_approval", "commit")
    [assessed] = events(repo, wf.id, "risk_assessed")
    assert (assessed.status, assessed.payload["action"]) == ("high", "require_approval")
    assert assessed.payload["reasons"][0].startswith("reviewer security concerns: reviewer:")
    assert (
        "calc.py"
        not in subprocess.run(  # nothing committed unseen
            ["git", "-C", str(repo), "diff", "--name-only", wf.base_sha, wf.task_branch],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )

    shown = [started]
    shown += [supervisor(repo, *args) for args in (["status"], ["status", "1"], ["events", "1"])]
    shown.append(supervisor(repo, "approve", "1"))
    for done in shown:
        assert done.returncode == 0 or done is started, done.stderr.decode()[-2000:]
        out = done.stdout + done.stderr
        assert b"\x1b" not in out and b"\x07" not in out, done.args
    assert f"concern {SHOWN}".encode() in started.stderr  # the reason, shown as text
    assert f"concern {SHOWN}".encode() in shown[2].stdout  # `status 1`: what waits
    assert f"concern {SHOWN}".encode() in shown[4].stdout  # `approve`: what was approved

    resumed = supervisor(repo, "resume", "1")
    assert resumed.returncode == 0, resumed.stderr.decode()[-3000:]
    assert b"\x1b" not in resumed.stdout + resumed.stderr
    assert tasks.workflows(repo)[0].status == "completed"
    assert leftovers(repo) == ([], [])


PLAN_FIRST = (
    "workflow:\n  initial_step: plan\n  steps:\n"
    "    plan: {role: planner, next: implement, max_retries: 0}\n"
    "    implement: {role: implementer, next: test}\n"
    "    test: {gate: test, next: review, on_fail: implement}\n"
    "    review: {role: reviewer, next: commit}\n"
    "    commit: {action: commit}\n"
)


def test_an_answer_nested_5000_deep_fails_its_step_clearly_and_the_workflow_resumes(
    tmp_path: Path, serve: Any
) -> None:
    # 5,000 levels: past Python's recursion limit (json recursed into a RecursionError), within
    # what the claude binary itself passes through (100,000 crashed the CLI: a transient retry).
    nested = planner("Plan:\n```json\n" + '{"phases": [' * 2_500 + "\n```")
    server = serve(nested, planner(), implementer(GOOD_CALC), reviewer())
    repo = new_repo(tmp_path, server.url)
    write_workflow(repo, PLAN_FIRST)

    started = supervisor(repo, "start-task", TASK, "--yes")

    error = started.stderr.decode()
    failures = [e.payload for e in events(repo, 1, "worker_failed")]
    assert started.returncode != 0, failures
    assert "nests brackets 5000 levels deep, over the 64 levels" in error
    assert "Traceback" not in error and "RecursionError" not in error
    wf = tasks.workflows(repo)[0]
    assert (wf.status, wf.current_step) == ("failed", "plan")
    [invalid] = events(repo, wf.id, "output_invalid")
    assert "over the 64 levels" in invalid.payload["error"]

    resumed = supervisor(repo, "resume", "1")
    assert resumed.returncode == 0, resumed.stderr.decode()[-3000:]
    wf = tasks.workflows(repo)[0]
    assert wf.status == "completed"
    assert file_on_branch(repo, wf.task_branch, "calc.py") == GOOD_CALC
    assert leftovers(repo) == ([], [])


DEEP = (
    'd=$(printf "a%.0s" $(seq 200)); for i in $(seq 25); do mkdir "$d" && cd "$d"; done; '
    "echo deep > f; echo chain made"
)


def test_a_directory_chain_longer_than_path_max_is_refused_with_feedback_not_a_crash(
    tmp_path: Path, serve: Any
) -> None:
    server = serve(planner(), attacker(DEEP), implementer(GOOD_CALC), reviewer())
    repo = new_repo(tmp_path, server.url)

    started = supervisor(repo, "start-task", TASK, "--yes")

    assert started.returncode == 0, started.stderr.decode()[-3000:]
    wf = tasks.workflows(repo)[0]
    assert wf.status == "completed"
    [refused] = events(repo, wf.id, "unreadable_path")
    assert refused.status == "failed" and "cannot read as data" in refused.payload["error"]
    files = subprocess.run(
        ["git", "-C", str(repo), "ls-tree", "-r", "--name-only", wf.task_branch],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert not any(f.startswith("aaaa") for f in files)
    assert file_on_branch(repo, wf.task_branch, "calc.py") == GOOD_CALC
    assert leftovers(repo) == ([], [])
