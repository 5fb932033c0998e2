"""Context per project in a monorepo: a component of one project sees its own project's files
and the public surface of the projects it declares a dependency on, never another project's
files; a repository without projects, or a component without one, sees the whole repository."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from workspace_fixtures import GO, PNPM, UV, commit, write

from supervisor.context.assemble import DirFiles, build_pack
from supervisor.context.project_scope import ProjectScope, for_component, public_surface
from supervisor.context.roles import Role, RoleContext
from supervisor.core.config import load_settings
from supervisor.core.projects import ProjectDef, ProjectDependency, ProjectMap
from supervisor.lifecycle.initialize import initialize


def reader(files: dict[str, str]):  # type: ignore[no-untyped-def]
    return files.get


PNPM_MAP = ProjectMap.build(
    [
        ProjectDef(name="types", path="packages/types"),
        ProjectDef(name="web", path="apps/web"),
        ProjectDef(name="admin", path="apps/admin"),
    ],
    {
        "web": ProjectDependency(depends_on=["types"]),
        "admin": ProjectDependency(depends_on=["types"]),
    },
    ["pnpm-lock.yaml"],
)


def test_a_component_sees_its_project_root_files_and_shared_paths_not_another_project() -> None:
    scope = ProjectScope.of(PNPM_MAP, "web")
    assert scope is not None
    assert [d.name for d in scope.dependencies] == ["types"]
    assert scope.visible("apps/web/src/greet.ts")
    assert scope.visible("README.md") and scope.visible("pnpm-lock.yaml")
    assert not scope.visible("apps/admin/src/audit.ts")
    assert not scope.visible("packages/types/src/internal/cache.ts")  # only through its surface
    assert not scope.visible("tools/scripts/release.sh")  # outside every project, not at the root


def test_a_typescript_packages_surface_is_its_manifest_entry_and_what_the_entry_exports() -> None:
    files = {k: v for k, v in PNPM.items() if k.startswith("packages/types/")}
    assert public_surface("packages/types", set(files), reader(files)) == [
        "packages/types/package.json",
        "packages/types/src/index.ts",
        "packages/types/src/user.ts",
    ]


def test_a_built_entry_point_maps_to_its_source_and_declaration_files_count() -> None:
    files = {
        "lib/package.json": '{"name": "lib", "exports": {".": {"types": "./dist/index.d.ts", '
        '"import": "./dist/index.js"}}}',
        "lib/src/index.ts": "export const a = 1;\n",
        "lib/src/deep/impl.ts": "export const b = 2;\n",
        "lib/globals.d.ts": "declare const G: number;\n",
    }
    assert public_surface("lib", set(files), reader(files)) == [
        "lib/package.json",
        "lib/src/index.ts",
        "lib/globals.d.ts",
    ]


def test_a_python_packages_surface_is_its_init_and_what_it_re_exports() -> None:
    files = {k: v for k, v in UV.items() if k.startswith("packages/core/")}
    assert public_surface("packages/core", set(files), reader(files)) == [
        "packages/core/pyproject.toml",
        "packages/core/src/acme_core/__init__.py",
        "packages/core/src/acme_core/money.py",
    ]


def test_a_go_modules_surface_is_its_root_package_without_tests() -> None:
    files = {k: v for k, v in GO.items() if k.startswith("lib/")}
    assert public_surface("lib", set(files), reader(files)) == ["lib/go.mod", "lib/lib.go"]


def test_no_projects_or_no_project_named_means_the_whole_repository(tmp_path: Path) -> None:
    repo = write(tmp_path / "repo", PNPM)
    initialize(repo)
    settings = load_settings(repo)
    assert for_component(settings, SimpleNamespace(project="web")) is not None
    assert for_component(settings, SimpleNamespace(id="c1")) is None  # a plan without projects
    assert for_component(settings, None) is None
    assert for_component(settings, SimpleNamespace(project="nope")) is None
    assert ProjectScope.of(ProjectMap(), "web") is None


def role(budget: int) -> Role:
    return Role(
        name="implementer",
        model="m",
        template="implement.j2",
        output="implementation",
        context=RoleContext(strategy="implementer_targeted", token_budget=budget),
    )


@pytest.fixture(scope="module")
def pnpm_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return commit(write(tmp_path_factory.mktemp("mono") / "repo", PNPM))


def test_repomix_packs_webs_files_and_the_types_surface_but_not_admin(pnpm_repo: Path) -> None:
    scope = ProjectScope.of(PNPM_MAP, "web")
    pack = build_pack(
        DirFiles(pnpm_repo),
        role(50_000),
        repo=pnpm_repo,
        prompt_tokens=100,
        targets=["apps/web/src/greet.ts"],
        scope=scope,
    )
    assert "apps/web/src/greet.ts" in pack.files
    assert "apps/web/src/greet.test.ts" in pack.files  # related: the target's test
    assert {"packages/types/src/index.ts", "packages/types/src/user.ts"} <= set(pack.files)
    assert "interface User" in pack.text
    assert not any(f.startswith("apps/admin/") for f in pack.files)
    assert "ADMIN_SECRET_SAUCE" not in pack.text and "apps/admin" not in pack.text  # nor the tree
    assert "packages/types/src/internal/cache.ts" not in pack.text
    assert pack.summary()["project"] == "web" and pack.summary()["surface_of"] == ["types"]
    assert pack.text.startswith("<project_scope>\nThis component belongs to project 'web'")
    assert "builds on project 'types' (packages/types/)" in pack.text
    unscoped = build_pack(
        DirFiles(pnpm_repo),
        role(50_000),
        repo=pnpm_repo,
        prompt_tokens=100,
        targets=["apps/web/src/greet.ts"],
    )
    assert "apps/admin/src/audit.ts" in unscoped.text  # the tree lists it without a scope
    assert "project" not in unscoped.summary()


def test_a_tight_budget_prunes_the_surface_before_the_components_own_files(
    pnpm_repo: Path,
) -> None:
    scope = ProjectScope.of(PNPM_MAP, "web")
    args = {"repo": pnpm_repo, "prompt_tokens": 100, "targets": ["apps/web/src/greet.ts"]}
    full = build_pack(DirFiles(pnpm_repo), role(50_000), scope=scope, **args)  # type: ignore[arg-type]
    tight = build_pack(
        DirFiles(pnpm_repo),
        role(100 + full.tokens - 60),
        scope=scope,
        **args,  # type: ignore[arg-type]
    )
    sections = [p["section"] for p in tight.pruned]
    assert sections and "target" not in sections
    assert "apps/web/src/greet.ts" in tight.files
    assert tight.prompt_tokens + tight.tokens <= tight.budget


def test_the_context_preview_packs_as_for_a_component_of_a_project(tmp_path: Path) -> None:
    from cli_support import supervisor

    repo = write(tmp_path / "repo", PNPM)
    initialize(repo)
    commit(repo)
    env = {"SUPERVISOR_USER_DIR": str(tmp_path / "user")}
    args = ["context", "implementer", "--target", "apps/web/src/greet.ts", "--json"]
    result = supervisor(*args, "--project", "web", cwd=repo, env=env)
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["project"] == "web" and summary["surface_of"] == ["types"]
    assert "packages/types/src/user.ts" in summary["files"]
    assert not any(f.startswith("apps/admin/") for f in summary["files"])
    wrong = supervisor(*args, "--project", "mobile", cwd=repo, env=env)
    assert wrong.returncode == 2
    assert "There is no project named 'mobile' (the projects are: admin, web, types)" in " ".join(
        wrong.stderr.split()
    )


def test_attack_a_dependency_cannot_pull_another_projects_files_into_the_surface() -> None:
    """A package's manifest and entry point (the repository's, or a worker's change to them)
    name files of another project and outside the repository: the surface stays inside the
    package, so a component of `web` still never sees `admin`."""
    files = {
        **{k: v for k, v in PNPM.items() if k.startswith(("packages/types/", "apps/admin/"))},
        "packages/types/package.json": '{"name": "@acme/types", "types": "../../apps/admin/'
        'src/audit.ts", "exports": {".": "./src/index.ts", "./x": "/etc/passwd"}}',
        "packages/types/src/index.ts": "export * from '../../../apps/admin/src/audit';\n"
        "export * from './user';\n",
    }
    scope = ProjectScope.of(PNPM_MAP, "web")
    assert scope is not None
    assert scope.surface(set(files), reader(files)) == [
        "packages/types/package.json",
        "packages/types/src/index.ts",
        "packages/types/src/user.ts",
    ]
