"""Roles: YAML personas that inherit from one another with `extends`.

A role file may be partial; `extends` names its parent and the two merge field by field: scalars
override, lists append (parent first), dicts deep-merge, and `system_prompt_additions`
concatenate. Files are looked up project → user → installed role packs (the project's, then the
user's: supervisor/context/packs/) → package, so a project can shadow a built-in role, or extend
the built-in role of the same name (the lookup then starts one layer down). A pack's role is used
only while the pack's files match its lock, and through what a pack may set (packs/roles.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field

from supervisor.context.packs.manifest import PACKS_DIR as PACKS_DIR
from supervisor.core import trustmap
from supervisor.core.config import read_yaml, user_dir, validate
from supervisor.core.errors import ConfigError
from supervisor.core.resources import CONFIG_DIR
from supervisor.core.schemas import OUTPUT_SCHEMAS
from supervisor.core.strict_model import StrictModel

if TYPE_CHECKING:
    from supervisor.context.packs.store import Installed

SCHEMA_PATH = CONFIG_DIR / "role_schema.json"


class RoleGate(StrictModel):
    """A check the orchestrator runs on this role's candidate, in the no-network sandbox."""

    name: str
    command: str
    on_fail: Literal["block", "retry"] = "retry"
    """`retry`: the step runs again with the output as feedback; `block`: the task stops."""


class RoleContextSpec(StrictModel):
    strategy: str | None = None
    """A file in config/context_strategies/ (or .supervisor/context_strategies/)."""
    include: list[str] | None = None
    always_include: list[str] | None = None
    """Files packed first, whatever the strategy selects."""
    exclude: list[str] | None = None
    token_budget: int | None = Field(None, gt=0)
    git_diff: bool | None = None


class RoleSpec(StrictModel):
    """One role file as written: every field optional, so that overlays stay small."""

    name: str | None = None
    extends: str | None = None
    description: str | None = None
    cli: str | list[str] | None = None
    """The CLI the role runs on, or several in order: the first preferred, the others fallbacks
    when it is rate-limited, down or without credentials (supervisor/routing/failover.py)."""
    model: str | None = None
    models: dict[str, str] | None = None
    """A model per CLI, used when the role runs on that CLI (e.g. after `--cli codex`)."""
    flags: list[str] | None = None
    env: dict[str, str] | None = None
    template: str | None = None
    output: Literal["analysis", "research", "plan", "implementation", "review"] | None = None
    system_prompt_additions: str | None = None
    strengths: list[str] | None = None
    allowed_tools: list[str] | None = None
    context: RoleContextSpec | None = None
    gates: list[RoleGate] | None = None
    allow_paths: list[str] | None = None
    """Protected paths (gitignore patterns) this role may change, e.g. `tests/**`."""
    may_change_nothing: bool | None = None
    """An implementing role whose honest answer may be "nothing to change" (a test engineer who
    finds the tests sufficient): an empty change then passes, recorded as such."""
    preferred_worker: str | None = None
    """Team mode: the pool of workers (`supervisor worker --capabilities`) this role's steps go
    to first; with no worker of it polling within temporal.pool_wait_seconds, the fallback."""
    fallback_worker: str | None = None
    """Where a preferred pool's step goes when none of its workers takes it (default: any)."""
    requires: list[str] | None = None
    """Pools the role's steps must run on (e.g. [isolated]): they wait for such a worker and
    never fall back."""


class RoleContext(StrictModel):
    strategy: str | None = None
    include: list[str] = Field(default_factory=list)
    always_include: list[str] = Field(default_factory=list)
    exclude: list[str] = Field(default_factory=list)
    token_budget: int = 25_000
    git_diff: bool = False


class Role(StrictModel):
    """A resolved role: the whole chain merged, every required field present."""

    name: str
    description: str = ""
    cli: str | None = None
    """The preferred CLI (the first of a `cli:` list)."""
    fallbacks: list[str] = Field(default_factory=list)
    """The rest of a `cli:` list, in order."""
    model: str | None = None
    models: dict[str, str] = Field(default_factory=dict)
    flags: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    template: str
    output: Literal["analysis", "research", "plan", "implementation", "review"]
    system_prompt_additions: str = ""
    strengths: list[str] = Field(default_factory=list)
    allowed_tools: list[str] = Field(default_factory=list)
    context: RoleContext = Field(default_factory=RoleContext)
    gates: list[RoleGate] = Field(default_factory=list)
    allow_paths: list[str] = Field(default_factory=list)
    may_change_nothing: bool = False
    preferred_worker: str | None = None
    fallback_worker: str | None = None
    requires: list[str] = Field(default_factory=list)

    @property
    def clis(self) -> list[str]:
        """Every CLI the role may run on, preferred first; empty: the task's CLI."""
        return [self.cli, *self.fallbacks] if self.cli else []

    @property
    def schema(self) -> type[BaseModel]:  # type: ignore[override]  # not pydantic v1's schema()
        return OUTPUT_SCHEMAS[self.output]

    def model_for(self, cli: str, cli_default: str | None, forced: str | None = None) -> str:
        """Forced by config > the role's model for that CLI > its `model` (when it names no
        other CLI) > the CLI's default model."""
        own = self.model if self.cli in (None, cli) else None
        chosen = forced or self.models.get(cli) or own or cli_default
        if not chosen:
            raise ConfigError(
                f"Role '{self.name}' has no model for the {cli} CLI.",
                f"Add `models: {{{cli}: <model>}}` to the role, or `clis: {{{cli}: "
                "{default_model: <model>}}` to the config.",
            )
        return chosen


