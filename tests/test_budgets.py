"""Budget arithmetic as pure logic: limits with their extensions, what counts as over, the
price table for a CLI that reports no cost, and the flag that caps one claude run."""

from __future__ import annotations

from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import pytest

from supervisor.core.config import Settings
from supervisor.core.errors import StateError
from supervisor.policy import budgets
from supervisor.state.store import EventSpec, Store

if TYPE_CHECKING:
    from pathlib import Path

PINNED = {"task": {"usd": 1.0, "tokens": 5000}, "step": {"usd": 0.25, "tokens": None}, "extra": {}}


def paused(scope: str = "task", spent_usd: float = 1.2, over: str = "usd") -> Any:
    figures = {
        "scope": scope,
        "step": "implement",
        "spent": {"usd": spent_usd, "tokens": 900.0},
        "limit": budgets.limits(PINNED, scope),
        "over": [over],
    }
    context = {budgets.KEY: PINNED, budgets.EXCEEDED: figures}
    return SimpleNamespace(id=7, status="budget_exceeded", context=context)


def test_a_limit_is_the_pinned_budget_plus_the_extensions_of_that_scope() -> None:
    budget = {**PINNED, "extra": {"task": {"usd": 2.0, "tokens": 0}, "step:implement": {"usd": 1}}}

    assert budgets.limits(budget, "task") == {"usd": 3.0, "tokens": 5000.0}
    assert budgets.limits(budget, "step:implement") == {"usd": 1.25, "tokens": None}
    assert budgets.limits(budget, "step:review") == {"usd": 0.25, "tokens": None}


def test_a_budget_is_reached_at_its_limit_and_an_unset_one_never() -> None:
    limit = {"usd": 1.0, "tokens": None}
    assert budgets.over({"usd": 0.99, "tokens": 10**9}, limit) == []
    assert budgets.over({"usd": 1.0, "tokens": 0}, limit) == ["usd"]


def test_extend_raises_the_paused_scope_and_resume_then_goes_on() -> None:
    wf = paused()
    with pytest.raises(budgets.BudgetExceeded, match=r"spent \$1\.20 of \$1\.00"):
        budgets.resume_check(wf)

    wf.context = budgets.extend(wf, 2.00, None)

    assert wf.context[budgets.KEY]["extra"] == {"task": {"usd": 2.0, "tokens": 0}}
    assert budgets.EXCEEDED not in budgets.resume_check(wf)


def test_an_extension_too_small_keeps_the_workflow_paused() -> None:
    wf = paused(spent_usd=1.5)
    wf.context = budgets.extend(wf, 0.25, None)
    with pytest.raises(budgets.BudgetExceeded, match=r"of \$1\.25"):
        budgets.resume_check(wf)


@pytest.mark.parametrize(
    ("usd", "tokens", "problem"),
    [(None, None, "needs --extend"), (-1.0, None, "must be positive"), (None, 0, "needs")],
)
def test_a_bad_extension_is_refused(usd: float | None, tokens: int | None, problem: str) -> None:
    with pytest.raises(StateError, match=problem):
        budgets.extend(paused(), usd, tokens)


def test_the_price_table_prices_tokens_only_where_the_cli_reported_no_cost() -> None:
    settings = Settings.model_validate(
        {"budgets": {"prices": {"gpt-5.5": {"input_per_mtok": 2.0, "output_per_mtok": 10.0}}}}
    )
    usage = {"input_tokens": 500_000, "output_tokens": 100_000, "cost_usd": 0.0}

    assert budgets.priced(settings, "gpt-5.5", usage) == pytest.approx(2.0)
    assert budgets.priced(settings, "gpt-5.5", {**usage, "cost_usd": 0.4}) == 0.4
    assert budgets.priced(settings, "unknown-model", usage) == 0.0


def test_the_cli_budget_flag_carries_what_is_left_where_the_cli_has_one() -> None:
    assert budgets.cli_flags("--max-budget-usd", 0.5) == ["--max-budget-usd", "0.50"]
    assert budgets.cli_flags(None, 0.5) == []
    assert budgets.cli_flags("--max-budget-usd", None) == []


def test_status_shows_spend_against_the_task_budget_and_why_it_is_paused() -> None:
    wf = paused()
    line = budgets.status_line(wf, {"input_tokens": 800, "output_tokens": 100, "cost_usd": 1.2})
    assert line == (
        "task budget: $1.20 of $1.00, 900 of 5000 tokens; paused: task reached its usd budget"
    )
    unbudgeted = SimpleNamespace(id=1, status="running", context={})
    assert budgets.status_line(unbudgeted, {}) is None


def test_check_decides_and_writes_nothing_the_engine_commits_its_verdict(tmp_path: Path) -> None:
    """Only the engine writes workflow progress: `check` reads the spend and says what to
    store (the limits pinned on first sight, the pause with its figures); the database is
    untouched until the engine commits that (Engine._budget)."""
    settings = Settings.model_validate({"budgets": {"task": {"tokens": 100}}})
    with Store(tmp_path / "state.db") as store:
        wf = store.create_workflow(
            description="d",
            cli="claude",
            base_branch="main",
            base_sha="0" * 40,
            branch_for_id=lambda i: f"ai/{i}",
            definition={},
            first_step="implement",
            events=[EventSpec("implementation", step="implement", input_tokens=90)],
        )
        under = budgets.check(settings, store, wf, "implement")
        store.add_event(wf.id, EventSpec("review", step="review", output_tokens=20))
        over = budgets.check(settings, store, wf, "review")

        assert [e.type for e in under.events] == ["budget_pinned"]
        assert under.exceeded is None
        assert under.context[budgets.KEY]["task"]["tokens"] == 100
        assert [e.type for e in over.events] == ["budget_pinned", budgets.EXCEEDED]
        assert over.exceeded is not None
        assert (over.exceeded["scope"], over.exceeded["over"]) == ("task", ["tokens"])
        assert over.context[budgets.EXCEEDED] == over.exceeded
        stored = store.workflow(wf.id)
        assert (stored.status, stored.context) == ("running", {})
        assert [e.type for e in store.events(wf.id)][-2:] == ["implementation", "review"]
        assert not [e for e in store.events(wf.id) if e.type.startswith("budget")]
