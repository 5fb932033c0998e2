"""The command line as a person and a script meet it: arguments, tables, JSON, approvals.

Typer's CliRunner parses and renders in-process (its stdout is not a terminal, like a pipe);
the repository, its git history and the state database underneath are real.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import TYPE_CHECKING, Any

import pytest
from typer.testing import CliRunner

from supervisor.cli.app import app
from supervisor.core.config import load_settings
from supervisor.lifecycle import tasks
from supervisor.lifecycle.demo import make_demo_repo
from supervisor.policy import approvals
from supervisor.state.store import EventSpec
from supervisor.workflow.loading import load_workflow

if TYPE_CHECKING:
    from pathlib import Path

APPROVAL_WORKFLOW = {
    "initial_step": "plan",
    "steps": {
        "plan": {"role": "planner", "next": "implement", "human_approval": True},
        "implement": {"role": "implementer", "next": "review", "human_approval": True},
        "review": {"role": "reviewer", "next": "commit"},
        "commit": {"action": "commit"},
    },
}
PLAN = {
    "status": "COMPLETE",
    "summary": "Add multiply next to add.",
    "estimated_components": 1,
    "phases": [
        {
            "id": "p1",
            "description": "Calculator",
            "components": [{"id": "calc", "description": "d", "files": ["calc.py"]}],
        }
    ],
}
LONG_ROLE = "implementer_for_very_long_component_names"


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SUPERVISOR_USER_DIR", str(tmp_path / "user"))
    monkeypatch.delenv("COLUMNS", raising=False)
    return make_demo_repo(tmp_path / "repo")


def run(*args: str, env: dict[str, str] | None = None) -> Any:
    return CliRunner().invoke(app, [str(a) for a in args], env=env)


def git(repo: Path, *args: str) -> str:
    base = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@localhost"]
    return subprocess.run([*base, *args], check=True, capture_output=True, text=True).stdout


def waiting_workflow(repo: Path, *, step: str, next_step: str, context: dict[str, Any]) -> int:
    """A workflow stopped at `step`'s approval, recorded as the engine records it."""
    project = tasks.open_project(repo)
    base = project.workspace.head_commit()
    with project.store() as store:
        wf = store.create_workflow(
            description="Implement multiply",
            cli="claude",
            base_branch="main",
            base_sha=base,
            branch_for_id=lambda i: f"ai/{i}-implement-multiply",
            definition=APPROVAL_WORKFLOW,
            first_step="plan",
        )
        git(repo, "branch", wf.task_branch, base)
        store.advance(
            wf.id,
            step=step,
            next_step=next_step,
            context={**context, "approval_step": step},
            status="awaiting_approval",
            events=[EventSpec("approval_requested", step=step, status="pending")],
            request_approval=True,
        )
    return wf.id


