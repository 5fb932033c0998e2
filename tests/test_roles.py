"""Roles: inheritance with the spec's merge semantics, lookup order, provenance, and errors."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest

from supervisor.context.roles import (
    PACKS_DIR,
    SCHEMA_PATH,
    RoleSpec,
    list_roles,
    load_role,
    resolve_role,
    role_json_schema,
)
from supervisor.core.errors import ConfigError

if TYPE_CHECKING:
    from pathlib import Path

BUILT_IN = [
    "planner",
    "implementer",
    "implementer_fast",
    "reviewer",
    "test_engineer",
    "tech_lead",
    "security_auditor",
    "investigator",
    "analyzer",
]


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SUPERVISOR_USER_DIR", str(tmp_path / "user"))
    root = tmp_path / "repo"
    (root / ".supervisor" / "roles").mkdir(parents=True)
    return root


def write_role(directory: Path, name: str, text: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.yaml"
    path.write_text(text)
    return path


def project_role(repo: Path, name: str, text: str) -> Path:
    return write_role(repo / ".supervisor" / "roles", name, text)


BASE = """
description: base
cli: claude
model: m-base
template: implement.j2
output: implementation
flags: [--a]
env: {A: "1", B: "1"}
strengths: [x]
system_prompt_additions: Base rule.
context:
  strategy: implementer_targeted
  include: ["src/**"]
  exclude: ["**/gen/**"]
  token_budget: 1000
gates:
  - {name: lint, command: "ruff check", on_fail: block}
"""


def test_every_built_in_role_resolves(repo: Path) -> None:
    for name in BUILT_IN:
        role = load_role(name, repo)
        assert role.name == name
        assert role.template and role.output
        for cli in ("claude", "codex", "gemini"):
            assert role.model_for(cli, cli_default=None)  # every built-in names a model per CLI


@pytest.mark.parametrize("pack", sorted(p.name for p in PACKS_DIR.iterdir()))
def test_every_pack_role_resolves_once_installed(repo: Path, pack: str) -> None:
    for source in (PACKS_DIR / pack / "roles").glob("*.yaml"):
        project_role(repo, source.stem, source.read_text())
        assert load_role(source.stem, repo).name == source.stem


def test_merge_semantics_field_by_field(repo: Path) -> None:
    project_role(repo, "base", BASE)
    project_role(
        repo,
        "child",
        """
extends: base
model: m-child
flags: [--b]
env: {B: "2", C: "3"}
strengths: [y]
system_prompt_additions: Child rule.
context:
  include: ["lib/**"]
  token_budget: 2000
gates:
  - {name: types, command: "mypy .", on_fail: retry}
""",
    )
    role = load_role("child", repo)
    assert role.model == "m-child"  # scalar: child wins
    assert role.cli == "claude"  # scalar not set by the child: inherited
    assert role.flags == ["--a", "--b"]  # list: parent then child
    assert role.strengths == ["x", "y"]
    assert role.env == {"A": "1", "B": "2", "C": "3"}  # dict: deep merge
    assert role.context.include == ["src/**", "lib/**"]  # nested list appends
    assert role.context.exclude == ["**/gen/**"]  # nested value inherited
    assert role.context.token_budget == 2000  # nested scalar overrides
    assert role.context.strategy == "implementer_targeted"
    assert role.system_prompt_additions == "Base rule.\nChild rule."  # concatenated
    assert [g.name for g in role.gates] == ["lint", "types"]
    assert role.gates[0].on_fail == "block"


def test_provenance_names_the_file_of_each_field(repo: Path) -> None:
    base = project_role(repo, "base", BASE)
    child = project_role(repo, "child", "extends: base\nmodel: m-child\nflags: [--b]\n")
    resolved = resolve_role("child", repo)
    assert resolved.provenance["model"] == str(child)
    assert resolved.provenance["template"] == str(base)
    assert str(base) in resolved.provenance["flags"] and str(child) in resolved.provenance["flags"]
    assert resolved.provenance["context.token_budget"] == str(base)
    assert [f.name for f in resolved.chain] == ["child", "base"]


def test_project_shadows_user_which_shadows_built_in(repo: Path, tmp_path: Path) -> None:
    write_role(tmp_path / "user" / "roles", "reviewer", "extends: reviewer\nmodel: m-user\n")
    assert load_role("reviewer", repo).model == "m-user"
    project_role(repo, "reviewer", "extends: reviewer\nmodel: m-project\n")
    resolved = resolve_role("reviewer", repo)
    assert resolved.role.model == "m-project"
    # A role extending its own name continues one layer down: project → user → built-in.
    assert [f.layer for f in resolved.chain] == ["project", "user", "package"]
    names = [(f.name, f.layer) for f in list_roles(repo)]
    assert names.index(("reviewer", "project")) < names.index(("reviewer", "package"))


def test_a_cycle_in_extends_is_named(repo: Path) -> None:
    project_role(repo, "a", "extends: b\n")
    project_role(repo, "b", "extends: c\n")
    project_role(repo, "c", "extends: a\n")
    with pytest.raises(ConfigError, match="a → b → c → a"):
        load_role("a", repo)


def test_a_built_in_role_cannot_extend_itself(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = repo.parent / "package_roles"
    write_role(package, "loop", "extends: loop\n")
    monkeypatch.setattr(
        "supervisor.context.roles.search_layers", lambda _repo: [("package", package, None)]
    )
    with pytest.raises(ConfigError, match="extends itself"):
        load_role("loop", repo)


def test_extending_an_unknown_role_names_the_file_and_the_role(repo: Path) -> None:
    path = project_role(repo, "orphan", "extends: nobody\n")
    with pytest.raises(ConfigError, match="extends unknown role 'nobody'") as info:
        load_role("orphan", repo)
    assert str(path) in info.value.message


def test_a_role_file_that_is_not_yaml_names_file_and_line(repo: Path) -> None:
    project_role(repo, "broken", "extends: implementer\nmodel: [unclosed\n")
    with pytest.raises(ConfigError, match=r"broken\.yaml is not valid YAML at line"):
        load_role("broken", repo)


def test_unknown_keys_fail_the_schema(repo: Path) -> None:
    project_role(repo, "typo", "extends: implementer\nmodle: x\n")
    with pytest.raises(ConfigError, match="modle"):
        load_role("typo", repo)


def test_a_role_missing_required_fields_after_inheritance(repo: Path) -> None:
    project_role(repo, "bare", "description: nothing else\n")
    with pytest.raises(ConfigError, match="has no template, output"):
        load_role("bare", repo)


def test_the_committed_json_schema_matches_the_model() -> None:
    assert json.loads(SCHEMA_PATH.read_text()) == role_json_schema()
    assert RoleSpec.model_config.get("extra") == "forbid"
