"""Configuration: the cascade, and a clear error naming file and fix for every bad input."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from supervisor.context.roles import load_role
from supervisor.core.config import load_settings
from supervisor.core.errors import ConfigError
from supervisor.workflow.loading import load_workflow

if TYPE_CHECKING:
    from pathlib import Path


@pytest.fixture(autouse=True)
def isolated_user_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    user = tmp_path / "user"
    user.mkdir()
    monkeypatch.setenv("SUPERVISOR_USER_DIR", str(user))
    return user


def _project(tmp_path: Path, files: dict[str, str]) -> Path:
    repo = tmp_path / "repo"
    for rel, text in files.items():
        path = repo / ".supervisor" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    repo.mkdir(exist_ok=True)
    return repo


def test_package_defaults_give_a_complete_workflow(tmp_path: Path) -> None:
    repo = _project(tmp_path, {})
    settings = load_settings(repo)
    workflow = load_workflow(repo, settings, gates=False)
    assert workflow.initial_step == "plan"
    assert settings.gates == {}  # no silent `make test`: a missing test command is reported
    with pytest.raises(ConfigError, match="gate 'test'") as info:
        load_workflow(repo, settings)
    assert "--no-gate" in info.value.hint
    assert settings.limits.step_timeout_seconds > 0


def test_project_overrides_user_which_overrides_package(
    tmp_path: Path, isolated_user_dir: Path
) -> None:
    (isolated_user_dir / "config.yaml").write_text(
        "gates: {test: 'pytest -q', lint: 'ruff check'}\nlimits: {gate_timeout_seconds: 99}\n"
    )
    repo = _project(tmp_path, {"config.yaml": "gates: {test: 'make check'}\n"})
    settings = load_settings(repo, {"cli": "claude"})
    assert settings.gates == {"test": "make check", "lint": "ruff check"}
    assert settings.limits.gate_timeout_seconds == 99
    assert settings.limits.step_timeout_seconds == 900  # untouched package default


def test_broken_yaml_names_the_file_and_line(tmp_path: Path) -> None:
    repo = _project(tmp_path, {"config.yaml": "gates:\n  test: make test\n bad: [unclosed\n"})
    with pytest.raises(ConfigError, match=r"config\.yaml is not valid YAML at line \d+") as info:
        load_settings(repo)
    assert "indentation" in info.value.hint


def test_unknown_keys_are_errors_not_silently_ignored(tmp_path: Path) -> None:
    repo = _project(tmp_path, {"config.yaml": "limits: {step_timeout_secs: 5}\n"})
    with pytest.raises(ConfigError, match="step_timeout_secs"):
        load_settings(repo)


def test_a_workflow_naming_an_unknown_role_is_refused(tmp_path: Path) -> None:
    repo = _project(
        tmp_path,
        {
            "workflow.yaml": "workflow:\n  initial_step: plan\n  steps:\n"
            "    plan: {role: architect_9000}\n"
        },
    )
    with pytest.raises(ConfigError, match="Unknown role 'architect_9000'"):
        load_workflow(repo, load_settings(repo))


def test_a_workflow_pointing_at_a_missing_step_is_refused(tmp_path: Path) -> None:
    repo = _project(
        tmp_path,
        {
            "workflow.yaml": "workflow:\n  initial_step: plan\n  steps:\n"
            "    plan: {role: planner, next: implemnt}\n"
        },
    )
    with pytest.raises(ConfigError, match="'implemnt', which is not a step"):
        load_workflow(repo, load_settings(repo))


def test_a_gate_without_a_configured_command_is_refused(tmp_path: Path) -> None:
    repo = _project(
        tmp_path,
        {"workflow.yaml": "workflow:\n  initial_step: lint\n  steps:\n    lint: {gate: lint}\n"},
    )
    with pytest.raises(ConfigError, match="gate 'lint'") as info:
        load_workflow(repo, load_settings(repo))
    assert "gates:" in info.value.hint


def test_a_step_must_be_exactly_one_kind(tmp_path: Path) -> None:
    repo = _project(
        tmp_path,
        {
            "workflow.yaml": "workflow:\n  initial_step: x\n  steps:\n"
            "    x: {role: planner, gate: test}\n"
        },
    )
    with pytest.raises(ConfigError, match="exactly one of"):
        load_workflow(repo, load_settings(repo))


def test_a_project_role_shadows_the_built_in_one(tmp_path: Path) -> None:
    repo = _project(
        tmp_path,
        {"roles/planner.yaml": "name: planner\nmodel: m-1\ntemplate: planning.j2\noutput: plan\n"},
    )
    assert load_role("planner", repo).model == "m-1"
    assert load_role("planner", None).model != "m-1"


def test_config_show_names_the_layer_of_every_value(
    tmp_path: Path, isolated_user_dir: Path
) -> None:
    import subprocess

    from cli_support import supervisor

    (isolated_user_dir / "config.yaml").write_text("limits: {gate_timeout_seconds: 99}\n")
    repo = _project(tmp_path, {"config.yaml": "gates: {test: 'make check'}\n"})
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(
        [
            "git",
            "-C",
            str(repo),
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "i",
        ],
        check=True,
    )
    result = supervisor("config", "show", "--repo", str(repo), "--cli", "claude", columns=250)
    assert result.returncode == 0, result.stderr
    rows = {line.split("\t")[0]: line for line in result.stdout.splitlines()}  # piped: plain rows
    assert str(repo / ".supervisor" / "config.yaml") in rows["gates.test"]
    assert str(isolated_user_dir / "config.yaml") in rows["limits.gate_timeout_seconds"]
    assert "command line" in rows["cli"]
    assert "package" in rows["limits.step_timeout_seconds"]


def test_settings_provenance_follows_the_cascade(tmp_path: Path, isolated_user_dir: Path) -> None:
    from supervisor.core.config import settings_provenance

    (isolated_user_dir / "config.yaml").write_text("gates: {test: a, lint: b}\n")
    repo = _project(tmp_path, {"config.yaml": "gates: {test: c}\n"})
    origin = settings_provenance(repo, {"cli": "claude"})
    assert origin["gates.test"] == str(repo / ".supervisor" / "config.yaml")
    assert origin["gates.lint"] == str(isolated_user_dir / "config.yaml")
    assert origin["cli"] == "command line"
    assert origin["limits.idle_timeout_seconds"].startswith("package")


def test_containers_run_under_runc_unless_the_user_chooses_gvisor(
    tmp_path: Path, isolated_user_dir: Path
) -> None:
    repo = _project(tmp_path, {})
    assert (load_settings(repo).sandbox.runtime, load_settings(repo).sandbox.worker_runtime) == (
        "runc",
        "runc",
    )
    (isolated_user_dir / "config.yaml").write_text(
        "sandbox: {runtime: runsc, worker_runtime: runsc-net}\n"
    )
    chosen = load_settings(repo).sandbox
    assert (chosen.runtime, chosen.worker_runtime) == ("runsc", "runsc-net")


@pytest.mark.parametrize("key", ["runtime", "worker_runtime"])
def test_a_repository_config_may_not_choose_the_container_runtime(
    tmp_path: Path, isolated_user_dir: Path, key: str
) -> None:
    (isolated_user_dir / "config.yaml").write_text("sandbox: {runtime: runsc}\n")
    repo = _project(tmp_path, {"config.yaml": f"sandbox: {{{key}: runc}}\n"})
    with pytest.raises(ConfigError, match=f"sets `sandbox.{key}`") as info:
        load_settings(repo)
    assert "the user's choice" in info.value.message
    assert str(isolated_user_dir / "config.yaml") in info.value.hint


def test_a_runtime_name_that_is_not_a_docker_runtime_name_is_refused(
    isolated_user_dir: Path,
) -> None:
    (isolated_user_dir / "config.yaml").write_text("sandbox: {runtime: '--privileged'}\n")
    with pytest.raises(ConfigError, match=r"sandbox\.runtime"):
        load_settings(None)
