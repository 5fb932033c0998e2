"""What a person reads while a task runs and after it stops, said once and in the right order: the
outcome of a step only after its answer was validated (no `result: ok` just before the step fails
for "answer holds no JSON block"), the approval policy's risk block once at a stop, and an
approval given shown as such (`approved (run supervisor resume 1)`) until a resume acts on it.

The real engine, real SQLite and git, the real claude adapter's parsing and the real `supervisor`
command line in-process; workers scripted by the stand-in sandbox (tests/test_engine_fast.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
import test_engine_fast
from cli_support import supervisor
from test_engine_fast import Project, reviews, writes

from supervisor.core.errors import ApprovalRequired
from supervisor.sandbox.standin import envelope
from supervisor.state.status_label import shown_status
from supervisor.workers.claude import ClaudeAdapter
from supervisor.workflow.engine import Reporter

if TYPE_CHECKING:
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


class Transcript(Reporter):
    """Every line a person would see, in order."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def step(self, wf_id: int, name: str, detail: str) -> None:
        self.lines.append(f"▶ {name}: {detail}")

    def output(self, text: str) -> None:
        self.lines.extend(text.splitlines())

    def info(self, text: str) -> None:
        self.lines.append(text)


def auth_change(project: Callable[..., Project]) -> Project:
    return project(
        IMPLEMENT_REVIEW_COMMIT,
        None,
        ("ROLE: implementer", writes({"auth/login.py": "def login(user):\n    return False\n"})),
        ("ROLE: reviewer", reviews("APPROVED")),
    )


def test_the_cli_says_nothing_of_its_own_result_line() -> None:
    """The CLI's "result" event says the CLI finished, not that its answer holds."""
    last = envelope("no json here").splitlines()[-1]
    assert ClaudeAdapter().progress(last) is None


def test_a_step_whose_answer_holds_no_json_says_so_and_never_ok_before(
    project: Callable[..., Project],
) -> None:
    p = project(
        IMPLEMENT_REVIEW_COMMIT,
        None,
        ("ROLE: implementer", lambda call: envelope("I did it, trust me.")),
        ("FEEDBACK", writes({"answer.txt": "right\n"})),
        ("ROLE: reviewer", reviews("APPROVED")),
    )
    seen = Transcript()
    assert p.start(reporter=seen).status == "completed"
    refused = next(i for i, line in enumerate(seen.lines) if line.startswith("answer not usable"))
    assert "JSON" in seen.lines[refused]
    assert not any(line.startswith("result:") for line in seen.lines), seen.lines
    assert not any(line.startswith("answer valid") for line in seen.lines[:refused])
    assert "answer valid: SUCCESS" in seen.lines[refused:]  # the retry's, after validation


def test_the_risk_block_is_shown_once_when_the_run_stops_for_it(
    project: Callable[..., Project],
) -> None:
    """The stop's message (start-task, resume) shows the risk with what waits; the run itself
    shows it only when it goes on (auto-approved), so a person reads it once either way."""
    p = auth_change(project)
    seen = Transcript()
    with pytest.raises(ApprovalRequired):
        p.start(reporter=seen)
    assert not any(line.startswith("risk:") for line in seen.lines), seen.lines
    shown = supervisor("status", "1", "--repo", str(p.root))
    assert shown.stdout.count("risk: high") == 1


def test_an_auto_approved_candidate_shows_its_risk_level_while_it_runs(
    project: Callable[..., Project],
) -> None:
    p = project(
        IMPLEMENT_REVIEW_COMMIT,
        None,
        ("ROLE: implementer", writes({"answer.txt": "right\n"})),
        ("ROLE: reviewer", reviews("APPROVED")),
    )
    seen = Transcript()
    assert p.start(reporter=seen).status == "completed"
    assert [line for line in seen.lines if line.startswith("risk:")] == [
        "risk: low (approved automatically)"
    ]


