"""The TUI's approval screen shows a hostile worker's words literally: escape sequences made
visible, markup not parsed, the header where it was (Textual's pilot over a real repository and
state database, like tests/test_tui.py). An escape sequence in a review summary once wiped the
screen's header."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from test_tui import git, make_repo, opened, tui
from textual.widgets import Header

from supervisor.state.store import EventSpec, Store
from supervisor.tui.approval import ApprovalScreen

if TYPE_CHECKING:
    from pathlib import Path

EVIL = "\x1b]0;pwned\x07\x1b[2J[/][link=http://x]click"
SHOWN = "\\x1b]0;pwned\\x07\\x1b[2J[/][link=http://x]click"


def hostile(root: Path, wf_id: int) -> None:
    """The waiting workflow's review and candidate, as a hostile worker would write them."""
    review: dict[str, Any] = {
        "status": "APPROVED",
        "summary": f"summary {EVIL}",
        "issues": [{"severity": "minor", "description": f"issue {EVIL}", "file": f"f{EVIL}"}],
        "security_concerns": [f"concern {EVIL}"],
    }
    with Store(root / ".supervisor" / "state.db") as store:
        store.add_event(
            wf_id,
            EventSpec("review", "review", "reviewer", "APPROVED", {"output": review}),
        )
    git(root, "checkout", "-q", f"ai/{wf_id}-check-passwords")
    (root / "check.py").write_text(f"def check(p):\n    return '{EVIL}'\n")
    (root / f"name{EVIL[:9]}.txt").write_text("x\n")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "hostile candidate")
    git(root, "checkout", "-q", "main")


def test_the_approval_screen_shows_escape_sequences_and_markup_literally(tmp_path: Path) -> None:
    root, wf_id = make_repo(tmp_path / "repo")
    hostile(root, wf_id)

    async def scenario() -> tuple[str, bool]:
        app = tui(root)
        async with opened(app, (140, 90)) as pilot:
            await pilot.press("o")
            assert isinstance(app.screen, ApprovalScreen)
            await pilot.press("d")  # the diff too
            await pilot.press("d")
            await pilot.pause()
            header = app.screen.query_one(Header)
            return app.export_screenshot().replace("&#160;", " "), header.display

    shown, header_shown = asyncio.run(scenario())
    assert header_shown and "supervisor" in shown
    assert "\x1b" not in shown and "\x07" not in shown
    for said in ("summary", "issue", "concern"):
        assert f"{said} {SHOWN}" in shown
    assert "name\\033]0;pwned.txt" in shown  # the changed file's name, as git quotes it
