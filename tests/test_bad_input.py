"""Bad input of every kind: one message naming the cause and the fix, a non-zero exit code, and
nothing half-written (no task branch, no workflow row, the user's checkout untouched)."""

from __future__ import annotations

import subprocess
from typing import TYPE_CHECKING

import pytest
from cli_support import supervisor
from e2e_support import new_repo, require_sandbox, write_workflow

from supervisor.workspace.worktrees import Workspace

if TYPE_CHECKING:
    from pathlib import Path


@pytest.fixture(autouse=True)
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SUPERVISOR_USER_DIR", str(tmp_path / "user"))
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")


def assert_nothing_written(repo: Path, fingerprint: str) -> None:
    branches = subprocess.run(
        ["git", "-C", str(repo), "branch", "--list", "ai/*"], capture_output=True, text=True
    ).stdout
    assert branches.strip() == ""
    assert Workspace(repo).user_checkout_fingerprint() == fingerprint
    db = repo / ".supervisor" / "state.db"
    if db.exists():
        import sqlite3

        assert sqlite3.connect(db).execute("SELECT count(*) FROM workflows").fetchone()[0] == 0


def refused(result: subprocess.CompletedProcess[str], code: int, *phrases: str) -> None:
    assert result.returncode == code, result.stderr
    message = " ".join(result.stderr.split())
    for phrase in phrases:
        assert phrase in message, message
    assert "fix:" in message, message
    assert "Traceback" not in result.stderr


def test_outside_a_git_repository(tmp_path: Path) -> None:
    result = supervisor("start-task", "x", "--yes", cwd=tmp_path)
    refused(result, 2, "is not a git repository", "git init")


def test_a_repository_without_commits(tmp_path: Path) -> None:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    result = supervisor("start-task", "x", "--yes", cwd=tmp_path)
    refused(result, 2, "has no commits yet", "first commit")


def test_start_needs_confirmation_or_yes_without_a_terminal(tmp_path: Path) -> None:
    repo = new_repo(tmp_path, "http://127.0.0.1:9", cli="claude")
    result = supervisor("start-task", "x", cwd=repo)
    refused(result, 1, "needs confirmation", "--yes")


def test_a_workflow_file_that_does_not_parse(tmp_path: Path) -> None:
    repo = new_repo(tmp_path, "http://127.0.0.1:9", cli="claude")
    write_workflow(repo, "workflow:\n  steps: [unclosed\n")
    before = Workspace(repo).user_checkout_fingerprint()
    result = supervisor("start-task", "x", "--yes", cwd=repo)
    refused(result, 2, "workflow.yaml is not valid YAML at line")
    assert_nothing_written(repo, before)


def test_a_workflow_naming_an_unknown_role(tmp_path: Path) -> None:
    repo = new_repo(tmp_path, "http://127.0.0.1:9", cli="claude")
    write_workflow(repo, "workflow:\n  initial_step: a\n  steps:\n    a: {role: wizard}\n")
    before = Workspace(repo).user_checkout_fingerprint()
    result = supervisor("start-task", "x", "--yes", cwd=repo)
    refused(result, 2, "Unknown role 'wizard'", ".supervisor/roles/")
    assert_nothing_written(repo, before)


def test_no_credentials(tmp_path: Path) -> None:
    repo = new_repo(tmp_path, "http://127.0.0.1:9", cli="claude")
    before = Workspace(repo).user_checkout_fingerprint()
    env = {"ANTHROPIC_API_KEY": "", "ANTHROPIC_AUTH_TOKEN": "", "HOME": str(tmp_path / "home")}
    result = supervisor("start-task", "x", "--yes", cwd=repo, env=env)
    refused(result, 3, "No credentials for the claude CLI", "ANTHROPIC_API_KEY")
    assert_nothing_written(repo, before)


def test_docker_unreachable(tmp_path: Path) -> None:
    repo = new_repo(tmp_path, "http://127.0.0.1:9", cli="claude")
    before = Workspace(repo).user_checkout_fingerprint()
    env = {"DOCKER_HOST": f"unix://{tmp_path}/no-docker.sock"}
    result = supervisor("start-task", "x", "--yes", cwd=repo, env=env)
    refused(result, 3, "Docker engine is not reachable", "docker info")
    assert_nothing_written(repo, before)


@pytest.mark.docker
def test_the_sandbox_image_missing(tmp_path: Path) -> None:
    require_sandbox()
    repo = new_repo(
        tmp_path, "http://127.0.0.1:9", "sandbox: {image: 'supervisor-absent:nope'}\n", cli="claude"
    )
    before = Workspace(repo).user_checkout_fingerprint()
    result = supervisor("start-task", "x", "--yes", cwd=repo)
    refused(result, 3, "supervisor-absent:nope' is not built", "scripts/setup.sh")
    assert_nothing_written(repo, before)


@pytest.mark.docker
def test_the_claude_binary_missing_from_the_image(tmp_path: Path) -> None:
    require_sandbox()
    # The base image is real and runs, but has no AI CLI in it.
    repo = new_repo(
        tmp_path, "http://127.0.0.1:9", "sandbox: {image: 'debian:bookworm-slim'}\n", cli="claude"
    )
    before = Workspace(repo).user_checkout_fingerprint()
    result = supervisor("start-task", "x", "--yes", cwd=repo)
    refused(result, 3, "'claude' CLI is not installed in the sandbox image")
    assert_nothing_written(repo, before)


@pytest.mark.docker
@pytest.mark.parametrize("command", [["resume", "99"], ["approve", "99"], ["status", "99"]])
def test_an_unknown_workflow_id(tmp_path: Path, command: list[str]) -> None:
    require_sandbox()
    repo = new_repo(tmp_path, "http://127.0.0.1:9", cli="claude")
    result = supervisor(*command, cwd=repo)
    refused(result, 2, "No workflow with id 99", "supervisor status")


def test_reject_needs_a_reason(tmp_path: Path) -> None:
    repo = new_repo(tmp_path, "http://127.0.0.1:9", cli="claude")
    result = supervisor("reject", "1", cwd=repo)
    assert result.returncode == 2
    assert "--reason" in result.stderr
