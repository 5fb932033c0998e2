"""The `start-task` preview says what the run will do and nothing else (issue 59): a role's routing
only when there was a choice to make (a lock, or another CLI it could run on), and the approvals
line truthfully: an approval policy that stops every candidate is a planned stop, not "none
planned ... always". A real repository with a real configuration, trust and approval policy; the
preview creates nothing and needs no Docker."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from supervisor.guard.trust import trust
from supervisor.lifecycle.demo import make_demo_repo
from supervisor.lifecycle.opening import approval_stops, start_preview

if TYPE_CHECKING:
    from pathlib import Path

ONLY_CLAUDE = "gates: {test: make test}\nclis:\n  claude:\n    base_url: http://127.0.0.1:9\n"


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A repository whose only CLI with credentials is claude."""
    monkeypatch.setenv("SUPERVISOR_USER_DIR", str(tmp_path / "user"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    for key in ("OPENAI_API_KEY", "CODEX_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY"):
        monkeypatch.delenv(key, raising=False)
    root = make_demo_repo(tmp_path / "repo")
    (root / ".supervisor").mkdir()
    (root / ".supervisor" / "config.yaml").write_text(ONLY_CLAUDE)
    trust(root)
    return root


def routing_lines(preview: str) -> list[str]:
    return [line.strip() for line in preview.splitlines() if line.strip().startswith("routing")]


def test_no_routing_line_when_every_role_can_only_run_on_the_default(repo: Path) -> None:
    preview = start_preview("Fix multiply", repo, asked="planned")
    assert routing_lines(preview) == [], preview
    assert "CLIs      claude" in preview


def test_a_role_routed_away_from_the_default_is_shown(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    (repo / ".supervisor" / "config.yaml").write_text(
        ONLY_CLAUDE
        + "  codex:\n    base_url: http://127.0.0.1:9\n"
        + "adaptive:\n  locked_assignments: {reviewer: codex}\n"
    )
    trust(repo)
    lines = routing_lines(start_preview("Fix multiply", repo, asked="planned"))
    assert any(line.startswith("routing   reviewer → codex (locked:") for line in lines), lines
    assert not any("(kept:" in line for line in lines), lines  # a role with no choice: silent


def test_a_policy_that_stops_every_candidate_is_a_planned_stop(repo: Path) -> None:
    user = repo.parent / "user"
    user.mkdir(exist_ok=True)
    (user / "approval_policy.yaml").write_text("levels:\n  low: {action: require_approval}\n")
    line = approval_stops(repo)
    assert not line.startswith("none"), line
    assert "always" not in line, line
    assert line.startswith("1: before 'commit', every time (the approval policy")
    assert "--yes does not approve them" in line
