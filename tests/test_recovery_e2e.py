"""Recovery on real parts: parallel reviewers, loop detection, the persisted breaker, doctor and
metrics, with the real CLIs in the real sandbox against the scripted APIs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from typing import TYPE_CHECKING, Any

import pytest
from e2e_support import (
    BAD_CALC,
    GOOD_CALC,
    implementer,
    new_repo,
    require_sandbox,
    reviewer,
    write_workflow,
)

from supervisor.core.errors import StepFailedError
from supervisor.fakeapi import ScriptedModelServer
from supervisor.lifecycle import tasks
from supervisor.lifecycle.demo import fenced

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.docker
TASK = "Implement add and multiply"


@pytest.fixture(autouse=True)
def real_parts(api_keys: None) -> None:
    require_sandbox()


def repo_for(tmp_path: Path, server: ScriptedModelServer, extra: str = "") -> Path:
    return new_repo(
        tmp_path,
        server.url,
        f"  codex: {{base_url: '{server.url}/v1'}}\n  gemini: {{base_url: '{server.url}'}}\n"
        + extra,
    )


def add_reviewer_role(repo: Path, name: str, cli: str) -> None:
    path = repo / ".supervisor" / "roles" / f"{name}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"extends: reviewer\ncli: {cli}\ndescription: {cli} reviewer ({name})\n")


def changes_requested(issue: str) -> str:
    return fenced(
        {
            "status": "CHANGES_REQUESTED",
            "summary": "needs work",
            "issues": [{"severity": "major", "description": issue, "file": "calc.py"}],
        }
    )


def test_parallel_reviewers_must_all_approve_and_their_issues_are_merged(
    tmp_path: Path, serve: Any
) -> None:
    server = serve(
        implementer(GOOD_CALC),
        reviewer(changes_requested("Add docstrings"), when="codex reviewer (reviewer_codex)"),
        reviewer(when="gemini reviewer (reviewer_gemini)"),
        implementer(
            GOOD_CALC.replace("def add", "# documented\ndef add"),
            when="FEEDBACK FROM THE PREVIOUS ATTEMPT",
        ),
        reviewer(when="codex reviewer (reviewer_codex)"),
        reviewer(when="gemini reviewer (reviewer_gemini)"),
    )
    repo = repo_for(tmp_path, server)
    add_reviewer_role(repo, "reviewer_codex", "codex")
    add_reviewer_role(repo, "reviewer_gemini", "gemini")
    write_workflow(
        repo,
        "workflow:\n  initial_step: implement\n  steps:\n"
        "    implement: {role: implementer, next: test}\n"
        "    test: {gate: test, next: review, on_fail: implement}\n"
        "    review: {roles: [reviewer_codex, reviewer_gemini], next: commit,"
        " on_reject: implement}\n"
        "    commit: {action: commit}\n",
    )
    wf = tasks.start_task(TASK, repo)
    assert wf.status == "completed"
    with tasks.reading(repo) as store:
        reviews = [s for s in store.steps(wf.id) if s["name"] == "review"]
        verdicts = [e for e in store.events(wf.id) if e.type == "review"]
        rows = store.invocations()
    assert sorted(s["role"] for s in reviews) == sorted(["reviewer_codex", "reviewer_gemini"] * 2)
    assert [e.status for e in verdicts].count("CHANGES_REQUESTED") == 1
    feedback = [p for p in _prompts(server) if "FEEDBACK FROM THE PREVIOUS ATTEMPT" in p]
    assert "Reviewer reviewer_codex" in feedback[0] and "Add docstrings" in feedback[0]
    assert {r["cli"] for r in rows if r["role"].startswith("reviewer_")} == {"codex", "gemini"}
    # The two reviewers of one round ran at the same time.
    first_round = sorted(reviews, key=lambda s: s["started_at"])[:2]
    assert first_round[1]["started_at"] < first_round[0]["finished_at"]


def test_a_retry_that_reproduces_an_earlier_attempt_stops_as_a_loop(
    tmp_path: Path, serve: Any
) -> None:
    other_bug = BAD_CALC.replace("a + b\n\n\ndef multiply", "a - b\n\n\ndef multiply")
    server = serve(
        implementer(BAD_CALC),
        implementer(other_bug, when="FEEDBACK FROM THE PREVIOUS ATTEMPT"),
        implementer(BAD_CALC, when="FEEDBACK FROM THE PREVIOUS ATTEMPT"),
        reviewer(),
    )
    repo = repo_for(tmp_path, server)
    write_workflow(
        repo,
        "workflow:\n  initial_step: implement\n  steps:\n"
        "    implement: {role: implementer, next: test, max_retries: 5}\n"
        "    test: {gate: test, next: commit, on_fail: implement}\n"
        "    commit: {action: commit}\n",
    )
    with pytest.raises(StepFailedError, match="exactly the same content as its attempt 1"):
        tasks.start_task(TASK, repo)
    with tasks.reading(repo) as store:
        wf = store.workflows()[0]
        assert wf.status == "failed"
        events = store.events(wf.id)
        assert [e.type for e in events].count("loop_detected") == 1
        # Three attempts (each a fix on the last), not six; a retry after a dropped connection
        # is not an attempt of its own.
        dropped = [e for e in events if e.type == "retry_scheduled" and e.status == "retry_same"]
        assert store.count_steps(wf.id, "implement") - len(dropped) == 3


def test_the_circuit_breaker_opens_and_keeps_its_count_in_the_state_database(
    tmp_path: Path, serve: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = serve({"repeat": True, "turns": [{"text": "no json here"}]})
    repo = repo_for(tmp_path, server)
    write_workflow(
        repo,
        "workflow:\n  initial_step: implement\n  steps:\n"
        "    implement: {role: implementer, next: commit, max_retries: 20}\n"
        "    commit: {action: commit}\n",
    )
    import supervisor.policy.recovery as recovery

    real = recovery.load_policies
    monkeypatch.setattr(recovery, "load_policies", lambda: (real()[0], 3))
    with pytest.raises(StepFailedError, match="Circuit breaker open for step 'implement'"):
        tasks.start_task(TASK, repo)
    with tasks.reading(repo) as store:
        wf = store.workflows()[0]
        assert wf.context["breaker"]["implement"] == 3  # in the database, not in memory
        assert store.count_steps(wf.id, "implement") == 3


def test_doctor_fails_when_a_cli_the_workflow_needs_has_no_credentials(
    tmp_path: Path, serve: Any
) -> None:
    server = serve()
    repo = repo_for(tmp_path, server)
    add_reviewer_role(repo, "reviewer", "gemini")  # the workflow's reviewer now runs on gemini
    env = {
        **os.environ,
        "GEMINI_API_KEY": "",
        "GOOGLE_API_KEY": "",
        "HOME": str(tmp_path),
        "COLUMNS": "200",
    }
    result = subprocess.run(
        [sys.executable, "-m", "supervisor", "doctor", "--repo", str(repo)],
        env=env,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert result.returncode != 0
    assert "gemini credentials" in result.stdout and "GEMINI_API_KEY" in result.stdout
    assert "claude CLI (in the image)" in result.stdout
    assert "missing: gemini credentials" in " ".join(result.stderr.split())


def test_metrics_report_each_invocation_by_role_and_cli(tmp_path: Path, serve: Any) -> None:
    server = serve(implementer(BAD_CALC), implementer(GOOD_CALC, when="FEEDBACK"), reviewer())
    repo = repo_for(tmp_path, server)
    write_workflow(
        repo,
        "workflow:\n  initial_step: implement\n  steps:\n"
        "    implement: {role: implementer, next: test}\n"
        "    test: {gate: test, next: review, on_fail: implement}\n"
        "    review: {role: reviewer, next: commit}\n"
        "    commit: {action: commit}\n",
    )
    wf = tasks.start_task(TASK, repo, cli="codex")
    with tasks.reading(repo) as store:
        started = Counter(e.step for e in store.events(wf.id) if e.type == "step_started")
    # Two scripted implementer runs, plus one more for each connection the network dropped.
    implement_runs = started["implement"]
    assert implement_runs >= 2
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "supervisor",
            "metrics",
            "--last",
            "1d",
            "--json",
            "--repo",
            str(repo),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    data = json.loads(result.stdout)
    roles = {r["role"]: r for r in data["by_role"]}
    assert roles["implementer"]["runs"] == implement_runs
    assert roles["reviewer"]["runs"] == started["review"] >= 1
    assert roles["implementer"]["avg_retries"] == (implement_runs - 1) / 2  # run k: k-1 retries
    assert data["cli_by_task_type"]["codex"]["implementation"]["runs"] == implement_runs


def _prompts(server: ScriptedModelServer) -> list[str]:
    from supervisor.fakeapi import anthropic, gemini, openai

    found = []
    for request in server.requests:
        vendor = next(
            (v for v in (anthropic, openai, gemini) if v.handles(request.path.split("?")[0])), None
        )
        if vendor is not None and vendor.turn_index(request.body) == 0:
            found.append(vendor.request_text(request.body))
    return found
