"""The engine's decisions after a step, as a pure function (supervisor/workflow/decide.py): each
outcome leads to exactly one move, and nothing is written, slept or raised while deciding. The
engine's side (committing the move, then waiting or raising) is specified on the stand-in sandbox
in tests/test_engine_fast.py and the failover specs."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from supervisor.core.config import FailoverSettings, StepDef, WorkflowDef
from supervisor.core.errors import CredentialsError, StepFailedError
from supervisor.policy.recovery import Action, Category, Classification
from supervisor.state.records import Workflow
from supervisor.state.store import EventSpec, StepRecord
from supervisor.workflow.decide import Facts, Move, decide
from supervisor.workflow.steps.base import Outcome

NOW = 1_000_000.0

FLOW = WorkflowDef(
    initial_step="implement",
    steps={
        "implement": StepDef(role="implementer", next="test", max_retries=2),
        "test": StepDef(gate="test", next="commit", on_fail="implement"),
        "review": StepDef(role="reviewer", next="commit", on_reject="implement"),
        "commit": StepDef(action="commit"),
    },
)


def workflow(context: dict[str, Any] | None = None) -> Workflow:
    stamp = datetime.now(UTC)
    return Workflow(
        1, "t", "running", "implement", "claude", "main", "a" * 40, "ai/1-t",
        FLOW.model_dump(), context or {}, None, stamp, stamp,
    )  # fmt: skip


def facts(
    clis: list[str] | None = None,
    stops: bool = False,
    threshold: int = 6,
    seen: list[list[EventSpec]] | None = None,
) -> Facts:
    def judge(judged: dict[str, Any], own: list[EventSpec]) -> tuple[bool, EventSpec]:
        if seen is not None:
            seen.append(own)
        judged["risk"] = {"level": "high" if stops else "low"}
        return stops, EventSpec("risk_assessed", status="high" if stops else "low")

    return Facts(NOW, threshold, 3, "default", FailoverSettings(), clis or [], judge)


def moved(name: str, outcome: Outcome, context: dict[str, Any] | None = None, **kw: Any) -> Move:
    return decide(workflow(context), FLOW, name, FLOW.steps[name], outcome, facts(**kw))


def types(move: Move) -> list[str]:
    return [e.type for e in move.events]


def test_a_passed_step_advances_and_forgets_its_failures() -> None:
    move = moved("implement", Outcome("passed"), {"breaker": {"implement": 2}})
    assert (move.next_step, move.status, move.error) == ("test", "running", None)
    assert move.state.breaker == {}
    assert not move.wait and move.sleep_s == 0


def test_the_last_step_passing_completes_the_workflow() -> None:
    move = moved("commit", Outcome("passed", git_sha="b" * 40))
    assert (move.next_step, move.status, move.git_sha) == (None, "completed", "b" * 40)
    assert types(move)[-1] == "workflow_completed"


def test_a_change_the_approval_policy_stops_waits_for_a_person_before_the_commit() -> None:
    move = moved("test", Outcome("passed"), stops=True)
    assert move.status == "awaiting_approval" and move.request_approval
    assert move.next_step == "commit" and move.state.approval_step == "test"
    assert types(move) == ["risk_assessed", "approval_requested"]


def test_the_policy_judges_with_the_step_own_outcome_which_no_store_read_sees_yet() -> None:
    review = EventSpec("review", step="review", role="reviewer", status="APPROVED")
    finished = StepRecord(7, "succeeded", event=review)
    extra = EventSpec("cli_routed", step="review")
    seen: list[list[EventSpec]] = []
    outcome = Outcome("passed", events=[extra], records=[finished])
    decide(workflow(), FLOW, "review", FLOW.steps["review"], outcome, facts(seen=seen))
    assert seen == [[review, extra]]


def test_a_change_the_policy_lets_through_is_committed_without_asking() -> None:
    move = moved("test", Outcome("passed"))
    assert move.status == "running" and not move.request_approval
    assert types(move) == ["risk_assessed"]


def test_a_failed_gate_sends_the_work_back_with_its_feedback() -> None:
    move = moved("test", Outcome("failed", feedback="2 tests failed"))
    assert (move.next_step, move.checkpoint_status) == ("implement", "failed")
    assert move.state.feedback["implement"] == ["2 tests failed"]
    retry = move.events[-1]
    assert retry.type == "retry" and retry.payload == {
        "from_step": "test",
        "attempt": 2,
        "limit": 3,
    }


def test_spent_feedback_retries_fail_the_task_and_resume_starts_at_the_gate() -> None:
    context = {"attempts": {"implement": 2}}
    move = moved("test", Outcome("failed", feedback="still failing"), context)
    assert move.status == "failed" and isinstance(move.error, StepFailedError)
    assert move.next_step == "test"  # a resume re-checks the gate first
    assert "failed 3 times" in move.error.message
    assert types(move)[-1] == "workflow_failed"


def test_the_breaker_opens_after_its_threshold_of_consecutive_failures() -> None:
    move = moved("test", Outcome("failed", feedback="x"), {"breaker": {"test": 1}}, threshold=2)
    assert move.status == "failed" and "Circuit breaker open" in str(move.error)


def test_a_network_error_runs_the_same_step_again_after_a_backoff() -> None:
    why = Classification(Category.NETWORK, Action.RETRY_SAME, "connection reset")
    move = moved("implement", Outcome("failed", transient=why))
    assert (move.next_step, move.status, move.checkpoint_status) == (
        "implement",
        "running",
        "network",
    )
    assert move.sleep_s > 0 and not move.wait
    assert types(move) == ["retry_scheduled"]


def test_a_short_rate_limit_is_waited_out_on_the_same_cli() -> None:
    why = Classification(Category.RESOURCE, Action.WAIT, "429", wait_seconds=120)
    move = moved("implement", Outcome("failed", transient=why, cli="claude"), clis=["claude"])
    assert move.status == "rate_limited" and move.wait
    assert move.state.waiting_until == pytest.approx(NOW + 120, abs=15)


def test_a_long_rate_limit_moves_the_step_to_the_roles_next_cli() -> None:
    why = Classification(Category.RESOURCE, Action.WAIT, "429", wait_seconds=7200)
    outcome = Outcome("failed", transient=why, cli="claude")
    move = moved("implement", outcome, clis=["claude", "codex"])
    assert (move.next_step, move.status, move.checkpoint_status) == (
        "implement",
        "running",
        "failover",
    )
    assert move.state.unavailable["claude"].until == NOW + 7200
    assert types(move) == ["failover"] and move.events[0].payload["to"] == "codex"


def test_a_long_rate_limit_with_no_fallback_is_a_wait() -> None:
    why = Classification(Category.RESOURCE, Action.WAIT, "429", wait_seconds=7200)
    move = moved("implement", Outcome("failed", transient=why, cli="claude"), clis=["claude"])
    assert move.status == "rate_limited" and move.state.waiting_until == NOW + 7200


def test_refused_credentials_fail_over_and_without_a_fallback_fail_the_task() -> None:
    refused = CredentialsError("The API refused the key.", "Check ANTHROPIC_API_KEY.")
    outcome = Outcome("failed", escalate=refused, cli="claude")
    assert moved("implement", outcome, clis=["claude", "gemini"]).checkpoint_status == "failover"
    alone = moved("implement", outcome, clis=["claude"])
    assert alone.status == "failed" and alone.error is refused


def test_deciding_changes_nothing_it_was_given() -> None:
    context = {"breaker": {"test": 1}, "feedback": {}}
    wf = workflow(context)
    decide(wf, FLOW, "test", FLOW.steps["test"], Outcome("failed", feedback="x"), facts())
    assert wf.context == {"breaker": {"test": 1}, "feedback": {}}


# -- rate limits, from what the CLI said to the move (issue 25: "2 hours" was read as 2 s) -------


def limited(error: str) -> Outcome:
    from supervisor.policy.recovery import classify_worker
    from supervisor.workers.base import WorkerResult, retry_after_seconds

    result = WorkerResult(
        ok=False,
        text="",
        error=error,
        error_kind="rate_limit",
        retry_after=retry_after_seconds(error),
    )
    return Outcome("failed", transient=classify_worker(result), cli="claude")


def test_a_limit_that_resets_in_2_hours_fails_over_until_then() -> None:
    move = moved("implement", limited("429: try again in 2 hours"), clis=["claude", "codex"])
    assert types(move) == ["failover"] and move.events[0].payload["to"] == "codex"
    assert move.state.unavailable["claude"].until == pytest.approx(NOW + 7200)


def test_a_short_reset_is_waited_out_on_the_same_cli_even_with_a_fallback() -> None:
    """Failing over at once would only rate-limit the fallback too."""
    move = moved("implement", limited("Please retry in 30s."), clis=["claude", "codex"])
    assert move.status == "rate_limited" and move.wait and move.next_step == "implement"
    assert move.state.waiting_until == pytest.approx(NOW + 30)
    assert "failover" not in types(move)


def test_a_short_limit_that_keeps_coming_back_fails_over_after_the_policys_attempts() -> None:
    context = {"transient": {"implement": 2}}  # waited out twice already
    move = moved("implement", limited("Please retry in 30s."), context, clis=["claude", "codex"])
    assert types(move) == ["failover"]


def test_a_limit_resetting_at_a_clock_time_without_a_fallback_waits_until_then() -> None:
    move = moved("implement", limited("usage limit reached ∙ resets 3pm (UTC)"), clis=["claude"])
    assert move.status == "rate_limited"
    wait = move.state.waiting_until - NOW
    assert 0 < wait <= 24 * 3600  # the next 3 pm, whenever the spec runs