def test_sandbox_shell_takes_the_rest_of_the_line_as_the_command(repo: Path) -> None:
    from e2e_support import require_sandbox

    require_sandbox()
    shown = subprocess.run(
        [sys.executable, "-m", "supervisor", "sandbox", "shell", "--repo", str(repo),
         "sh", "-c", 'echo "argv: $*"', "sh", "-m", "pytest", "-x"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    assert "argv: -m pytest -x" in shown.stdout
    status = json.loads(run("sandbox", "status", "--repo", repo, "--json").stdout)
    assert status["base_image"].startswith("supervisor-sandbox") and "images" in status


def test_doctor_reports_a_repository_without_commits_as_one_row(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    git(empty, "init", "-q")
    result = run("doctor", "--repo", empty, "--json")
    rows = {row["name"]: row for row in json.loads(result.stdout)}
    assert rows["repository"]["ok"] is False
    assert "no commits yet" in rows["repository"]["detail"]
    assert "git commit" in rows["repository"]["hint"]
    assert {"workflow", "git", "Docker engine"} <= set(rows)  # the other checks still ran
    fix = result.exception.hint  # --json shows no table to point at
    assert "table" not in fix and "`hint`" in fix


def test_roles_list_never_cuts_an_identifier_when_piped(repo: Path) -> None:
    roles_dir = repo / ".supervisor" / "roles"
    roles_dir.mkdir(parents=True)
    (roles_dir / f"{LONG_ROLE}.yaml").write_text(
        "extends: implementer_fast\ndescription: A role whose name is longer than a column.\n"
    )
    table = run("roles", "list", "--repo", repo)
    assert table.exit_code == 0, table.output
    assert LONG_ROLE in table.stdout and "implementer_fast" in table.stdout
    assert "…" not in table.stdout
    rows = json.loads(run("roles", "list", "--repo", repo, "--json").stdout)
    mine = next(r for r in rows if r["role"] == LONG_ROLE)
    assert mine["extends"] == "implementer_fast" and mine["layer"] == "project"


TERMINAL = {"TTY_COMPATIBLE": "1"}
"""Rich takes stdout for a terminal (the runner's is a pipe, which gets plain rows)."""


def test_in_a_terminal_of_80_columns_roles_stay_whole(repo: Path) -> None:
    table = run("roles", "list", "--repo", repo, env={"COLUMNS": "80", **TERMINAL})
    lines = table.stdout.splitlines()
    assert all(len(line) <= 80 for line in lines)
    assert "security_auditor" in lines and "implementer_fast" in lines  # each on its own line


def test_every_listing_command_answers_in_json(repo: Path) -> None:
    wf_id = waiting_workflow(repo, step="plan", next_step="implement", context={"plan": PLAN})
    listed = json.loads(run("status", "--repo", repo, "--json").stdout)
    assert [w["id"] for w in listed] == [wf_id] and listed[0]["status"] == "awaiting_approval"
    one = json.loads(run("status", str(wf_id), "--repo", repo, "--json").stdout)
    assert one["approval"]["step"] == "plan" and one["to_approve"][0].startswith("plan: COMPLETE")
    events = [
        json.loads(line)
        for line in run("events", wf_id, "--repo", repo, "--json").stdout.splitlines()
    ]
    assert events[-1]["type"] == "approval_requested"
    config = json.loads(run("config", "show", "--repo", repo, "--json").stdout)
    assert config["settings"]["cli"] == "claude" and "cli" in config["from"]
    role = json.loads(run("roles", "show", "reviewer", "--repo", repo, "--json").stdout)
    assert role["role"]["output"] == "review"
    assert "by_role" in json.loads(run("metrics", "--repo", repo, "--json").stdout)


def test_events_at_80_columns_print_one_block_per_event(repo: Path) -> None:
    wf_id = waiting_workflow(repo, step="plan", next_step="implement", context={"plan": PLAN})
    project = tasks.open_project(repo)
    with project.store() as store:
        store.add_event(
            wf_id,
            EventSpec(
                "implementation",
                step="implement/calculator_component",
                role="implementer_fast",
                status="succeeded",
                payload={"changed_files": [f"src/module_{i}.py" for i in range(12)]},
            ),
        )
    narrow = run("events", wf_id, "--repo", repo, env={"COLUMNS": "80", **TERMINAL}).stdout
    lines = narrow.splitlines()
    assert all(len(line) <= 80 for line in lines), narrow
    words = " ".join(narrow.split())
    # whole identifiers (wrapped at a space at worst), never squeezed to a few letters
    assert "implementation succeeded implement/calculator_component · implementer_fast" in words
    assert any("src/module_11.py" in line for line in lines)  # the details, folded below
    wide = run("events", wf_id, "--repo", repo, env={"COLUMNS": "200", **TERMINAL}).stdout
    assert "┃ type" in wide.replace("  ", " ")  # a table again when there is room


def test_help_shows_no_bool_type_noise() -> None:
    for command in (["roles", "list"], ["start-task"], ["metrics"], ["roles"]):
        shown = run(*command, "--help", env={"COLUMNS": "100"})
        assert "--help" in shown.stdout
        assert "<bool>" not in shown.stdout, command
    assert "--repo          PATH" in run("roles", "list", "--help").stdout  # what to type


def test_the_start_preview_lists_every_approval_the_enterprise_template_asks_for(
    repo: Path,
) -> None:
    (repo / ".supervisor").mkdir(exist_ok=True)
    (repo / ".supervisor" / "config.yaml").write_text(
        "workflow: {template: enterprise}\ngates: {test: 'make test', lint: 'true'}\n"
    )
    definition = load_workflow(repo, load_settings(repo))
    assert approvals.planned(definition, repo) == [
        "after 'plan' (the plan)",
        "after 'review' (the review and changes)",
    ]
    # --yes confirms the start only: the run still says where it will stop, before anything.
    result = run("start-task", "Implement multiply", "--repo", repo, "--yes", env={
        "ANTHROPIC_API_KEY": "", "ANTHROPIC_AUTH_TOKEN": "", "HOME": str(repo.parent / "home")
    })  # fmt: skip
    assert "Approvals this run asks for: 2: after 'plan' (the plan)" in result.output
    assert "--yes does not approve them" in result.output


def test_a_waiting_plan_approval_shows_the_plan(repo: Path) -> None:
    wf_id = waiting_workflow(repo, step="plan", next_step="implement", context={"plan": PLAN})
    shown = run("status", wf_id, "--repo", repo).stdout
    assert "plan (awaiting approval); then: implement" in shown
    assert "Add multiply next to add." in shown
    assert "calc: calc.py" in shown
    assert f"supervisor approve {wf_id}" in shown


def test_a_waiting_change_approval_shows_the_candidates_diff_stat(repo: Path) -> None:
    (repo / "calc.py").write_text("def multiply(a, b):\n    return a * b\n")
    git(repo, "commit", "-qam", "candidate")
    candidate = git(repo, "rev-parse", "HEAD").strip()
    git(repo, "reset", "-q", "--hard", "HEAD~1")
    wf_id = waiting_workflow(
        repo, step="implement", next_step="review", context={"plan": PLAN, "candidate": candidate}
    )
    shown = run("status", wf_id, "--repo", repo).stdout
    assert "implement (awaiting approval); then: review" in shown
    assert "calc.py |" in shown and "1 file changed" in shown


def test_resume_at_a_waiting_approval_shows_what_it_waits_for(repo: Path) -> None:
    from e2e_support import require_sandbox

    from supervisor.core.errors import ApprovalRequired

    require_sandbox()
    wf_id = waiting_workflow(repo, step="plan", next_step="implement", context={"plan": PLAN})
    result = run("resume", wf_id, "--repo", repo, env={"ANTHROPIC_API_KEY": "test-key"})
    assert isinstance(result.exception, ApprovalRequired)
    assert "plan: COMPLETE, 1 component" in result.output
    assert "Add multiply next to add." in result.output
