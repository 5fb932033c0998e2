"""A role pack's manifest and the keys no pack may set.

Built-in packs (config/role_packs/) and community packs (fetched with git) are the same format,
read by `load_pack`, so that a pack written for one works as the other. A pack comes from
someone else: anything it sets that decides where credentials go, what the sandbox may reach,
which commands gate a change, which paths are protected or when a human approves is refused
with the key named, not silently dropped, so its author learns why.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import Field

from supervisor.core.config import read_yaml, validate
from supervisor.core.errors import ConfigError
from supervisor.core.resources import CONFIG_DIR
from supervisor.core.strict_model import StrictModel

MANIFEST = "pack.yaml"
PACK_SCHEMA_PATH = CONFIG_DIR / "pack_schema.json"
PACKS_DIR = CONFIG_DIR / "role_packs"
"""The built-in packs, in the same format as community ones (`supervisor init` offers them)."""
NAME = r"^[a-z0-9][a-z0-9_-]{0,63}$"
FILE_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$"

REFUSED: dict[str, str] = {
    "clis": "where a CLI's credentials are sent (base_url, credential_env, extra_env)",
    "base_url": "where a CLI's credentials are sent",
    "credential_env": "which host secrets a worker receives",
    "login_files": "which host secrets a worker receives",
    "credentials": "where credentials are sent",
    "env": "environment handed to the CLI (can route its credentials elsewhere)",
    "flags": "flags handed to the CLI (can route its credentials elsewhere)",
    "sandbox": "the sandbox's image, runtime and network",
    "egress": "what the sandbox may reach",
    "egress_network": "what the sandbox may reach",
    "gates": "commands that decide whether a change passes",
    "protected_paths": "the paths no worker may change",
    "allow_paths": "protected paths a worker may change",
    "approval_policy": "when a human must approve",
    "human_approval": "when a human must approve",
    "notifications": "where task data is sent",
    "state": "where task state is written",
}
"""Keys a pack may not set, at any depth of its manifest or role files, with what they decide."""


class PackRequires(StrictModel):
    supervisor: str | None = None
    """A version range of the supervisor (PEP 440 or `^1.0`), e.g. `>=0.1`."""
    roles: dict[str, str | PackDependency] = Field(default_factory=dict)
    """Packs this one extends, by name: a version range (fetched beside this pack's own
    repository), or `{source: <git URL or path>, version: <range>}`."""


class PackDependency(StrictModel):
    source: str
    version: str | None = None


class PackManifest(StrictModel):
    name: str = Field(pattern=NAME)
    version: str
    """Semantic version of this pack (its git tags name the same versions)."""
    description: str = ""
    author: str = ""
    roles: list[str] = Field(min_length=1)
    """The role files, `roles/<name>.yaml`."""
    templates: list[str] = Field(default_factory=list)
    """Prompt templates in `templates/`, used by the pack's roles as `template: <file>`."""
    context_strategies: list[str] = Field(default_factory=list)
    """Context strategies in `context_strategies/<name>.yaml`."""
    keywords: list[str] = Field(default_factory=list)
    requires: PackRequires = Field(default_factory=PackRequires)


@dataclass(frozen=True)
class Pack:
    manifest: PackManifest
    root: Path

    @property
    def name(self) -> str:
        return self.manifest.name

    @property
    def roles_dir(self) -> Path:
        return self.root / "roles"

    def role_path(self, role: str) -> Path:
        return self.roles_dir / f"{role}.yaml"

    def template_path(self, template: str) -> Path:
        return self.root / "templates" / template


def refused_keys(data: Any, prefix: str = "") -> list[str]:
    """Each refused key's full dotted path (down to its leaves, e.g. `clis.claude.base_url`)."""
    found: list[str] = []
    if isinstance(data, dict):
        for key, value in data.items():
            path = f"{prefix}{key}"
            if str(key) in REFUSED:
                found += _leaves(value, path)
            else:
                found += refused_keys(value, f"{path}.")
    elif isinstance(data, list):
        for item in data:
            found += refused_keys(item, prefix)
    return found


def refuse(data: Any, where: Path, pack: str) -> None:
    """Raise when a pack's file sets a key no pack may set."""
    keys = refused_keys(data)
    if keys:
        first = keys[0].split(".")
        top = next(k for k in first if k in REFUSED)
        raise ConfigError(
            f"Role pack '{pack}' sets `{keys[0]}` in {where}: a role pack may not decide "
            f"{REFUSED[top]}.",
            f"Remove `{top}` from the pack; set it in your own ~/.supervisor/config.yaml if you "
            "want it.",
        )


def load_pack(root: Path) -> Pack:
    """The pack in `root`, its manifest validated and every file it names present."""
    path = root / MANIFEST
    if not path.is_file():
        raise ConfigError(
            f"{root} is not a role pack: it has no {MANIFEST}.",
            "Run `supervisor role init` to scaffold one, or point at the pack's folder.",
        )
    data = read_yaml(path)
    name = data.get("name", root.name) if isinstance(data, dict) else root.name
    refuse(data, path, str(name))
    manifest: PackManifest = validate(PackManifest, data, path)
    pack = Pack(manifest, root)
    wanted = [
        *(pack.role_path(r) for r in manifest.roles),
        *(pack.template_path(t) for t in manifest.templates),
        *(root / "context_strategies" / f"{s}.yaml" for s in manifest.context_strategies),
    ]
    names = [*manifest.roles, *manifest.templates, *manifest.context_strategies]
    bad = [n for n in names if not re.match(FILE_NAME, n)]
    missing = [p for p in wanted if not p.is_file() or p.is_symlink()]
    if bad or missing:
        what = f"names '{bad[0]}' (not a plain file name)" if bad else f"lacks {missing[0]}"
        raise ConfigError(
            f"Role pack '{manifest.name}' ({path}) {what}.",
            "List in pack.yaml only files the pack holds: roles/<role>.yaml, templates/<file>, "
            "context_strategies/<name>.yaml.",
        )
    for role in manifest.roles:
        refuse(read_yaml(pack.role_path(role)), pack.role_path(role), manifest.name)
    for strategy in manifest.context_strategies:
        file = root / "context_strategies" / f"{strategy}.yaml"
        refuse(read_yaml(file), file, manifest.name)
    return pack


def builtin_packs() -> list[Pack]:
    return [load_pack(p) for p in sorted(PACKS_DIR.iterdir()) if (p / MANIFEST).is_file()]


def pack_json_schema() -> dict[str, Any]:
    return PackManifest.model_json_schema()


def write_pack_schema() -> None:
    PACK_SCHEMA_PATH.write_text(json.dumps(pack_json_schema(), indent=2) + "\n")


def _leaves(value: Any, path: str) -> list[str]:
    if isinstance(value, dict) and value:
        return [leaf for k, v in value.items() for leaf in _leaves(v, f"{path}.{k}")]
    return [path]
