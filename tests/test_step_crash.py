"""Any exception inside a step ends the step as failed and the workflow as failed and resumable,
with the error recorded as an event: never `running` with no supervisor to run it (the real
engine, git and SQLite; workers scripted by the stand-in sandbox). The same through the real CLI
and sandbox, for a worker's answer nested too deep, is in tests/test_attacks_text.py."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
import test_engine_fast
from test_engine_fast import Project, reviews, writes

from supervisor.core.errors import GitError, StepFailedError

if TYPE_CHECKING:
    from collections.abc import Callable

    from supervisor.sandbox.standin import WorkerCall

project = test_engine_fast.project  # the stand-in project fixture
warm_packer = test_engine_fast.warm_packer

IMPLEMENT_REVIEW_COMMIT = """implement
  steps:
    implement: {role: implementer, next: review}
    review: {role: reviewer, next: commit, on_reject: implement}
    commit: {action: commit}
"""


def raises(error: Exception) -> Callable[[WorkerCall], str]:
    def do(call: WorkerCall) -> str:
        raise error

    return do


def test_an_unexpected_exception_in_a_step_fails_it_resumably_with_the_error_recorded(
    project: Callable[..., Project],
) -> None:
    p = project(
        IMPLEMENT_REVIEW_COMMIT,
        None,
        ("ROLE: implementer", raises(RecursionError("maximum recursion depth exceeded"))),
    )
    with pytest.raises(StepFailedError, match="unexpected RecursionError: maximum recursion"):
        p.start()

    wf = p.workflow()
    assert (wf.status, wf.current_step) == ("failed", "implement")
    assert "unexpected RecursionError" in wf.error
    assert [(s["name"], s["status"]) for s in p.steps()] == [("implement", "failed")]
    [crashed] = p.events("step_crashed")
    assert crashed.payload["kind"] == "StepFailedError"
    assert "RecursionError" in crashed.payload["traceback"]
    assert p.events("workflow_failed")[-1].step == "implement"

    p.script.add("ROLE: implementer", writes({"answer.txt": "right\n"}))
    p.script.add("ROLE: reviewer", reviews("APPROVED"))
    assert p.resume().status == "completed"
    assert p.on_branch("answer.txt") == "right\n"


def test_a_typed_error_in_a_step_keeps_its_message_and_hint(
    project: Callable[..., Project],
) -> None:
    p = project(
        IMPLEMENT_REVIEW_COMMIT,
        None,
        ("ROLE: implementer", raises(GitError("The object store is corrupt.", "Run git fsck."))),
    )
    with pytest.raises(GitError, match="The object store is corrupt"):
        p.start()
    wf = p.workflow()
    assert (wf.status, wf.current_step, wf.error) == (
        "failed",
        "implement",
        "The object store is corrupt.",
    )
    [crashed] = p.events("step_crashed")
    assert (crashed.payload["error"], crashed.payload["hint"]) == (
        "The object store is corrupt.",
        "Run git fsck.",
    )
    assert [s["status"] for s in p.steps()] == ["failed"]
