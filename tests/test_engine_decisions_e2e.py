"""The engine's decisions on real parts (the real `claude` in the real sandbox, real git, real
SQLite): what reaches the task branch, what a gate failure is blamed on, when an empty change is
an answer, when a repeated answer is a loop, and how a task is cleared away."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from typing import TYPE_CHECKING, Any

import pytest
from e2e_support import (
    BAD_CALC,
    GOOD_CALC,
    implementer,
    new_repo,
    opening_prompts,
    planner,
    require_sandbox,
    reviewer,
    write_workflow,
)

from supervisor.core.errors import ApprovalRequired, ConfigError, StepFailedError, WorkflowBusyError
from supervisor.lifecycle import abandon, tasks
from supervisor.lifecycle.demo import PLAN, fenced
from supervisor.state.locks import task_lock
from supervisor.workspace.worktrees import Workspace

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.docker
TASK = "Fix multiply in calc.py"
SHORT = (
    "workflow:\n  initial_step: implement\n  steps:\n"
    "    implement: {role: implementer, next: test, max_retries: 3}\n"
    "    test: {gate: test, next: commit, on_fail: implement}\n"
    "    commit: {action: commit}\n"
)


@pytest.fixture(autouse=True)
def real_parts(api_keys: None) -> None:
    require_sandbox()


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=True
    ).stdout


def cli(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "supervisor", *args, "--repo", str(repo)],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        env={**os.environ, "COLUMNS": "200"},
        check=False,
    )


def answers(when: str, summary: str, claimed: list[str]) -> dict[str, Any]:
    """A worker that writes nothing and reports `claimed` as modified."""
    report = {"status": "SUCCESS", "summary": summary, "files_modified": claimed}
    return {"when": when, "turns": [{"text": "Done.\n" + fenced(report)}]}


def prompts_with(server: Any, marker: str) -> int:
    return len(opening_prompts(server, marker))


def set_gate(repo: Path, command: str) -> None:
    """The project's test gate, as a user would edit it (replacing an earlier setting)."""
    config = repo / ".supervisor" / "config.yaml"
    text = re.sub(r"gates:\n  test: .*\n", "", config.read_text())
    config.write_text(text + f'gates:\n  test: "{command}"\n')


# -- item: the branch holds only what passed ---------------------------------------------------


def test_the_task_branch_holds_one_commit_of_a_gated_tree_and_failed_attempts_stay_in_refs(
    tmp_path: Path, serve: Any
) -> None:
    server = serve(
        planner("Plan:\n" + fenced(PLAN)),
        implementer(BAD_CALC),
        implementer(GOOD_CALC, when="FEEDBACK FROM THE PREVIOUS ATTEMPT"),
        {**reviewer(), "repeat": True},
    )
    repo = new_repo(tmp_path, server.url)
    write_workflow(
        repo,
        "workflow:\n  initial_step: plan\n  steps:\n"
        "    plan: {role: planner, next: implement, human_approval: true}\n"
        "    implement: {role: implementer, for_each: component, next: test}\n"
        "    test: {gate: test, next: review, on_fail: implement}\n"
        "    review: {role: reviewer, next: commit, on_reject: implement}\n"
        "    commit: {action: commit}\n",
    )
    with pytest.raises(ApprovalRequired):
        tasks.start_task(TASK, repo)
    shown = cli(repo, "status", "1")
    assert "plan (awaiting approval)" in shown.stdout  # the step that waits, not the next one
    tasks.decide(1, repo, approve=True)
    wf = tasks.resume(1, repo)
    assert wf.status == "completed"

    reachable = git(repo, "rev-list", f"{wf.base_sha}..{wf.task_branch}").split()
    assert len(reachable) == 1
    trees = {git(repo, "rev-parse", f"{c}^{{tree}}").strip() for c in reachable}
    with tasks.reading(repo) as store:
        events = store.events(wf.id)
        steps = [(s["name"], s["attempt"]) for s in store.steps(wf.id) if s["role"]]
    gate_trees = {
        e.status: git(repo, "rev-parse", f"{e.payload['commit']}^{{tree}}").strip()
        for e in events
        if e.type == "gate"
    }
    assert gate_trees["failed"] not in trees  # no reachable commit failed a gate
    assert trees == {gate_trees["passed"]}
    message = git(repo, "log", "-1", "--format=%B", wf.task_branch)
    assert "- calc: add and multiply" in message
    assert "Gates passed: test" in message and "Reviewed by: reviewer" in message
    # The failed attempt is kept for audit, outside the branch.
    attempts = git(repo, "for-each-ref", "--format=%(objectname)", "refs/supervisor/wf1/attempts/")
    attempt_trees = {git(repo, "rev-parse", f"{c}^{{tree}}").strip() for c in attempts.split()}
    assert gate_trees["failed"] in attempt_trees
    # The fix-up is the component's second attempt, under the component's name.
    assert ("implement/calc", 1) in steps and ("implement/calc", 2) in steps
    assert not any(name == "implement" for name, _ in steps)

    # complete-task squashes a single-component task by default: one commit on main.
    main_before = git(repo, "rev-parse", "main").strip()
    done = cli(repo, "complete-task", "1", "--yes")
    assert done.returncode == 0, done.stderr
    assert "Squash" in done.stdout
    assert git(repo, "rev-list", "--parents", "-1", "main").split()[1:] == [main_before]
    assert (repo / "calc.py").read_text() == GOOD_CALC


