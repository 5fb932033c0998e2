"""What the TUI says around an approval (issue 59): the approval of a blocked sub-plan says why
it needs the person, "r resumes it" goes once the workflow has moved past the decision, the steps
pane marks the rows it cannot show, the keys of the list do nothing behind the approval screen,
and a resume that failed is named with its error, not only its fix. Textual's pilot over a real
repository, a real state database written by `Store`, and a real `resume`-like process."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from typing import TYPE_CHECKING

from test_tui import make_repo, opened, screen_text, tui
from test_tui_flow import SMALL, still_screen, told

from supervisor.lifecycle.task_state import decide
from supervisor.state.store import Store
from supervisor.tui.approval import ApprovalScreen
from supervisor.tui.resume import Resuming

if TYPE_CHECKING:
    from pathlib import Path


def db(root: Path) -> Path:
    return root / ".supervisor" / "state.db"


def test_the_approval_of_a_blocked_sub_plan_says_why_it_needs_you(tmp_path: Path) -> None:
    root, wf_id = make_repo(tmp_path / "repo")
    blocked = {
        "status": "blocked",
        "trigger": "too_large",
        "reason": "too many files",
        "depth": 2,
        "problem": "the sub-plan shares files between siblings",
        "failures": ["sub-plan refused twice"],
    }
    with Store(db(root)) as store:
        wf = store.workflow(wf_id)
        context = {**wf.context, "decomposition": {"nodes": {"c2.1": blocked}}}
        store.update_workflow(
            wf_id, status="awaiting_approval", current_step=wf.current_step, context=context
        )

    async def scenario() -> str:
        app = tui(root)
        async with opened(app) as pilot:
            await pilot.press("o")
            assert isinstance(app.screen, ApprovalScreen)
            return await still_screen(app, pilot, until=lambda now: "needs you" in now)

    shown = asyncio.run(scenario())
    assert "needs you" in shown, shown
    assert "component c2.1 (depth 2): the sub-plan shares files between siblings" in shown
    assert "sub-plan refused twice" in shown


def test_r_resumes_it_goes_once_the_workflow_moved_past_the_decision(tmp_path: Path) -> None:
    root, wf_id = make_repo(tmp_path / "repo")
    decide(wf_id, root, approve=True)
    with Store(db(root)) as store:
        store.set_status(wf_id, "completed")

    async def scenario() -> str:
        app = tui(root)
        async with opened(app, SMALL):
            return str(app.query_one("#tree-body").content)

    tree = asyncio.run(scenario())
    assert "completed" in tree
    assert "r resumes it" not in tree


def test_the_steps_pane_marks_the_rows_it_cannot_show(tmp_path: Path) -> None:
    root, wf_id = make_repo(tmp_path / "repo")
    with Store(db(root)) as store:
        for n in range(14):
            step = store.start_step(wf_id, f"fix{n}", 1, "implementer", None)
            store.finish_step(step, "succeeded")

    async def scenario() -> str:
        app = tui(root)
        async with opened(app, SMALL) as pilot:
            return await still_screen(app, pilot, until=lambda now: "more below" in now)

    shown = asyncio.run(scenario())
    assert "more below" in shown, shown


def test_the_keys_of_the_list_do_nothing_behind_the_approval_screen(tmp_path: Path) -> None:
    """`o` there once opened a second approval screen over the first."""
    root, _ = make_repo(tmp_path / "repo")

    async def scenario() -> tuple[int, str]:
        app = tui(root)
        async with opened(app, SMALL) as pilot:
            await pilot.press("o")
            depth = len(app.screen_stack)
            await pilot.press("o", "e", "g")
            await pilot.pause()
            footer = screen_text(app).splitlines()[-1]
            return len(app.screen_stack) - depth, footer

    added, footer = asyncio.run(scenario())
    assert added == 0
    assert "Open approval" not in footer and "Older events" not in footer


def test_a_failed_resume_is_named_with_its_error_and_its_fix(tmp_path: Path) -> None:
    root, wf_id = make_repo(tmp_path / "repo")
    log = root / ".supervisor" / f"resume-{wf_id}.log"
    said = (
        "error: Workflow 2 cannot resume: the sandbox image supervisor-sandbox:latest is missing "
        "on this machine, and that sentence is long enough to wrap\n  over two lines.\n"
        "  fix: Build it with `supervisor sandbox build`, then resume.\n"
    )
    code = f"import sys; open({str(log)!r}, 'w').write({said!r}); sys.exit(3)"
    ended = subprocess.Popen([sys.executable, "-c", code])
    ended.wait()

    async def scenario() -> list[str]:
        app = tui(root)
        heard = told(app)
        async with opened(app, SMALL) as pilot:
            app.resuming[wf_id] = Resuming(wf_id, ended, log)
            app.refresh_state()
            await pilot.pause()
            return heard

    heard = asyncio.run(scenario())
    toast = next(m for m in heard if m.startswith(f"supervisor resume {wf_id} ended"))
    assert "exit code 3" in toast
    assert "the sandbox image supervisor-sandbox:latest is missing" in toast
    assert "wrap over two lines." in toast  # one sentence, though the log wrapped it
    assert "fix: Build it with `supervisor sandbox build`" in toast
