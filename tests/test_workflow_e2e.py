"""The whole pipeline on real parts: the real `claude` binary in the real Docker sandbox, real git
worktrees and a real SQLite file, against the scripted model API on loopback."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from typing import TYPE_CHECKING, Any

import pytest
from e2e_support import (
    BAD_CALC,
    GOOD_CALC,
    PLAN_APPROVAL,
    implementer,
    new_repo,
    opening_prompts,
    planner,
    released_on_adoption,
    require_sandbox,
    reviewer,
    write_workflow,
)

from supervisor.core.errors import ApprovalRequired, StepFailedError
from supervisor.fakeapi import ScriptedModelServer
from supervisor.lifecycle import tasks
from supervisor.workspace.worktrees import Workspace

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.docker

TASK = "Implement add and multiply"


WORKTREE_DELAY = 0.3  # seconds


@pytest.fixture(autouse=True)
def real_parts(api_keys: None) -> None:
    require_sandbox()


def prompts(server: ScriptedModelServer, marker: str) -> list[str]:
    """The opening prompt of every conversation whose text holds `marker`."""
    return opening_prompts(server, marker)


def file_on_branch(repo: Path, branch: str, path: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), "show", f"{branch}:{path}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def leftovers(repo: Path) -> tuple[list[str], list[str]]:
    import docker

    from supervisor.sandbox.docker import LABEL_REPO, repo_label

    client = docker.from_env()
    containers = client.containers.list(
        all=True, filters={"label": f"{LABEL_REPO}={repo_label(repo)}"}
    )
    worktrees_dir = repo / ".supervisor" / "worktrees"
    worktrees = sorted(p.name for p in worktrees_dir.iterdir()) if worktrees_dir.exists() else []
    return [c.id for c in containers], worktrees


def test_start_task_commits_the_workers_file_on_the_task_branch_after_the_gate(
    tmp_path: Path, serve: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = serve(planner(), implementer(GOOD_CALC), reviewer())
    repo = new_repo(tmp_path, server.url)
    before = Workspace(repo).user_checkout_fingerprint()
    made = Workspace.add_worktree

    def slow_to_make(self: Workspace, *args: Any, **kwargs: Any) -> Any:
        time.sleep(WORKTREE_DELAY)  # a big repository's checkout, in effect
        return made(self, *args, **kwargs)

    monkeypatch.setattr(Workspace, "add_worktree", slow_to_make)

    wf = tasks.start_task(TASK, repo)

    assert wf.status == "completed"
    assert wf.task_branch == f"ai/{wf.id}-implement-add-and-multiply"
    assert file_on_branch(repo, wf.task_branch, "calc.py") == GOOD_CALC
    assert Workspace(repo).user_checkout_fingerprint() == before
    assert (repo / "calc.py").read_text() != GOOD_CALC  # the user's checkout is untouched
    assert not (repo / ".supervisor" / "bases").exists()  # the views' base went with the run
    with tasks.reading(repo) as store:
        gate = [e for e in store.events(wf.id) if e.type == "gate"]
        assert [e.status for e in gate] == ["passed"]
        assert "OK" in gate[0].payload["output_tail"]
        worker_events = [e for e in store.events(wf.id) if e.input_tokens]
        assert worker_events, "token usage from the CLI envelope is recorded"
        assert store.integrity_ok()
        # A step's time (what `status` shows) starts before its worktree is made, so a worker
        # step begins at least one worktree creation before the step_started event written once
        # the tree exists; unless its worktree was made ahead, while the step before it ran
        # (steps/prepare.py), which is the point of preparing it.
        prepared = {e.step for e in store.events(wf.id) if e.type == "prepared_run_used"}
        started = [e.timestamp for e in store.events(wf.id) if e.type == "step_started"]
        steps = store.steps(wf.id)
        assert len(steps) == len(started)
        gaps = {
            s["name"]: (t - s["started_at"]).total_seconds()
            for s, t in zip(steps, started, strict=True)
        }
    assert gaps["plan"] >= WORKTREE_DELAY, gaps
    assert "plan" not in prepared  # the first step has nothing before it to be prepared during
    if "implement" in prepared:
        assert gaps["implement"] < WORKTREE_DELAY, gaps  # its worktree was already there
    else:
        assert gaps["implement"] >= WORKTREE_DELAY, gaps
    assert leftovers(repo) == ([], [])


def test_a_failing_gate_feeds_its_output_back_and_the_retry_fixes_it(
    tmp_path: Path, serve: Any
) -> None:
    server = serve(
        planner(),
        implementer(BAD_CALC),
        implementer(GOOD_CALC, when="FEEDBACK FROM THE PREVIOUS ATTEMPT"),
        reviewer(),
    )
    repo = new_repo(tmp_path, server.url)

    wf = tasks.start_task(TASK, repo)

    assert wf.status == "completed"
    assert file_on_branch(repo, wf.task_branch, "calc.py") == GOOD_CALC
    retry_prompts = prompts(server, "FEEDBACK FROM THE PREVIOUS ATTEMPT")
    assert len(retry_prompts) == 1
    assert "test_multiply" in retry_prompts[0]
    assert "AssertionError" in retry_prompts[0]
    with tasks.reading(repo) as store:
        assert [e.status for e in store.events(wf.id) if e.type == "gate"] == ["failed", "passed"]


@pytest.mark.parametrize(
    "answer",
    [
        "Looks good to me, approved.",
        "REVIEW_STATUS: APPROVED\nEverything is fine.",
    ],
    ids=["no-json-block", "marker-string-in-prose"],
)
def test_a_review_without_a_valid_json_block_never_approves(
    tmp_path: Path, serve: Any, answer: str
) -> None:
    server = serve(planner(), implementer(GOOD_CALC), {**reviewer(answer), "repeat": True})
    repo = new_repo(tmp_path, server.url)
    write_workflow(
        repo,
        "workflow:\n  initial_step: plan\n  steps:\n"
        "    plan: {role: planner, next: implement}\n"
        "    implement: {role: implementer, next: test}\n"
        "    test: {gate: test, next: review, on_fail: implement}\n"
        "    review: {role: reviewer, next: commit, on_reject: implement, max_retries: 1}\n"
        "    commit: {action: commit}\n",
    )

    with pytest.raises(StepFailedError, match="review"):
        tasks.start_task(TASK, repo)

    ws = Workspace(repo)
    with tasks.reading(repo) as store:
        wf = store.workflows()[0]
        assert wf.status == "failed"
        reviews = [s for s in store.steps(wf.id) if s["name"] == "review"]
        # Never approved: each review was rejected (or, on a transient worker error, failed).
        assert reviews and not any(s["status"] == "succeeded" for s in reviews)
        assert any(s["status"] == "rejected" for s in reviews)
        assert any(e.type == "output_invalid" for e in store.events(wf.id))
    # Nothing reached the task branch: it still points at the base commit.
    assert ws.branch_tip(wf.task_branch) == wf.base_sha


def _approval_workflow(repo: Path) -> None:
    write_workflow(repo, PLAN_APPROVAL)


def test_an_approval_gate_stops_the_run_and_approve_then_resume_finishes_it(
    tmp_path: Path, serve: Any
) -> None:
    server = serve(planner(), implementer(GOOD_CALC), reviewer())
    repo = new_repo(tmp_path, server.url)
    _approval_workflow(repo)

    with pytest.raises(ApprovalRequired) as stopped:
        tasks.start_task(TASK, repo)
    assert "supervisor approve" in stopped.value.hint
    wf = tasks.workflows(repo)[0]
    assert wf.status == "awaiting_approval"
    assert prompts(server, "ROLE: implementer") == []

    with pytest.raises(ApprovalRequired):
        tasks.resume(wf.id, repo)  # no decision yet: still waiting

    tasks.decide(wf.id, repo, approve=True)
    done = tasks.resume(wf.id, repo)

    assert done.status == "completed"
    assert len(prompts(server, "ROLE: planner")) == 1  # the approved plan was not re-run
    assert file_on_branch(repo, done.task_branch, "calc.py") == GOOD_CALC


def test_a_rejection_reason_reaches_the_next_prompt_of_that_step(
    tmp_path: Path, serve: Any
) -> None:
    server = serve(
        planner(),
        planner(when="rejected the previous result"),
        implementer(GOOD_CALC),
        reviewer(),
    )
    repo = new_repo(tmp_path, server.url)
    _approval_workflow(repo)
    with pytest.raises(ApprovalRequired):
        tasks.start_task(TASK, repo)
    wf = tasks.workflows(repo)[0]

    tasks.decide(wf.id, repo, approve=False, reason="Split the work into two phases")
    with pytest.raises(ApprovalRequired):
        tasks.resume(wf.id, repo)  # the plan runs again and waits for a new decision

    second = prompts(server, "ROLE: planner")[-1]
    assert "Split the work into two phases" in second
    tasks.decide(wf.id, repo, approve=True)
    assert tasks.resume(wf.id, repo).status == "completed"


def test_a_supervisor_killed_during_implement_resumes_without_rerunning_any_step(
    tmp_path: Path, serve: Any
) -> None:
    release = tmp_path / "release"
    server = serve(
        planner(),
        implementer(GOOD_CALC, after=release),  # its answer waits: we kill meanwhile
        implementer(GOOD_CALC),
        reviewer(),
    )
    repo = new_repo(tmp_path, server.url)
    before = Workspace(repo).user_checkout_fingerprint()
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "supervisor", "start-task", TASK, "--yes", "--repo", str(repo)],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 120
        while not prompts(server, "ROLE: implementer"):
            assert proc.poll() is None, "the supervisor ended before implement started"
            assert time.monotonic() < deadline, "implement never started"
            time.sleep(0.2)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()

    wf = tasks.workflows(repo)[0]
    assert wf.current_step == "implement"
    with released_on_adoption(repo, release, wf.id):
        done = tasks.resume(wf.id, repo)

    assert done.status == "completed"
    assert file_on_branch(repo, done.task_branch, "calc.py") == GOOD_CALC
    assert len(prompts(server, "ROLE: planner")) == 1
    assert Workspace(repo).user_checkout_fingerprint() == before
    with tasks.reading(repo) as store:
        assert store.integrity_ok()
        statuses = [(s["name"], s["status"]) for s in store.steps(done.id)]
        # The proxy outlives the supervisor: the implementer's answer in flight at the kill is
        # relayed, its container adopted by the resume, and the answer bought once.
        assert [n for n, _ in statuses].count("implement") == 1
        assert ("implement", "succeeded") in statuses
        assert [n for n, _ in statuses].count("plan") == 1
    assert len(prompts(server, "ROLE: implementer")) == 1
    assert leftovers(repo) == ([], [])


def test_complete_task_merges_a_finished_task_into_its_base_branch(
    tmp_path: Path, serve: Any
) -> None:
    server = serve(planner(), implementer(GOOD_CALC), reviewer())
    repo = new_repo(tmp_path, server.url)
    wf = tasks.start_task(TASK, repo)
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "supervisor",
            "complete-task",
            str(wf.id),
            "--yes",
            "--repo",
            str(repo),
        ],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "1 commit\n" in result.stdout and "calc.py" in result.stdout  # the preview
    assert (repo / "calc.py").read_text() == GOOD_CALC  # main, checked out, fast-forwarded
    assert Workspace(repo).branch_exists(wf.task_branch)


def test_complete_task_refuses_an_unfinished_task_and_keeps_its_branch(
    tmp_path: Path, serve: Any
) -> None:
    server = serve(planner(), {**implementer(BAD_CALC), "repeat": True}, reviewer())
    repo = new_repo(tmp_path, server.url)
    write_workflow(
        repo,
        "workflow:\n  initial_step: implement\n  steps:\n"
        "    implement: {role: implementer, next: test, max_retries: 0}\n"
        "    test: {gate: test, next: commit, on_fail: implement}\n"
        "    commit: {action: commit}\n",
    )
    with pytest.raises(StepFailedError):
        tasks.start_task(TASK, repo)
    wf = tasks.workflows(repo)[0]
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "supervisor",
            "complete-task",
            str(wf.id),
            "--yes",
            "--repo",
            str(repo),
        ],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert result.returncode == 2
    assert "is failed, not completed" in " ".join(result.stderr.split())
    assert Workspace(repo).branch_exists(wf.task_branch)
