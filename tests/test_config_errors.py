"""A configuration a person got wrong is said in their words (issue 59): the file that holds the
mistake, the key's path in it, what the key must be, and for a misspelt key the setting it was
probably meant to be (from the schema's own keys), never pydantic's "Extra inputs are not
permitted". Real YAML files in a real repository layout and user folder."""

from __future__ import annotations

import subprocess
from typing import TYPE_CHECKING

import pytest
from cli_support import supervisor

from supervisor.core.config import load_settings
from supervisor.core.errors import ConfigError
from supervisor.workflow.loading import load_workflow

if TYPE_CHECKING:
    from pathlib import Path

PYDANTIC = ("Extra inputs are not permitted", "Input should be", "Field required", "[type=")


@pytest.fixture(autouse=True)
def user_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    user = tmp_path / "user"
    user.mkdir()
    monkeypatch.setenv("SUPERVISOR_USER_DIR", str(user))
    return user


def project(tmp_path: Path, config: str) -> tuple[Path, Path]:
    repo = tmp_path / "repo"
    path = repo / ".supervisor" / "config.yaml"
    path.parent.mkdir(parents=True)
    path.write_text(config)
    return repo, path


def refused(repo: Path) -> ConfigError:
    with pytest.raises(ConfigError) as raised:
        load_settings(repo)
    said = f"{raised.value.message} {raised.value.hint}"
    for word in PYDANTIC:
        assert word not in said, said
    return raised.value


def test_a_misspelt_key_names_the_file_the_key_and_what_it_was_meant_to_be(
    tmp_path: Path,
) -> None:
    repo, path = project(tmp_path, "limits:\n  step_timeout_secs: 60\n")
    error = refused(repo)
    assert str(path) in error.message
    assert "`limits.step_timeout_secs` is not a setting" in error.message
    assert "did you mean `limits.step_timeout_seconds`?" in error.message


def test_a_misspelt_key_in_the_user_config_names_that_file(tmp_path: Path, user_dir: Path) -> None:
    (user_dir / "config.yaml").write_text("notifcations:\n  webhook: http://127.0.0.1:9\n")
    repo, path = project(tmp_path, "cli: claude\n")
    error = refused(repo)
    assert str(user_dir / "config.yaml") in error.message and str(path) not in error.message
    assert "`notifcations` is not a setting; did you mean `notifications`?" in error.message


def test_a_key_like_nothing_known_lists_the_keys_that_are(tmp_path: Path) -> None:
    repo, _ = project(tmp_path, "sandbox:\n  zzzqqq: 1\n")
    error = refused(repo)
    assert "`sandbox.zzzqqq` is not a setting" in error.message
    assert "did you mean" not in error.message
    assert "dependency_changes" in error.message and "workspace" in error.message


def test_a_value_of_the_wrong_kind_says_what_it_must_be(tmp_path: Path) -> None:
    repo, path = project(
        tmp_path, "limits:\n  max_parallel_components: three\n  component_scope: replann\n"
    )
    error = refused(repo)
    assert str(path) in error.message
    assert "`limits.max_parallel_components` must be a whole number, not 'three'" in error.message
    assert "`limits.component_scope` must be one of 'feedback', 'replan', 'allow'" in error.message
    assert "did you mean 'replan'?" in error.message


def test_a_misspelt_step_field_in_a_workflow_names_the_step(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / ".supervisor").mkdir(parents=True)
    workflow = repo / ".supervisor" / "workflow.yaml"
    workflow.write_text(
        "workflow:\n  initial_step: implement\n  steps:\n"
        "    implement: {role: implementer, nxt: commit}\n    commit: {action: commit}\n"
    )
    with pytest.raises(ConfigError) as raised:
        load_workflow(repo, load_settings(repo), gates=False)
    said = raised.value.message
    assert str(workflow) in said
    assert "`steps.implement.nxt` is not a setting; did you mean `steps.implement.next`?" in said
    assert not any(word in said for word in PYDANTIC), said


def test_the_command_line_says_it_the_same_way(tmp_path: Path) -> None:
    repo, path = project(tmp_path, "limits:\n  step_timeout_secs: 60\n")
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "init"], check=True)
    shown = supervisor("config", "show", "--repo", str(repo))
    assert shown.returncode == 2
    text = " ".join(shown.stderr.split())
    assert f"{path}: `limits.step_timeout_secs` is not a setting" in text
    assert "did you mean `limits.step_timeout_seconds`?" in text
    assert "Extra inputs" not in text
