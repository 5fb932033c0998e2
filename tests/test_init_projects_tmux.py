"""`supervisor init` on a monorepo in a real terminal (tmux): the projects and their dependencies
are on screen before the question, the user drops one in the numbered checklist, and the config
holds the others, with the dependencies on the dropped one gone. No image is built
(--no-check-gates): the projects' part of init needs no Docker."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
import yaml
from e2e_support import missing
from test_tui_tmux import Terminal, wait_for
from workspace_fixtures import PNPM, commit, write

REPO_ROOT = Path(__file__).resolve().parent.parent
FIRST_OUTPUT_SECONDS = 120  # a whole process starting on a loaded machine, not a stall


@pytest.fixture(autouse=True)
def tmux(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if shutil.which("tmux") is None:
        missing("tmux not installed (scripts/setup.sh installs it)")
    monkeypatch.setenv("SUPERVISOR_USER_DIR", str(tmp_path / "user"))


def test_the_user_confirms_the_projects_and_drops_one(tmp_path: Path) -> None:
    repo = commit(write(tmp_path / "repo", PNPM))
    init = f"{sys.executable} -m supervisor init --no-check-gates --repo {repo}"
    term = Terminal(
        ["env", f"PYTHONPATH={REPO_ROOT}", "sh", "-c", f"{init}; echo EXIT=$?; sleep 3600"], repo
    )
    try:
        # The heading and the checklist under it are two writes: a screen read between them
        # holds the heading alone, so the wait is for the checklist's first line.
        asked = wait_for(
            lambda: "1 [x] admin" in (s := term.screen()) and s,
            FIRST_OUTPUT_SECONDS,
            term.screen,
        )
        assert "Projects to write" in asked
        assert asked.index("Projects  pnpm") < asked.index("Projects to write")
        assert "depends on types  (apps/web/package.json: dependencies @acme/types" in asked
        term.keys("1", "Enter")
        wait_for(lambda: "1 [ ] admin" in term.screen(), 30, term.screen)
        term.keys("Enter")  # the projects
        wait_for(lambda: "Role packs (the suggested" in term.screen(), 30, term.screen)
        term.keys("Enter")  # the packs
        done = wait_for(lambda: "EXIT=" in (s := term.screen()) and s, 60, term.screen)
        assert "EXIT=0" in done and "web, types (in .supervisor/config.yaml)" in done
    finally:
        term.close()
    config = yaml.safe_load((repo / ".supervisor" / "config.yaml").read_text())
    assert [p["name"] for p in config["projects"]] == ["web", "types"]
    assert config["cross_project_dependencies"] == {"web": {"depends_on": ["types"]}}
