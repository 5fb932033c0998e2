"""The projects of a monorepo: what a change reaches, what a component may touch, and the
configs refused before anything runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from supervisor.core.config import Settings
from supervisor.core.errors import ConfigError
from supervisor.core.projects import ProjectMap


def projects(deps: dict[str, list[str]] | None = None, **extra: object) -> ProjectMap:
    return Settings.model_validate(
        {
            "projects": [
                {"name": "types", "path": "./packages/types/"},
                {"name": "lib", "path": "packages/lib"},
                {"name": "web", "path": "apps/web"},
                {"name": "docs", "path": "apps/docs"},
            ],
            "cross_project_dependencies": {
                k: {"depends_on": v}
                for k, v in (deps or {"lib": ["types"], "web": ["lib"]}).items()
            },
            **extra,
        }
    ).project_map()


def test_a_change_to_shared_types_is_gated_by_every_project_building_on_them() -> None:
    reached = projects().affected(["packages/types/index.ts"])
    assert [(a.project, a.reason) for a in reached] == [
        ("types", "changed (packages/types/index.ts)"),
        ("lib", "depends on types"),
        ("web", "depends on types, lib"),
    ]


def test_a_change_limited_to_one_app_reaches_no_other_project() -> None:
    assert [a.project for a in projects().affected(["apps/web/main.ts"])] == ["web"]
    assert projects().affected(["README.md"]) == []


def test_a_shared_path_reaches_every_project() -> None:
    reached = projects(shared_paths=["pnpm-lock.yaml"]).affected(["pnpm-lock.yaml"])
    assert [a.project for a in reached] == ["types", "lib", "web", "docs"]


def test_producers_come_before_consumers_and_equals_keep_the_configs_order() -> None:
    assert projects({"types": ["web"], "lib": ["web"]}).order() == ["web", "types", "lib", "docs"]
    assert projects().dependencies("web") == ["types", "lib"]
    assert projects().dependents(["types"]) == ["lib", "web"]


def test_a_component_touches_its_own_project_and_the_shared_paths_only() -> None:
    mapped = projects(shared_paths=["tsconfig.base.json"])
    assert mapped.may_touch("web", "apps/web/src/a.ts")
    assert mapped.may_touch("web", "tsconfig.base.json")
    assert not mapped.may_touch("web", "packages/types/index.ts")
    assert not mapped.may_touch("web", "apps/webby/x.ts")  # a prefix is not a directory


@pytest.mark.parametrize(
    ("deps", "said"),
    [
        ({"web": ["nope"]}, "names 'nope', which is not a project"),
        ({"ghost": ["web"]}, "names 'ghost', which is not a project"),
        ({"web": ["web"]}, "'web' depends on itself"),
        (
            {"types": ["web"], "web": ["lib"], "lib": ["types"]},
            "in a cycle: types -> web -> lib -> types",
        ),
    ],
)
def test_an_unknown_project_or_a_cycle_is_refused_naming_it(
    deps: dict[str, list[str]], said: str
) -> None:
    with pytest.raises(ConfigError, match=said.replace(">", ".")):
        projects(deps)


def test_overlapping_or_escaping_paths_and_twin_names_are_refused() -> None:
    with pytest.raises(ConfigError, match="overlap"):
        Settings.model_validate(
            {"projects": [{"name": "a", "path": "p"}, {"name": "b", "path": "p/q"}]}
        ).project_map()
    with pytest.raises(ConfigError, match="two projects are named 'a'"):
        Settings.model_validate(
            {"projects": [{"name": "a", "path": "p"}, {"name": "a", "path": "q"}]}
        ).project_map()
    for path in ("../elsewhere", "/abs", "."):
        with pytest.raises(ValueError, match="path"):
            Settings.model_validate({"projects": [{"name": "a", "path": path}]})


def test_a_project_path_that_does_not_exist_is_named_before_a_run(tmp_path: Path) -> None:
    (tmp_path / "packages" / "types").mkdir(parents=True)
    mapped = projects()
    with pytest.raises(ConfigError, match="'lib': its path 'packages/lib' is not a directory"):
        mapped.check_paths(tmp_path)
