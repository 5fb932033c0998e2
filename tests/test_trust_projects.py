"""The projects of a repository's config, through the trust map: a project's `sandbox.image`
decides where the keys go and needs trust like the repository's own; its gates run only in the
gate sandbox and its roles, paths and dependencies are validated data, needing none."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from cli_support import supervisor

from supervisor.core import trustmap
from supervisor.core.config import load_settings
from supervisor.core.errors import ConfigError
from supervisor.guard.trust import UntrustedConfigError, require_trusted, trust
from supervisor.lifecycle.demo import make_demo_repo

if TYPE_CHECKING:
    from pathlib import Path

PROJECTS = """\
projects:
  - name: calc
    path: pkg
    roles: [implementer]
    gates: {test: 'python3 -m pytest -q'}
{sandbox}
cross_project_dependencies: {}
shared_paths: [pyproject.toml]
"""


@pytest.fixture(autouse=True)
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SUPERVISOR_USER_DIR", str(tmp_path / "user"))
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    repo = make_demo_repo(tmp_path / "repo")
    (repo / "pkg").mkdir()
    return repo


def write_config(repo: Path, sandbox: str = "") -> None:
    path = repo / ".supervisor" / "config.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(PROJECTS.replace("{sandbox}", sandbox))


def test_each_new_setting_has_its_class() -> None:
    classes = {
        key: trustmap.setting(key).concern  # type: ignore[union-attr]
        for key in (
            "projects.web.sandbox.image",
            "projects.web.gates.test",
            "gates.test",
            "projects.web.roles",
            "projects.web.path",
            "cross_project_dependencies.web.depends_on",
            "shared_paths",
        )
    }
    assert classes == {
        "projects.web.sandbox.image": "routing",
        "projects.web.gates.test": "sandbox-only",
        "gates.test": "sandbox-only",
        "projects.web.roles": "data",
        "projects.web.path": "data",
        "cross_project_dependencies.web.depends_on": "data",
        "shared_paths": "data",
    }


def test_a_projects_gates_roles_and_paths_need_no_trust(repo: Path) -> None:
    write_config(repo)
    require_trusted(repo)
    assert load_settings(repo).projects[0].gates == {"test": "python3 -m pytest -q"}


def test_a_projects_image_stops_start_task_until_trusted(repo: Path) -> None:
    write_config(repo, "    sandbox: {image: 'attacker/image:latest'}")
    result = supervisor("start-task", "Add subtract", "--yes", cwd=repo)
    message = " ".join(result.stderr.split())
    assert result.returncode == 2, result.stderr
    assert 'projects.calc.sandbox.image: (not trusted) -> "attacker/image:latest"' in message
    assert f"supervisor trust --repo {repo}" in message
    assert not (repo / ".supervisor" / "state.db").exists()
    trust(repo)
    require_trusted(repo)
    write_config(repo, "    sandbox: {image: 'attacker/other:latest'}")
    with pytest.raises(UntrustedConfigError, match="changed since you trusted it"):
        require_trusted(repo)


@pytest.mark.parametrize("role", ["../../../../tmp/evil", "roles/x", ".hidden", "a b"])
def test_a_project_role_is_a_name_never_a_path(repo: Path, role: str) -> None:
    path = repo / ".supervisor" / "config.yaml"
    path.parent.mkdir(parents=True)
    path.write_text(f"projects:\n  - name: calc\n    path: pkg\n    roles: ['{role}']\n")
    with pytest.raises(ConfigError, match="roles"):
        load_settings(repo)
