"""No silent test gate: a gate with no command stops `start-task` before anything exists, with the
command detection proposes; `--no-gate` runs without gates and says so in the task's events."""

from __future__ import annotations

import subprocess
from typing import TYPE_CHECKING, Any

import pytest
from e2e_support import GOOD_CALC, implementer, planner, require_sandbox, reviewer

from supervisor.core.config import StepDef, WorkflowDef
from supervisor.core.errors import ConfigError
from supervisor.guard.trust import trust
from supervisor.lifecycle import opening as project
from supervisor.lifecycle import tasks
from supervisor.lifecycle.demo import make_demo_repo
from supervisor.lifecycle.preflight import without_gates

if TYPE_CHECKING:
    from pathlib import Path


def git_repo(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    subprocess.run(["git", "init", "-q", "-b", "main", str(root)], check=True)
    subprocess.run(["git", "-C", str(root), "add", "-A"], check=True)
    subprocess.run(
        ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "i"],
        check=True,
    )
    return root


def branches(repo: Path) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), "branch", "--list", "ai/*"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def test_no_test_command_known_stops_start_task_before_anything_exists(
    tmp_path: Path, api_keys: None
) -> None:
    repo = git_repo(tmp_path / "repo", {"README.md": "# notes\n", "notes.txt": "x\n"})
    with pytest.raises(ConfigError, match="'test' gate") as info:
        tasks.start_task("Do something", repo)
    assert "detection finds no command" in info.value.message
    assert "gates: {test: '<command>'}" in info.value.hint
    assert "--no-gate" in info.value.hint
    assert not (repo / ".supervisor" / "state.db").exists()
    assert branches(repo) == ""


def test_the_stop_proposes_the_detected_command(tmp_path: Path, api_keys: None) -> None:
    repo = git_repo(
        tmp_path / "repo",
        {"slug.py": "", "tests/test_slug.py": "import pytest\n\ndef test_x():\n    pass\n"},
    )
    with pytest.raises(ConfigError) as info:
        tasks.start_task("Do something", repo)
    assert "test = `python3 -m pytest -q`" in info.value.message
    assert "gates: {test: 'python3 -m pytest -q'}" in info.value.hint
    assert branches(repo) == ""


def test_without_gates_rewires_around_every_gate_step() -> None:
    definition = WorkflowDef(
        initial_step="plan",
        steps={
            "plan": StepDef(role="planner", next="implement"),
            "implement": StepDef(
                role="implementer", for_each="component", gates=["lint"], next="test"
            ),
            "test": StepDef(gate="test", next="types", on_fail="implement"),
            "types": StepDef(gate="types", next="review", on_fail="implement"),
            "review": StepDef(role="reviewer", next="commit", on_reject="test"),
            "commit": StepDef(action="commit"),
        },
    )
    stripped, dropped = without_gates(definition)
    assert dropped == ["lint", "test", "types"]
    assert list(stripped.steps) == ["plan", "implement", "review", "commit"]
    assert stripped.steps["implement"].next == "review"
    assert stripped.steps["implement"].gates == []
    assert stripped.steps["review"].on_reject == "review"  # past the gates it pointed at


@pytest.mark.docker
def test_no_gate_runs_without_gates_and_the_events_say_so(
    tmp_path: Path, api_keys: None, serve: Any
) -> None:
    require_sandbox()
    server = serve(planner(), implementer(GOOD_CALC), reviewer())
    repo = make_demo_repo(tmp_path / "repo")
    (repo / "Makefile").unlink()  # no test command anywhere
    subprocess.run(["git", "-C", str(repo), "commit", "-qam", "no make"], check=True)
    (repo / ".supervisor").mkdir()
    (repo / ".supervisor" / "config.yaml").write_text(
        f"clis:\n  claude: {{base_url: '{server.url}'}}\n"
    )
    trust(repo)  # the scripted API is where this test's credentials go
    preview = project.start_preview("Implement add and multiply", repo, no_gate=True)
    assert "gates     none (--no-gate leaves out: test)" in preview

    wf = tasks.start_task("Implement add and multiply", repo, no_gate=True)

    assert wf.status == "completed"
    with tasks.reading(repo) as store:
        events = store.events(wf.id)
    skipped = [e for e in events if e.type == "gates_skipped"]
    assert len(skipped) == 1 and skipped[0].payload == {
        "gates": ["test"],
        "reason": "start-task --no-gate",
    }
    assert [e for e in events if e.type == "gate"] == []