@dataclass(frozen=True)
class RoleFile:
    name: str
    path: Path
    layer: str  # project | user | community | package
    pack: str | None = None
    """The installed pack a community role comes from."""
    version: str | None = None


@dataclass
class ResolvedRole:
    role: Role
    chain: list[RoleFile]
    provenance: dict[str, str] = field(default_factory=dict)


def layers(repo: Path | None) -> list[tuple[str, Path]]:
    return [(layer, directory) for layer, directory, _ in search_layers(repo)]


def search_layers(repo: Path | None) -> list[tuple[str, Path, Installed | None]]:
    """Project → user → installed packs (the project's, then the user's) → package."""
    from supervisor.context.packs.store import installed

    found: list[tuple[str, Path, Installed | None]] = [("user", user_dir() / "roles", None)]
    if repo is not None:
        roles_dir = trustmap.repo_path(repo, trustmap.ROLES, trustmap.NEEDS_TRUST)
        found.insert(0, ("project", roles_dir, None))
    found += [("community", i.root / "roles", i) for i in installed(repo)]
    return [*found, ("package", CONFIG_DIR / "base_roles", None)]


def find_role(name: str, repo: Path | None, below: RoleFile | str | None = None) -> RoleFile:
    """The first file for `name`, searching the layers after `below`'s when given. A role of an
    installed pack is used only while the pack's files match its lock."""
    search = search_layers(repo)
    if below is not None:
        index = next(
            i
            for i, (layer, directory, _) in enumerate(search)
            if (
                layer == below
                if isinstance(below, str)
                else layer == below.layer and below.path.parent == directory
            )
        )
        search = search[index + 1 :]
    for layer, directory, pack in search:
        path = directory / f"{name}.yaml"
        if path.is_file() or (pack is not None and path.is_symlink()):
            if pack is None:
                return RoleFile(name, path, layer)
            pack.pack()  # verifies the lock: a changed pack is refused by name
            return RoleFile(name, path, layer, pack.entry.name, pack.entry.version)
    places = ", ".join(str(d) for _, d, _ in search) or "(no layer below)"
    raise ConfigError(
        f"Unknown role '{name}': no {name}.yaml in {places}.",
        "Check the name, or add the role file to .supervisor/roles/ (`supervisor roles list` "
        "shows the known roles).",
    )


def list_roles(repo: Path | None) -> list[RoleFile]:
    """Every role file, the shadowed ones included, in lookup order."""
    files = []
    for layer, directory, pack in search_layers(repo):
        if directory.is_dir():
            name, version = (pack.entry.name, pack.entry.version) if pack else (None, None)
            files += [
                RoleFile(p.stem, p, layer, name, version) for p in sorted(directory.glob("*.yaml"))
            ]
    return files


def resolve_role(name: str, repo: Path | None) -> ResolvedRole:
    chain: list[RoleFile] = []
    specs: list[dict[str, Any]] = []
    current = find_role(name, repo)
    while True:
        if current.path in [c.path for c in chain]:
            cycle = " → ".join([*(c.name for c in chain), current.name])
            raise ConfigError(
                f"Role inheritance loops: {cycle} ({current.path}).",
                "Remove one of the `extends:` lines so that the chain ends at a base role.",
            )
        chain.append(current)
        spec = _read_spec(current)
        specs.append(spec)
        parent = spec.get("extends")
        if parent is None:
            break
        below = current if parent == current.name else None
        if parent == current.name and current.layer == "package":
            raise ConfigError(
                f"Role '{current.name}' in {current.path} extends itself.",
                "A role can extend a same-named role only from a higher layer (project or user).",
            )
        try:
            current = find_role(parent, repo, below=below)
        except ConfigError as e:
            raise ConfigError(
                f"{chain[-1].path} extends unknown role '{parent}'. {e.message}", e.hint
            ) from e
    merged: dict[str, Any] = {}
    provenance: dict[str, str] = {}
    for role_file, spec in zip(reversed(chain), reversed(specs), strict=True):
        spec = {k: v for k, v in spec.items() if k not in ("extends", "name")}
        merged = merge(merged, spec, provenance, str(role_file.path))
    merged["name"] = name
    provenance["name"] = str(chain[0].path)
    if "cli" in merged:
        merged["cli"], merged["fallbacks"] = _cli_list(name, merged["cli"], provenance["cli"])
        provenance["fallbacks"] = provenance["cli"]
    missing = [f for f in ("template", "output") if f not in merged]
    if missing:
        raise ConfigError(
            f"Role '{name}' ({chain[0].path}) has no {', '.join(missing)} after inheritance.",
            "Set them in the role, or extend a base role that has them (e.g. extends: "
            "implementer).",
        )
    role: Role = validate(Role, merged, chain[0].path)
    return ResolvedRole(role=role, chain=chain, provenance=provenance)