def test_approving_twice_says_it_is_approved_and_to_resume(
    project: Callable[..., Project],
) -> None:
    p = auth_change(project)
    with pytest.raises(ApprovalRequired):
        p.start()
    repo = ["--repo", str(p.root)]
    first = supervisor("approve", "1", "--as", "lead@example.com", *repo)
    assert first.returncode == 0, first.stderr

    again = supervisor("approve", "1", "--as", "lead@example.com", *repo)
    assert again.returncode == 0, again.stderr
    assert "Workflow 1 is already approved (step 'review')" in again.stdout
    assert "Continue it with `supervisor resume 1`" in again.stdout
    assert "not waiting for approval" not in again.stdout + again.stderr
    assert len(p.events("approval_decided")) == 1  # nothing decided twice

    rejected = supervisor("reject", "1", "--reason", "on second thoughts", *repo)
    assert rejected.returncode == 2
    assert "already approved" in rejected.stderr and "supervisor resume 1" in rejected.stderr

    # The state says so: `status` (list and detail) and the TUI's label (status_label).
    label = "approved (run supervisor resume 1)"
    assert shown_status(p.workflow()) == label
    assert label in supervisor("status", *repo).stdout
    assert label in supervisor("status", "1", *repo).stdout

    assert p.resume().status == "completed"
    assert shown_status(p.workflow()) == "completed"
    assert "decision" not in p.workflow().context  # a resume acted on it


def test_a_rejection_shows_until_the_resume_runs_the_step_again(
    project: Callable[..., Project],
) -> None:
    p = auth_change(project)
    with pytest.raises(ApprovalRequired):
        p.start()
    repo = ["--repo", str(p.root)]
    assert supervisor("reject", "1", "--reason", "not like this", *repo).returncode == 0
    assert "rejected (run supervisor resume 1" in supervisor("status", *repo).stdout
    again = supervisor("approve", "1", *repo)
    assert again.returncode == 2
    assert "already rejected" in again.stderr and "supervisor resume 1" in again.stderr


def test_ctrl_c_during_a_run_says_which_workflow_and_how_to_resume_it(
    project: Callable[..., Project],
) -> None:
    """The interrupt arrives while the worker runs (as Ctrl-C does); the finished steps stay."""

    def interrupted(call: object) -> str:
        raise KeyboardInterrupt

    p = project(
        IMPLEMENT_REVIEW_COMMIT,
        None,
        ("ROLE: implementer", writes({"answer.txt": "right\n"})),
        ("ROLE: reviewer", interrupted),
        ("ROLE: reviewer", reviews("APPROVED")),
    )
    stopped = supervisor("start-task", "Write the answer file", "--yes", "--repo", str(p.root))
    assert stopped.returncode == 130
    assert "Interrupted. Workflow 1 keeps the steps it finished" in stopped.stderr
    assert "continue it with: supervisor resume 1" in stopped.stderr
    assert "Traceback" not in stopped.stderr and "Aborted!" not in stopped.stderr

    resumed = supervisor("resume", "1", "--repo", str(p.root))
    assert resumed.returncode == 0, resumed.stderr
    assert p.workflow().status == "completed"
    assert [c.role for _, c in p.script.calls] == ["implementer", "reviewer", "reviewer"]


def test_complete_task_asks_in_the_words_of_its_preview(
    project: Callable[..., Project],
) -> None:
    """The preview says "Squash ai/1-... into main": the question and the fix say squash too,
    not "Merge?"."""
    p = project(
        IMPLEMENT_REVIEW_COMMIT,
        None,
        ("ROLE: implementer", writes({"answer.txt": "right\n"})),
        ("ROLE: reviewer", reviews("APPROVED")),
    )
    assert p.start().status == "completed"
    asked = supervisor("complete-task", "1", "--repo", str(p.root))  # no terminal to confirm
    assert asked.stdout.startswith("Squash ai/1-")
    assert "Pass --yes to squash without confirming" in asked.stderr
    assert "merge" not in (asked.stdout.splitlines()[0] + asked.stderr).lower()


def test_ctrl_c_names_the_task_this_process_created_without_opening_the_state(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A submission's Ctrl-C handler names its task from this process's own record
    (supervisor/lifecycle/starting.py `CREATED`): with a shared PostgreSQL state, asking the
    database which task is newest opened it, and checked its schema, once more per submission (and
    here there is no repository, nor database, to ask)."""
    from supervisor.cli.interrupt import INTERRUPTED, resumable
    from supervisor.lifecycle import starting

    nowhere = tmp_path / "no-repository"
    with pytest.raises(SystemExit) as ended, resumable(nowhere):
        raise KeyboardInterrupt
    assert ended.value.code == INTERRUPTED
    assert "Interrupted before the task was created" in capsys.readouterr().err

    with pytest.raises(SystemExit) as ended, resumable(nowhere):
        starting.CREATED.append(41)
        raise KeyboardInterrupt
    said = " ".join(capsys.readouterr().err.split())
    assert ended.value.code == INTERRUPTED and "supervisor resume 41" in said, said
