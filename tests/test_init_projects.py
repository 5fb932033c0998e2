"""`supervisor init` on a monorepo: the detected packages are shown with their gates and each
dependency's manifest line, asked for once, and written as `projects:` and
`cross_project_dependencies:` that the settings load back; bad projects stop init and
start-task before anything is written or created."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import TYPE_CHECKING

import pytest
import yaml
from cli_support import supervisor
from workspace_fixtures import GO, PNPM, UV, commit, write

from supervisor.core.config import load_settings
from supervisor.lifecycle.initialize import initialize, pack_roles

if TYPE_CHECKING:
    from pathlib import Path


@pytest.fixture(autouse=True)
def user_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SUPERVISOR_USER_DIR", str(tmp_path / "user"))
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")


def test_init_writes_the_pnpm_packages_as_projects_the_settings_load(tmp_path: Path) -> None:
    repo = write(tmp_path / "repo", PNPM)
    report = initialize(repo)
    assert [p.name for p in report.workspaces.packages] == ["admin", "web", "types"]
    settings = load_settings(repo)
    projects = {p.name: p for p in settings.projects}
    assert projects["web"].path == "apps/web"
    assert projects["web"].gates == {"test": "pnpm test", "types": "pnpm run typecheck"}
    assert projects["web"].roles == pack_roles("web_frontend")  # its pack's, the pack chosen
    assert projects["types"].roles == []  # no pack of its own
    assert settings.cross_project_dependencies["web"].depends_on == ["types"]
    assert settings.project_map().order() == ["types", "admin", "web"]
    assert "pnpm-lock.yaml" in settings.shared_paths
    text = (repo / ".supervisor" / "config.yaml").read_text()
    assert "# web depends on types: apps/web/package.json: dependencies @acme/types" in text


@pytest.mark.parametrize(("files", "order"), [(UV, ["core", "api"]), (GO, ["lib", "server"])])
def test_init_writes_uv_and_go_workspaces_in_build_order(
    tmp_path: Path, files: dict[str, str], order: list[str]
) -> None:
    repo = write(tmp_path / "repo", files)
    initialize(repo)
    assert load_settings(repo).project_map().order() == order


def test_packs_of_the_packages_are_suggested_for_the_repository(tmp_path: Path) -> None:
    repo = write(
        tmp_path / "repo",
        {
            "pnpm-workspace.yaml": "packages: ['apps/*']\n",
            "apps/site/package.json": '{"name": "site", "dependencies": {"react": "^18"}}',
        },
    )
    report = initialize(repo)
    assert "web_frontend" in report.packs


def test_a_single_project_repository_gets_no_projects(tmp_path: Path) -> None:
    repo = write(tmp_path / "repo", {"pyproject.toml": '[project]\nname = "x"\n'})
    initialize(repo)
    config = yaml.safe_load((repo / ".supervisor" / "config.yaml").read_text()) or {}
    assert "projects" not in config


def test_a_cycle_between_packages_stops_init_before_it_writes_anything(tmp_path: Path) -> None:
    repo = write(
        tmp_path / "repo",
        {
            "pnpm-workspace.yaml": "packages: ['p/*']\n",
            "p/a/package.json": '{"name": "a", "dependencies": {"b": "workspace:*"}}',
            "p/b/package.json": '{"name": "b", "dependencies": {"a": "workspace:*"}}',
        },
    )
    result = supervisor("init", "--yes", "--no-check-gates", "--repo", str(commit(repo)))
    message = " ".join(result.stderr.split())
    assert result.returncode == 2, result.stderr
    assert "the workspace manifests: the projects depend on each other in a cycle: a -> b -> a" in (
        message
    )
    assert "remove one of these `depends_on`" in message
    assert not (repo / ".supervisor").exists()


def test_init_as_a_process_shows_projects_and_dependencies_then_writes_them(
    tmp_path: Path,
) -> None:
    repo = commit(write(tmp_path / "repo", {**PNPM, "apps/web/package.json": "{broken"}))
    done = subprocess.run(
        [sys.executable, "-m", "supervisor", "init", "--yes", "--no-check-gates", "--repo", repo],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "200"},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert out.index("Detected") < out.index("Projects") < out.index("role packs")
    assert "pnpm: pnpm-workspace.yaml" in out
    assert "admin" in out and "apps/admin (@acme/admin): node" in out
    assert "gate test: pnpm test  (in apps/admin)" in out
    assert "depends on types  (apps/admin/package.json: dependencies @acme/types workspace:^)" in (
        out
    )
    assert "apps/web/package.json is not valid JSON" in out  # a warning, not a crash
    assert "Projects to write" not in out  # no questions with --yes
    assert "admin, web, types (in .supervisor/config.yaml)" in out
    config = yaml.safe_load((repo / ".supervisor" / "config.yaml").read_text())
    assert [p["name"] for p in config["projects"]] == ["admin", "web", "types"]
    assert config["cross_project_dependencies"] == {"admin": {"depends_on": ["types"]}}


def test_start_task_refuses_a_project_path_that_is_not_there(tmp_path: Path) -> None:
    repo = commit(write(tmp_path / "repo", {**PNPM}))
    initialize(repo)
    config = repo / ".supervisor" / "config.yaml"
    config.write_text(config.read_text().replace("path: apps/web", "path: apps/webb"))
    result = supervisor("start-task", "Add a greeting", "--yes", cwd=repo)
    message = " ".join(result.stderr.split())
    assert result.returncode == 2, result.stderr
    assert "Project 'web': its path 'apps/webb' is not a directory" in message
    assert "Fix `path:` in `projects:`" in message
    assert not (repo / ".supervisor" / "state.db").exists()


def test_start_task_refuses_a_cycle_naming_its_members(tmp_path: Path) -> None:
    repo = commit(write(tmp_path / "repo", {**PNPM}))
    initialize(repo)
    config = repo / ".supervisor" / "config.yaml"
    data = yaml.safe_load(config.read_text())
    data["cross_project_dependencies"]["types"] = {"depends_on": ["web"]}
    config.write_text(yaml.safe_dump(data))
    result = supervisor("start-task", "Add a greeting", "--yes", cwd=repo)
    message = " ".join(result.stderr.split())
    assert result.returncode == 2, result.stderr
    assert "cycle: " in message and "types" in message and "web" in message
    assert not (repo / ".supervisor" / "state.db").exists()