def load_role(name: str, repo: Path | None) -> Role:
    return resolve_role(name, repo).role


def merge(
    parent: dict[str, Any],
    child: dict[str, Any],
    provenance: dict[str, str],
    source: str,
    prefix: str = "",
) -> dict[str, Any]:
    """The spec's merge semantics, recording which file each field came from."""
    out = dict(parent)
    for key, value in child.items():
        path = f"{prefix}{key}"
        old = out.get(key)
        if path == "cli":  # a list of CLIs is an order of preference: replaced, never appended
            out[key] = value
            provenance[path] = source
        elif key == "system_prompt_additions" and old:
            out[key] = f"{old.rstrip()}\n{value}"
            provenance[path] = f"{provenance.get(path, '')} + {source}"
        elif isinstance(value, dict) and isinstance(old, dict):
            out[key] = merge(old, value, provenance, source, f"{path}.")
        elif isinstance(value, list) and isinstance(old, list):
            out[key] = old + [v for v in value if v not in old]
            provenance[path] = f"{provenance.get(path, '')} + {source}"
        else:
            out[key] = value
            if isinstance(value, dict):
                _mark(value, provenance, source, f"{path}.")
            else:
                provenance[path] = source
    return out


def role_json_schema() -> dict[str, Any]:
    return RoleSpec.model_json_schema()


def write_role_schema() -> None:
    SCHEMA_PATH.write_text(json.dumps(role_json_schema(), indent=2) + "\n")


def _cli_list(role: str, value: str | list[str], source: str) -> tuple[str, list[str]]:
    """A role's `cli:` (one name or a list) as its preferred CLI and its fallbacks, every name
    known and none twice."""
    from supervisor.workers import known_clis

    names = [value] if isinstance(value, str) else list(value)
    known = known_clis()
    unknown = [n for n in names if n not in known]
    twice = sorted({n for n in names if names.count(n) > 1})
    if not names or unknown or twice:
        problem = (
            "is an empty list"
            if not names
            else f"names unknown CLI(s) {', '.join(repr(n) for n in unknown)}"
            if unknown
            else f"names {', '.join(repr(n) for n in twice)} more than once"
        )
        raise ConfigError(
            f"Role '{role}' ({source}): `cli: {names}` {problem}. Known CLIs: {', '.join(known)}.",
            "Write `cli: claude`, or a list in order of preference such as "
            "`cli: [claude, codex]` (the first preferred, the others fallbacks).",
        )
    return names[0], names[1:]


def _mark(value: dict[str, Any], provenance: dict[str, str], source: str, prefix: str) -> None:
    for key, inner in value.items():
        if isinstance(inner, dict):
            _mark(inner, provenance, source, f"{prefix}{key}.")
        else:
            provenance[f"{prefix}{key}"] = source


def _read_spec(role_file: RoleFile) -> dict[str, Any]:
    data = read_yaml(role_file.path)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(
            f"{role_file.path} must hold a mapping of role fields.",
            "See config/role_schema.json for the fields a role may set.",
        )
    spec: RoleSpec = validate(RoleSpec, data, role_file.path)
    if spec.name is not None and spec.name != role_file.name:
        raise ConfigError(
            f"{role_file.path} says `name: {spec.name}`, but its file name says "
            f"'{role_file.name}'.",
            "Make the name match the file name, or drop the `name:` line.",
        )
    found = spec.model_dump(exclude_none=True)
    if role_file.pack is not None:
        from supervisor.context.packs.roles import community_spec

        return community_spec(role_file.path, role_file.pack, data, found)
    if role_file.layer == "project" and found.get("allow_paths"):
        from supervisor.guard import trust  # a repository role opening protected paths needs trust

        repo = role_file.path.parent.parent.parent
        if not trust.role_allow_paths_trusted(repo, role_file.name, data.get("allow_paths")):
            del found["allow_paths"]
    return found
