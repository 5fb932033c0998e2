"""Workspace detection for `supervisor init`: each kind of monorepo's packages, their own stacks
and gates, and the dependencies their manifests declare; bad manifests are warnings naming the
file, and nothing outside the repository is reached."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest
from workspace_fixtures import GO, PNPM, UV, write

from supervisor.core.errors import ConfigError
from supervisor.project.workspaces import detect_workspaces

if TYPE_CHECKING:
    from pathlib import Path


def deps(found: object) -> dict[str, list[str]]:
    return {n: d.depends_on for n, d in found.dependencies().items()}  # type: ignore[attr-defined]


def test_a_pnpm_workspace_gives_each_package_its_stack_gates_and_dependencies(
    tmp_path: Path,
) -> None:
    found = detect_workspaces(write(tmp_path, PNPM))
    assert found.kinds == {"pnpm": "pnpm-workspace.yaml"}
    assert [(p.name, p.path, p.package_name) for p in found.packages] == [
        ("admin", "apps/admin", "@acme/admin"),
        ("web", "apps/web", "@acme/web"),
        ("types", "packages/types", "@acme/types"),
    ]
    web = found.packages[1]
    assert web.detection.gates == {"test": "pnpm test", "types": "pnpm run typecheck"}
    assert {"typescript", "vitest"} <= set(web.detection.frameworks)
    assert web.depends_on == {
        "types": "apps/web/package.json: dependencies @acme/types workspace:*"
    }
    assert deps(found) == {"admin": ["types"], "web": ["types"]}
    assert found.project_map().order() == ["types", "admin", "web"]
    assert "pnpm-lock.yaml" in found.shared_paths and "tsconfig.base.json" in found.shared_paths
    assert found.warnings == []  # the negated fixtures folder is simply not a member


def test_a_uv_workspace_links_members_by_workspace_source(tmp_path: Path) -> None:
    found = detect_workspaces(write(tmp_path, UV))
    assert found.kinds == {"uv": "pyproject.toml ([tool.uv.workspace] members)"}
    assert [(p.name, p.package_name) for p in found.packages] == [
        ("api", "acme-api"),
        ("core", "acme-core"),
    ]
    assert deps(found) == {"api": ["core"]}
    assert found.packages[0].detection.gates["test"] == "python3 -m pytest -q"
    assert "[tool.uv.sources] acme_core {workspace = true}" in found.packages[0].depends_on["core"]
    assert found.shared_paths == ["pyproject.toml", "uv.lock"]


def test_a_go_workspace_links_modules_by_require_and_replace(tmp_path: Path) -> None:
    found = detect_workspaces(write(tmp_path, GO))
    assert [(p.name, p.path) for p in found.packages] == [
        ("server", "cmd/server"),
        ("lib", "lib"),
    ]
    assert deps(found) == {"server": ["lib"]}
    assert found.packages[0].detection.gates == {"test": "go test ./...", "lint": "go vet ./..."}
    assert found.shared_paths == ["go.work"]


def test_npm_workspaces_in_the_packages_form_and_file_dependencies(tmp_path: Path) -> None:
    found = detect_workspaces(
        write(
            tmp_path,
            {
                "package.json": json.dumps({"workspaces": {"packages": ["libs/*"]}}),
                "libs/a/package.json": json.dumps({"name": "a", "dependencies": {"b": "1.0.0"}}),
                "libs/b/package.json": json.dumps(
                    {"name": "b", "dependencies": {"c": "file:../c"}}
                ),
                "libs/c/package.json": json.dumps({"name": "not-c"}),
                "libs/readme/notes.txt": "not a package: no package.json\n",
            },
        )
    )
    assert found.kinds == {"npm": "package.json (workspaces)"}
    assert [p.name for p in found.packages] == ["a", "b", "c"]
    assert deps(found) == {"a": ["b"], "b": ["c"]}


def test_a_cargo_workspace_with_path_and_workspace_dependencies(tmp_path: Path) -> None:
    found = detect_workspaces(
        write(
            tmp_path,
            {
                "Cargo.toml": '[workspace]\nmembers = ["crates/*"]\nexclude = ["crates/old"]\n'
                '[workspace.dependencies]\ncore = { path = "crates/core" }\n',
                "crates/core/Cargo.toml": '[package]\nname = "core"\n',
                "crates/cli/Cargo.toml": '[package]\nname = "cli"\n[dependencies]\n'
                "core = { workspace = true }\n",
                "crates/net/Cargo.toml": '[package]\nname = "net"\n'
                '[target."cfg(unix)".dev-dependencies]\ncore = { path = "../core" }\n',
                "crates/old/Cargo.toml": '[package]\nname = "old"\n',
            },
        )
    )
    assert [p.name for p in found.packages] == ["cli", "core", "net"]
    assert deps(found) == {"cli": ["core"], "net": ["core"]}
    assert found.packages[0].detection.gates["test"] == "cargo test"


def test_poetry_and_pdm_packages_joined_by_path_dependencies(tmp_path: Path) -> None:
    found = detect_workspaces(
        write(
            tmp_path,
            {
                "services/api/pyproject.toml": '[tool.poetry]\nname = "api"\n'
                "[tool.poetry.dependencies]\n"
                'models = { path = "../../libs/models", develop = true }\n',
                "libs/models/pyproject.toml": '[project]\nname = "models"\n'
                'dependencies = ["util @ file:///${PROJECT_ROOT}/../util"]\n[tool.pdm]\n',
                "libs/util/pyproject.toml": '[project]\nname = "util"\n[tool.pdm]\n',
                "libs/unrelated/pyproject.toml": '[project]\nname = "unrelated"\n',
            },
        )
    )
    assert sorted((p.name, p.kind) for p in found.packages) == [
        ("api", "poetry"),
        ("models", "pdm"),
        ("util", "pdm"),
    ]
    assert deps(found) == {"api": ["models"], "models": ["util"]}


def test_a_plain_repository_has_no_workspaces(tmp_path: Path) -> None:
    found = detect_workspaces(write(tmp_path, {"package.json": '{"name": "x"}', "a.py": ""}))
    assert not found and found.kinds == {} and found.shared_paths == []


def test_a_manifest_that_does_not_parse_is_a_warning_naming_it(tmp_path: Path) -> None:
    found = detect_workspaces(
        write(
            tmp_path,
            {
                **PNPM,
                "apps/web/package.json": "{not json",
                "Cargo.toml": "[workspace\nmembers = 1",
                "go.work": "use ./nowhere\n",
            },
        )
    )
    assert [p.name for p in found.packages] == ["admin", "web", "types"]  # web still a member
    assert any(w.startswith("apps/web/package.json is not valid JSON") for w in found.warnings)
    assert any(w.startswith("Cargo.toml is not valid TOML") for w in found.warnings)
    assert deps(found) == {"admin": ["types"]}


def test_a_member_pattern_leaving_the_repository_is_skipped_with_a_warning(
    tmp_path: Path,
) -> None:
    outside = write(tmp_path / "outside", {"x/package.json": '{"name": "x"}'})
    repo = write(
        tmp_path / "repo",
        {
            "pnpm-workspace.yaml": "packages: ['../outside/*', '/etc/*', 'apps/*']\n",
            "apps/a/package.json": '{"name": "a", "dependencies": '
            '{"x": "file:../../../outside/x"}}',
        },
    )
    (repo / "apps" / "link").symlink_to(outside / "x")
    found = detect_workspaces(repo)
    assert [p.path for p in found.packages] == ["apps/a"]
    assert deps(found) == {}
    assert sum("leaves the repository" in w for w in found.warnings) == 2


def test_a_nested_member_is_left_out_with_a_warning(tmp_path: Path) -> None:
    found = detect_workspaces(
        write(
            tmp_path,
            {
                "pnpm-workspace.yaml": "packages: ['apps/**']\n",
                "apps/web/package.json": '{"name": "web"}',
                "apps/web/e2e/package.json": '{"name": "web-e2e"}',
            },
        )
    )
    assert [p.path for p in found.packages] == ["apps/web"]
    assert found.warnings == [
        "apps/web/e2e is inside the package apps/web: it is left out (a project owns its whole "
        "directory)."
    ]


def test_two_packages_of_one_directory_name_are_named_by_their_paths(tmp_path: Path) -> None:
    found = detect_workspaces(
        write(
            tmp_path,
            {
                "pnpm-workspace.yaml": "packages: ['apps/*', 'libs/*']\n",
                "apps/ui/package.json": '{"name": "app-ui"}',
                "libs/ui/package.json": '{"name": "lib-ui"}',
            },
        )
    )
    assert [p.name for p in found.packages] == ["apps/ui", "libs/ui"]
    found.project_map()  # valid project names


def test_directory_names_that_clean_up_alike_still_get_their_own_names(tmp_path: Path) -> None:
    found = detect_workspaces(
        write(
            tmp_path,
            {
                "pnpm-workspace.yaml": "packages: ['p/*']\n",
                "p/a b/package.json": '{"name": "one"}',
                "p/a-b/package.json": '{"name": "two"}',
                "p/_x/package.json": '{"name": "three"}',
            },
        )
    )
    assert [p.name for p in found.packages] == ["x", "p/a-b", "p/a-b-2"]
    found.project_map()


def test_packages_depending_on_each_other_in_a_cycle_are_named(tmp_path: Path) -> None:
    found = detect_workspaces(
        write(
            tmp_path,
            {
                "pnpm-workspace.yaml": "packages: ['p/*']\n",
                "p/a/package.json": '{"name": "a", "dependencies": {"b": "workspace:*"}}',
                "p/b/package.json": '{"name": "b", "devDependencies": {"a": "workspace:*"}}',
            },
        )
    )
    with pytest.raises(ConfigError, match=r"cycle: a -> b -> a"):
        found.project_map()


def test_an_oversized_manifest_is_not_read(tmp_path: Path) -> None:
    found = detect_workspaces(
        write(tmp_path, {"pnpm-workspace.yaml": "packages: ['a']\n#" + "x" * 1_100_000})
    )
    assert not found
    assert found.warnings == [
        "pnpm-workspace.yaml larger than 1000 kB, not read; its workspace information was skipped."
    ]
