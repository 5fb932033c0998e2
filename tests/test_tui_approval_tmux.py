"""The TUI's approval screen in a real terminal (tmux) of 80×24 (issue 59): a person reaches every
section of a change too big for one screen — the task, each changed file, each reviewer's issues,
the end of the diff — with keys that `supervisor tui --help` lists, and each pane says when it
holds more than it shows.

No Docker: the waiting workflow is written by `Store` over a real repository (tests/test_tui.py's
make_repo, with a larger candidate), and the TUI runs as its own process, as a person starts it.
"""

from __future__ import annotations

import re
import shutil
import sys
from typing import TYPE_CHECKING

import pytest
from e2e_support import missing
from test_tui import git, make_repo
from test_tui_tmux import Terminal, wait_for
from typer.testing import CliRunner

from supervisor.cli.app import app as cli
from supervisor.state.store import EventSpec, Store

if TYPE_CHECKING:
    from pathlib import Path

FILES = 12
LOOK = 60.0  # how long to look for what a key should bring up; a frame arrives in well under 1 s


@pytest.fixture(autouse=True)
def real_terminal() -> None:
    if shutil.which("tmux") is None:
        missing("tmux not installed (scripts/setup.sh installs it)")


def big_change(tmp_path: Path) -> Path:
    """make_repo's waiting workflow, whose candidate also adds FILES modules (the last,
    `zz_last.py`) and ends its diff with `LAST DIFF LINE`, reviewed by a second reviewer with
    an issue that only a full summary reaches."""
    root, wf_id = make_repo(tmp_path / "repo")
    branch = f"ai/{wf_id}-check-passwords"
    git(root, "checkout", "-q", branch)
    for n in range(FILES - 1):
        (root / f"mod{n:02d}.py").write_text(f"VALUE_{n} = {n}\n")
    (root / "zz_last.py").write_text("".join(f"line_{n} = {n}\n" for n in range(40)))
    (root / "zz_last.py").write_text((root / "zz_last.py").read_text() + "# LAST DIFF LINE\n")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "more")
    git(root, "checkout", "-q", "main")
    review = {
        "status": "CHANGES_REQUESTED",
        "summary": "the limit is missing",
        "issues": [{"severity": "major", "description": "LAST REVIEW ISSUE", "file": "app.py"}],
        "security_concerns": [],
    }
    with Store(root / ".supervisor" / "state.db") as store:
        store.add_event(
            wf_id,
            EventSpec(
                "review",
                step="security_review",
                role="security_reviewer",
                status="CHANGES_REQUESTED",
                payload={"output": review},
            ),
        )
    return root


def listed_keys() -> str:
    return CliRunner().invoke(cli, ["tui", "--help"], env={"COLUMNS": "100"}).output


def test_every_section_of_the_approval_screen_is_reached_at_80_by_24(tmp_path: Path) -> None:
    root = big_change(tmp_path)
    help_text = listed_keys()
    term = Terminal(
        [sys.executable, "-m", "supervisor", "tui", "--repo", str(root)], root, size=(80, 24)
    )

    def press(key: str, listed_as: str) -> None:
        """`key`, which `tui --help` lists on a line of its own as `listed_as`."""
        listed = re.search(rf"^ +{re.escape(listed_as)}( |$)", help_text, re.MULTILINE)
        assert listed, f"{listed_as!r} is not in `tui --help`:\n{help_text}"
        term.keys(key)

    def shows(*texts: str) -> None:
        wait_for(lambda: all(t in term.screen() for t in texts), LOOK, term.screen)

    try:
        shows("awaiting_approval", "implement (approval)")
        press("o", "enter, o")
        shows("check passwords in login", "[A]pprove", "more below")  # the task, and a mark
        press("f", "f")
        shows("Changed files (14)", "mod00.py")
        press("PageDown", "up/down, pgup/pgdn, home/end")
        shows("zz_last.py")  # the last changed file
        press("v", "v")
        shows("security_reviewer", "LAST REVIEW ISSUE")
        press("Tab", "tab")
        press("End", "up/down, pgup/pgdn, home/end")
        shows("LAST DIFF LINE")
        press("d", "d")  # the diff hidden: the summary has the screen
        wait_for(lambda: "LAST DIFF LINE" not in term.screen(), LOOK, term.screen)
        press("s", "s, escape")
        shows("awaiting_approval")
        term.keys("q")
        wait_for(lambda: not term.running(), LOOK, term.screen)
    finally:
        term.close()
