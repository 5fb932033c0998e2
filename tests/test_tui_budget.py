"""The TUI raises the budget of a task paused on it (`x`), through the same code as `supervisor
approve <id> --extend`; Textual's pilot over a real repository and a real state database."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import pytest
from test_tui import make_repo, opened, tui
from textual.widgets import Input

from supervisor.policy import budgets
from supervisor.state.store import EventSpec, Store

if TYPE_CHECKING:
    from pathlib import Path

    from supervisor.tui.app import SupervisorTui

FIGURES = {
    "scope": "task",
    "step": "implement",
    "spent": {"usd": 0.003, "tokens": 360.0},
    "limit": {"usd": None, "tokens": 200.0},
    "over": ["tokens"],
}


@pytest.fixture
def paused(tmp_path: Path) -> tuple[Path, int]:
    """The TUI spec's repository, plus a task paused on its token budget mid fan-out."""
    root, _ = make_repo(tmp_path / "repo")
    with Store(root / ".supervisor" / "state.db") as store:
        wf = store.create_workflow(
            description="three parts",
            cli="claude",
            base_branch="main",
            base_sha="0" * 40,
            branch_for_id=lambda i: f"ai/{i}-three-parts",
            definition={},
            first_step="implement",
        )
        budget = {"task": {"usd": None, "tokens": 200}, "step": {}, "extra": {}}
        store.update_workflow(
            wf.id,
            status=budgets.EXCEEDED,
            current_step="implement",
            context={budgets.KEY: budget, budgets.EXCEEDED: FIGURES},
            events=[EventSpec(budgets.EXCEEDED, step="implement", status="task", payload=FIGURES)],
        )
    return root, wf.id


def told(app: SupervisorTui) -> list[str]:
    """Every notification the app gives from now on (they expire from the screen)."""
    said: list[str] = []
    shown = app.notify

    def notify(message: str, **kwargs: Any) -> None:
        said.append(message)
        shown(message, **kwargs)

    app.notify = notify  # type: ignore[method-assign]
    return said


def context(root: Path, wf_id: int) -> dict[str, object]:
    with Store(root / ".supervisor" / "state.db") as store:
        return store.workflow(wf_id).context


def test_x_on_a_budget_paused_task_raises_its_budget_by_what_is_typed(
    paused: tuple[Path, int],
) -> None:
    root, wf_id = paused

    async def scenario() -> list[str]:
        app = tui(root)
        said = told(app)
        async with opened(app) as pilot:
            await pilot.press("o")  # not an approval: the screen says which key applies
            await pilot.press("x")
            assert isinstance(app.focused, Input)
            await pilot.press(*"50k tokens", "enter")
            await pilot.pause()
            return said

    said = asyncio.run(scenario())

    assert f"Workflow {wf_id} is paused on its budget: x raises it." in said
    assert f"Budget raised. Continue with: supervisor resume {wf_id}" in said
    extra = context(root, wf_id)[budgets.KEY]["extra"]  # type: ignore[index]
    assert extra["task"]["tokens"] == 50000
    with Store(root / ".supervisor" / "state.db") as store:
        assert [e.type for e in store.events(wf_id)][-1] == "budget_extended"


def test_what_is_not_an_extension_is_refused_and_nothing_is_raised(
    paused: tuple[Path, int],
) -> None:
    root, wf_id = paused

    async def scenario() -> list[str]:
        app = tui(root)
        said = told(app)
        async with opened(app) as pilot:
            await pilot.press("x", *"lots", "enter")
            await pilot.pause()
            return said

    said = asyncio.run(scenario())

    assert any("'lots' is not a budget extension" in m for m in said)
    assert context(root, wf_id)[budgets.KEY]["extra"] == {}  # type: ignore[index]


def test_x_on_a_task_not_paused_on_its_budget_changes_nothing(paused: tuple[Path, int]) -> None:
    root, _ = paused

    async def scenario() -> list[str]:
        app = tui(root)
        said = told(app)
        async with opened(app) as pilot:
            await pilot.press("up", "x")
            await pilot.pause()
            return said

    said = asyncio.run(scenario())

    assert any("is not paused on its budget" in m for m in said)