# -- item: a gate failure the worker cannot fix ------------------------------------------------


def test_a_missing_gate_command_is_a_configuration_error_and_resume_reruns_the_gate_first(
    tmp_path: Path, serve: Any
) -> None:
    server = serve(implementer(GOOD_CALC))
    repo = new_repo(tmp_path, server.url)
    write_workflow(repo, SHORT)
    set_gate(repo, "make no-such-target")

    with pytest.raises(ConfigError, match="configuration problem") as info:
        tasks.start_task(TASK, repo)
    assert "No rule to make target" in info.value.message
    assert "gates.test" in info.value.hint
    assert prompts_with(server, "FEEDBACK FROM THE PREVIOUS ATTEMPT") == 0  # never the worker's

    set_gate(repo, "python3 -m unittest -v")  # the user fixes the configuration
    wf = tasks.resume(1, repo)
    assert wf.status == "completed"
    assert prompts_with(server, "ROLE: implementer") == 1  # the gate ran again, not the worker
    assert git(repo, "show", f"{wf.task_branch}:calc.py") == GOOD_CALC


def test_a_gate_failing_again_on_the_unchanged_candidate_is_reported_as_a_gate_problem(
    tmp_path: Path, serve: Any
) -> None:
    server = serve(
        implementer(GOOD_CALC),
        answers("FEEDBACK FROM THE PREVIOUS ATTEMPT", "calc.py is already right", ["calc.py"]),
    )
    repo = new_repo(tmp_path, server.url)
    write_workflow(repo, SHORT)
    # The tests pass, but the gate also needs a file the project does not have.
    set_gate(repo, "python3 -m unittest -v && cat coverage.cfg")

    with pytest.raises(StepFailedError, match="fails again on the unchanged candidate") as info:
        tasks.start_task(TASK, repo)
    assert "coverage.cfg" in info.value.message  # the gate's own output
    assert "changed no files" not in info.value.message
    assert "re-runs the gate" in info.value.hint

    set_gate(repo, "python3 -m unittest -v")
    wf = tasks.resume(1, repo)
    assert wf.status == "completed"
    assert prompts_with(server, "ROLE: implementer") == 2
    assert git(repo, "show", f"{wf.task_branch}:calc.py") == GOOD_CALC


# -- item: an empty change, honest or not -------------------------------------------------------


@pytest.mark.parametrize(
    ("claimed", "completes"), [([], True), (["test_more.py"], False)], ids=["honest", "claimed"]
)
def test_a_test_engineer_may_change_nothing_but_not_claim_a_change_it_did_not_make(
    tmp_path: Path, serve: Any, claimed: list[str], completes: bool
) -> None:
    server = serve(
        implementer(GOOD_CALC),
        {**answers("ROLE: test_engineer", "the tests are sufficient", claimed), "repeat": True},
    )
    repo = new_repo(tmp_path, server.url)
    write_workflow(
        repo,
        "workflow:\n  initial_step: implement\n  steps:\n"
        "    implement: {role: implementer, next: test}\n"
        "    test: {gate: test, next: tests_review, on_fail: implement}\n"
        "    tests_review: {role: test_engineer, next: tests_test, max_retries: 0}\n"
        "    tests_test: {gate: test, next: commit, on_fail: implement}\n"
        "    commit: {action: commit}\n",
    )
    if completes:
        wf = tasks.start_task(TASK, repo)
        assert wf.status == "completed"
        assert git(repo, "show", f"{wf.task_branch}:calc.py") == GOOD_CALC
    else:
        with pytest.raises(StepFailedError, match=r"claimed to have written test_more\.py"):
            tasks.start_task(TASK, repo)
    with tasks.reading(repo) as store:
        wf = store.workflows()[0]
        recorded = [e.status for e in store.events(wf.id) if e.step == "tests_review"]
    assert ("unchanged" in recorded) is completes


# -- item: a repeated empty answer is a loop; abandon clears the task away ---------------------


def test_the_same_empty_answer_twice_stops_as_a_loop_and_abandon_removes_the_task(
    tmp_path: Path, serve: Any
) -> None:
    server = serve({**answers("ROLE: implementer", "done", ["calc.py"]), "repeat": True})
    repo = new_repo(tmp_path, server.url)
    write_workflow(repo, SHORT.replace("max_retries: 3", "max_retries: 5"))

    with pytest.raises(StepFailedError, match="same answer as its attempt 1"):
        tasks.start_task(TASK, repo)
    with tasks.reading(repo) as store:
        wf = store.workflows()[0]
        assert store.count_steps(wf.id, "implement") == 2  # not six
    ws = Workspace(repo)
    assert ws.branch_exists(wf.task_branch)

    with task_lock(repo / ".supervisor", wf.id), pytest.raises(WorkflowBusyError):
        abandon.abandon(wf.id, repo)  # refused while a supervisor runs the task
    refused = cli(repo, "abandon", str(wf.id))  # no terminal, no --yes: preview only
    assert refused.returncode != 0
    assert wf.task_branch in refused.stdout
    assert ws.branch_exists(wf.task_branch)
    done = cli(repo, "abandon", str(wf.id), "--yes")
    assert done.returncode == 0, done.stderr
    assert not ws.branch_exists(wf.task_branch)
    assert git(repo, "for-each-ref", f"refs/supervisor/wf{wf.id}/") == ""
    assert tasks.workflows(repo)[0].status == "abandoned"
