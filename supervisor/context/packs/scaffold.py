"""`role init` (a new pack's files) and `role check` (a pack as an installer would see it).

`check` holds a pack to everything an install and a task would: the manifest against the
schema, no refused key, every role a valid role file whose `extends` chain resolves (within the
pack, then the installed packs, then the built-in roles), and every template compiling and
rendering in the same sandboxed environment a task renders it in.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from supervisor.context.packs.manifest import MANIFEST, NAME, Pack, load_pack
from supervisor.core.config import read_yaml, validate
from supervisor.core.errors import ConfigError

if TYPE_CHECKING:
    from supervisor.context.roles import Role

_MANIFEST = """\
name: {name}
version: 0.1.0
description: What these roles are for.
author: you
keywords: []
roles: [{role}]
templates: [{role}.j2]
requires:
  supervisor: ">=0.1"
  roles: {{}}  # other packs by name and version range, e.g. {{base-reviewer: "^1.0"}}
"""
_ROLE = """\
extends: reviewer
description: A reviewer with this pack's focus.
template: {role}.j2
system_prompt_additions: |
  Say what this reviewer looks for.
"""
_TEMPLATE = '{% extends "review_strict.j2" %}\n'


def init(target: Path, name: str) -> list[Path]:
    import re

    if not re.match(NAME, name):
        raise ConfigError(
            f"'{name}' is not a pack name.",
            "Use lower-case letters, digits, '-' and '_' (at most 64), starting with a letter "
            "or digit.",
        )
    if (target / MANIFEST).exists():
        raise ConfigError(f"{target} holds a pack already.", "Choose another folder.")
    role = name.replace("-", "_") + "_reviewer"
    files = {
        target / MANIFEST: _MANIFEST.format(name=name, role=role),
        target / "roles" / f"{role}.yaml": _ROLE.format(role=role),
        target / "templates" / f"{role}.j2": _TEMPLATE,
    }
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return list(files)


@dataclass
class CheckReport:
    pack: Pack
    roles: dict[str, list[str]] = field(default_factory=dict)
    """Each role and its `extends` chain."""


def check(root: Path, repo: Path | None) -> CheckReport:
    pack = load_pack(root)
    report = CheckReport(pack)
    for role in pack.manifest.roles:
        chain, merged = _resolve(pack, role, repo)
        report.roles[role] = chain
        template = merged.get("template")
        if isinstance(template, str) and pack.template_path(template).is_file():
            _render(pack.template_path(template), _sample_role(role, merged))
    for template in pack.manifest.templates:
        _render(pack.template_path(template), _sample_role("sample", {}))
    for strategy in pack.manifest.context_strategies:
        path = root / "context_strategies" / f"{strategy}.yaml"
        from supervisor.context.assemble import Strategy

        validate(Strategy, read_yaml(path), path)
    return report


def _resolve(pack: Pack, role: str, repo: Path | None) -> tuple[list[str], dict[str, Any]]:
    from supervisor.context.roles import RoleSpec, find_role, merge

    chain: list[str] = []
    specs: list[dict[str, Any]] = []
    path, name, below = pack.role_path(role), role, None
    while True:
        if name in chain and below is None:
            raise ConfigError(
                f"Role pack '{pack.name}': role inheritance loops: {' → '.join([*chain, name])}.",
                "Remove one of the `extends:` lines.",
            )
        chain.append(name)
        spec: RoleSpec = validate(RoleSpec, read_yaml(path) or {}, path)
        specs.append(spec.model_dump(exclude_none=True))
        parent = spec.extends
        if parent is None:
            break
        if parent in pack.manifest.roles and parent != name:
            path, name = pack.role_path(parent), parent
            continue
        try:
            found = find_role(parent, repo)
        except ConfigError as e:
            raise ConfigError(
                f"Role pack '{pack.name}': {path} extends '{parent}', found neither in the "
                f"pack, the installed packs nor the built-in roles.",
                "Name a built-in role (e.g. reviewer, implementer), a role of this pack, or one "
                "of a pack listed under `requires.roles` (installed first).",
            ) from e
        path, name = found.path, parent
        below = found
    merged: dict[str, Any] = {}
    for spec_data in reversed(specs):
        merged = merge(merged, {k: v for k, v in spec_data.items() if k != "extends"}, {}, "")
    return chain, merged


def _sample_role(name: str, merged: dict[str, Any]) -> Role:
    from supervisor.context.roles import Role

    data = {k: v for k, v in merged.items() if k != "cli"}
    data.setdefault("template", "review_strict.j2")
    data.setdefault("output", "review")
    role: Role = validate(Role, {**data, "name": name}, name)
    return role


def _render(path: Path, role: Role) -> None:
    """Render the template in the sandbox with sample values; refused access is an error."""
    import jinja2
    from jinja2.exceptions import SecurityError

    from supervisor.context.prompts import ENVIRONMENT
    from supervisor.core.schemas import OUTPUT_SCHEMAS

    schema = OUTPUT_SCHEMAS[role.output]
    sample = {
        "role": role,
        "task": "A sample task.",
        "feedback": [],
        "plan": "",
        "run_id": "check",
        "degrade": "",
        "context_pack": "",
        "schema_name": schema.__name__,
        "schema_json": "{}",
    }
    try:
        ENVIRONMENT.from_string(path.read_text(encoding="utf-8")).render(**sample)
    except SecurityError as e:
        raise ConfigError(
            f"Template {path} was refused by the sandboxed environment every template renders "
            f"in: {str(e).rstrip('.')}.",
            "A pack's template may use the variables it is given and plain Jinja2 filters.",
        ) from e
    except jinja2.TemplateError as e:
        raise ConfigError(
            f"Template {path} does not render: {e}.",
            "Fix the template; templates render with StrictUndefined.",
        ) from e
