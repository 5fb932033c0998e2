"""`supervisor doctor` reports what is, not what follows from a file it could not read (issue 59):
a configuration that is not YAML is said once, with where, and the workflow built from it is not
then reported missing a gate command it has; in the demo's repository, right after the demo
worked, the claude CLI pointed at the demo's scripted API is said to be that, not a failure to
find an Anthropic key the demo never needed. The real command line on real repositories; the
Docker engine is pointed at a socket that does not exist, so its rows fail fast and the checks
specified here run as they would beside a running engine."""

from __future__ import annotations

import json
import subprocess
from typing import TYPE_CHECKING, Any

import pytest
from cli_support import supervisor

from supervisor.lifecycle.demo import make_demo_repo, write_project_config

if TYPE_CHECKING:
    from pathlib import Path

NO_ENGINE = {"DOCKER_HOST": "unix:///nonexistent/docker.sock"}


@pytest.fixture(autouse=True)
def own_user(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SUPERVISOR_USER_DIR", str(tmp_path / "user"))
    (tmp_path / "user").mkdir()
    for key in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # no claude login here either


def doctor(repo: Path) -> tuple[dict[str, dict[str, Any]], str]:
    done = supervisor("doctor", "--json", "--repo", str(repo), env=NO_ENGINE)
    return {row["name"]: row for row in json.loads(done.stdout)}, done.stderr


def test_a_configuration_that_is_not_yaml_is_said_once_with_where(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "init"], check=True)
    config = repo / ".supervisor" / "config.yaml"
    config.parent.mkdir()
    config.write_text("gates:\n  test: pytest -q\nlimits:\n  step_timeout_seconds: [60\n")
    rows, _ = doctor(repo)
    assert rows["configuration"]["ok"] is False
    assert f"{config} is not valid YAML at line" in rows["configuration"]["detail"]
    workflow = rows["workflow"]
    assert "no command is configured" not in workflow["detail"], workflow
    assert "not checked" in workflow["detail"] and "configuration" in workflow["detail"]


def test_the_demo_repository_after_the_demo_reports_its_scripted_api_not_missing_keys(
    tmp_path: Path,
) -> None:
    repo = make_demo_repo(tmp_path / "calc")
    write_project_config(repo, "http://127.0.0.1:45678")  # as the demo leaves it
    rows, stderr = doctor(repo)
    claude = rows["claude credentials"]
    assert claude["ok"] is True and claude["warning"] is True, claude
    assert "demo" in claude["detail"] and "http://127.0.0.1:45678" in claude["detail"]
    assert "claude credentials" not in stderr  # not among what is missing
    assert rows["workflow"]["ok"] is True, rows["workflow"]
