"""What a task's lifecycle commands do in each state the task can be in (issue 59): landed,
abandoned, waiting, running; each command checks the state before it acts, a refusal names the
state and the next command, and a command that deletes work names what never landed, with the
SHA and the `git branch` that gets it back.

The real engine, real SQLite and git and the real `supervisor` command line in-process; workers
scripted by the stand-in sandbox (tests/test_engine_fast.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
import test_engine_fast
from cli_support import supervisor
from test_engine_fast import Project, reviews, writes
from test_status_watch import make_workflow

from supervisor.core.errors import ApprovalRequired
from supervisor.state.locks import task_lock

if TYPE_CHECKING:
    import subprocess
    from collections.abc import Callable
    from pathlib import Path

project = test_engine_fast.project
warm_packer = test_engine_fast.warm_packer

IMPLEMENT_REVIEW_COMMIT = """implement
  steps:
    implement: {role: implementer, next: review, max_retries: 2}
    review: {role: reviewer, next: commit, on_reject: implement}
    commit: {action: commit}
"""


def completed(project: Callable[..., Project]) -> Project:
    p = project(
        IMPLEMENT_REVIEW_COMMIT,
        None,
        ("ROLE: implementer", writes({"answer.txt": "right\n"})),
        ("ROLE: reviewer", reviews("APPROVED")),
    )
    assert p.start().status == "completed"
    return p


def said(result: subprocess.CompletedProcess[str]) -> str:
    """stdout and stderr as one line (the console wraps long lines)."""
    return " ".join(f"{result.stdout} {result.stderr}".split())


# -- complete-task -------------------------------------------------------------------------------


def test_a_second_complete_task_is_refused_and_adds_no_commit(
    project: Callable[..., Project],
) -> None:
    p = completed(project)
    repo = ["--repo", str(p.root)]
    first = supervisor("complete-task", "1", "--yes", *repo)
    assert first.returncode == 0, first.stderr
    landed = p.git("rev-parse", "main").strip()

    again = supervisor("complete-task", "1", "--yes", *repo)

    assert again.returncode == 2, again.stdout + again.stderr
    assert p.git("rev-parse", "main").strip() == landed  # no empty duplicate commit
    text = said(again)
    assert f"Workflow 1 was landed already: squash into main as {landed}" in text
    assert "supervisor abandon 1" in text  # what is left to do
    assert len(p.events("task_merged")) == 1


def test_complete_task_of_an_abandoned_task_says_so_and_suggests_no_resume(
    project: Callable[..., Project],
) -> None:
    p = completed(project)
    repo = ["--repo", str(p.root)]
    assert supervisor("abandon", "1", "--yes", *repo).returncode == 0

    refused = supervisor("complete-task", "1", "--yes", *repo)

    assert refused.returncode == 2
    text = said(refused)
    assert "Workflow 1 was abandoned" in text and "nothing to land" in text
    assert "is kept" not in text and "supervisor resume" not in text
    assert 'supervisor start-task "Write the answer file"' in text


def test_complete_task_of_a_waiting_task_names_the_approval_to_give(
    project: Callable[..., Project],
) -> None:
    p = project(
        IMPLEMENT_REVIEW_COMMIT,
        None,
        ("ROLE: implementer", writes({"auth/login.py": "def login(user):\n    return False\n"})),
        ("ROLE: reviewer", reviews("APPROVED")),
    )
    with pytest.raises(ApprovalRequired):
        p.start()
    refused = supervisor("complete-task", "1", "--yes", "--repo", str(p.root))
    assert refused.returncode == 2
    text = said(refused)
    assert "Workflow 1 waits for approval" in text
    assert "supervisor approve 1" in text and "supervisor resume 1" in text


def test_a_dirty_checkout_of_the_base_branch_is_a_state_error_before_anything_lands(
    project: Callable[..., Project],
) -> None:
    p = completed(project)
    before = p.git("rev-parse", "main").strip()
    (p.root / "README.md").write_text("my edit, not committed\n")

    refused = supervisor("complete-task", "1", "--yes", "--repo", str(p.root))

    assert refused.returncode == 2  # README: 2 a usage or state error
    assert "main is checked out with uncommitted changes" in said(refused)
    assert "Squash" not in refused.stdout  # refused before the preview
    assert p.git("rev-parse", "main").strip() == before
    assert (p.root / "README.md").read_text() == "my edit, not committed\n"


def test_landing_commits_are_the_users_with_supervisor_and_the_task_in_a_trailer(
    project: Callable[..., Project],
) -> None:
    p = completed(project)
    p.git("config", "user.name", "Ada Lovelace")
    p.git("config", "user.email", "ada@example.com")

    done = supervisor("complete-task", "1", "--yes", "--squash", "--repo", str(p.root))

    assert done.returncode == 0, done.stderr
    who = p.git("log", "-1", "--format=%an <%ae>|%cn <%ce>", "main").strip()
    assert who == "Ada Lovelace <ada@example.com>|Ada Lovelace <ada@example.com>"
    message = p.git("log", "-1", "--format=%B", "main")
    assert "Co-authored-by: supervisor <supervisor@localhost>" in message
    assert "Supervisor-Workflow: 1" in message
    trailers = p.git("log", "-1", "--format=%(trailers:only,unfold)", "main")
    assert "Co-authored-by: supervisor <supervisor@localhost>" in trailers  # git reads it as one


@pytest.mark.parametrize("mode", ["--merge", "--rebase"])
def test_merge_and_rebase_landings_are_the_users_too(
    project: Callable[..., Project], mode: str
) -> None:
    p = completed(project)
    p.git("config", "user.email", "ada@example.com")
    p.git("config", "user.name", "Ada Lovelace")
    (p.root / "other.txt").write_text("main moved on\n")  # so that a merge is no fast-forward
    p.git("add", "other.txt")
    p.git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "meanwhile")

    done = supervisor("complete-task", "1", "--yes", mode, "--repo", str(p.root))

    assert done.returncode == 0, done.stderr
    assert p.git("log", "-1", "--format=%ae %ce", "main").split() == ["ada@example.com"] * 2
    trailers = p.git("log", "-1", "--format=%(trailers:only,unfold)", "main")
    assert "Co-authored-by: supervisor <supervisor@localhost>" in trailers
    assert "Supervisor-Workflow: 1" in trailers


# -- resume --------------------------------------------------------------------------------------


def test_resume_of_an_abandoned_task_is_refused_and_makes_no_branch(
    project: Callable[..., Project],
) -> None:
    p = project(
        IMPLEMENT_REVIEW_COMMIT,
        None,
        ("ROLE: implementer", writes({"auth/login.py": "def login(user):\n    return False\n"})),
        ("ROLE: reviewer", reviews("APPROVED")),
    )
    with pytest.raises(ApprovalRequired):
        p.start()
    repo = ["--repo", str(p.root)]
    branch = p.workflow().task_branch
    assert supervisor("abandon", "1", "--yes", *repo).returncode == 0

    refused = supervisor("resume", "1", *repo)

    assert refused.returncode == 2, refused.stdout + refused.stderr
    text = said(refused)
    assert "Workflow 1 was abandoned" in text and "nothing to resume" in text
    assert 'supervisor start-task "Write the answer file"' in text
    assert p.git("branch", "--list", branch).strip() == ""  # not made again
    assert p.workflow().status == "abandoned"


# -- abandon -------------------------------------------------------------------------------------


def test_abandoning_a_task_that_never_landed_names_its_commit_and_how_to_get_it_back(
    project: Callable[..., Project],
) -> None:
    p = completed(project)
    branch = p.workflow().task_branch
    tip = p.git("rev-parse", branch).strip()
    repo = ["--repo", str(p.root)]
    recover = f"`git branch {branch} {tip}` gets it back"

    previewed = supervisor("abandon", "1", *repo)  # no terminal: the preview only
    assert f"never landed: {branch} at {tip}; {recover}" in said(previewed)

    done = supervisor("abandon", "1", "--yes", *repo)

    assert done.returncode == 0, done.stderr
    text = said(done)
    assert f"never landed: {branch} at {tip}; {recover}" in text  # before deleting
    after = text[text.index("abandoned") :]
    assert tip in after and recover in after  # and again after
    assert p.git("branch", "--list", branch).strip() == ""
    p.git("branch", branch, tip)  # what it said gets it back does
    assert p.git("show", f"{branch}:answer.txt") == "right\n"
    removed = p.events("abandoned")[0].payload["removed"]
    assert f"branch {branch} at {tip}" in removed  # the log keeps the SHA too


def test_abandoning_a_landed_task_says_it_landed_and_warns_of_nothing(
    project: Callable[..., Project],
) -> None:
    p = completed(project)
    repo = ["--repo", str(p.root)]
    assert supervisor("complete-task", "1", "--yes", *repo).returncode == 0
    landed = p.git("rev-parse", "main").strip()

    done = supervisor("abandon", "1", "--yes", *repo)

    assert done.returncode == 0, done.stderr
    text = said(done)
    assert f"landed: squash into main as {landed}" in text
    assert "never landed" not in text


def test_abandoning_twice_is_refused_with_the_state(project: Callable[..., Project]) -> None:
    p = completed(project)
    repo = ["--repo", str(p.root)]
    assert supervisor("abandon", "1", "--yes", *repo).returncode == 0
    again = supervisor("abandon", "1", "--yes", *repo)
    assert again.returncode == 2
    assert "Workflow 1 was abandoned already" in said(again)
    assert len(p.events("abandoned")) == 1


# -- status --------------------------------------------------------------------------------------


def test_status_of_one_workflow_as_json_has_its_supervisor_pid(
    project: Callable[..., Project],
) -> None:
    import json

    p = completed(project)
    shown = supervisor("status", "1", "--json", "--repo", str(p.root))
    assert shown.returncode == 0, shown.stderr
    data = json.loads(shown.stdout)
    assert "supervisor_pid" in data and data["supervisor_pid"] is None  # none runs it
    listed = json.loads(supervisor("status", "--json", "--repo", str(p.root)).stdout)
    assert listed[0]["supervisor_pid"] == data["supervisor_pid"]


def test_status_of_a_running_workflow_as_json_names_the_process_that_runs_it(
    tmp_path: Path,
) -> None:
    import json
    import os

    repo, wf_id = make_workflow(tmp_path)  # running
    with task_lock(repo / ".supervisor", wf_id):  # this process runs it
        shown = supervisor("status", str(wf_id), "--json", "--repo", str(repo))
    assert json.loads(shown.stdout)["supervisor_pid"] == os.getpid()
