"""Trusting what a repository sets that decides where credentials go or weakens a protection.

A repository's `.supervisor/` files are written by whoever wrote the repository. Most of what they
set (gates, the workflow, context strategies) only shapes the work; supervisor/core/trustmap.py
lists
each input and its class. Two kinds of settings are honoured only once the user ran `supervisor
trust` there, like direnv's `allow`:

- settings that decide where the user's credentials go (`base_url`, `credential_env`,
  `login_files`, `extra_env`, `extra_flags`, a role's `env` and `flags`, `sandbox.image` and a
  project's, `sandbox.egress_network`, `temporal.*`): untrusted or changed, they stop
  `start-task` and `resume` before anything is created, with the diff and the command to trust
  them;
- settings that weaken a protection (removing protected paths, `dependency_changes: allow`,
  raising a limit or budget, disabling steps, a role's `allow_paths`), and the files that run or
  decide on the host (prompt templates, the project Dockerfile, the approval policy): untrusted
  or changed, they are ignored with a warning (templates fall back to the built-in ones), and the
  Dockerfile is not built.

`supervisor trust` shows each with its effect (a file with its diff against the trusted text)
and records exactly what it showed in the user directory: values, and each file's hash and text.
The package defaults, the user's own config and command-line flags need no trust.
"""

from __future__ import annotations

import difflib
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from supervisor.core import trustmap
from supervisor.core.config import _mapping, login_file_problem, read_yaml, user_dir
from supervisor.core.errors import ConfigError
from supervisor.core.trust_records import NEVER, Ignored, effect, untrusted_reason
from supervisor.core.trust_records import key as _key
from supervisor.core.trust_records import records as _records
from supervisor.core.trust_records import warn as warn  # re-exported: the readers warn through it
from supervisor.core.trust_records import write_records as _write_records

if TYPE_CHECKING:
    from supervisor.core.config import Settings

CLI_KEYS = ("base_url", "credential_env", "login_files", "extra_env", "extra_flags")
SANDBOX_KEYS = ("image", "egress_network")
ROLE_KEYS = ("env", "flags")
CONFIG, ROLES, TEMPLATES = trustmap.CONFIG, trustmap.ROLES, trustmap.TEMPLATES
DOCKERFILE, POLICY = trustmap.DOCKERFILE, trustmap.POLICY


class UntrustedConfigError(ConfigError):
    """A repository sets where credentials go, and the user has not trusted that content."""


def guarded_settings(repo: Path) -> dict[str, Any]:
    """The credential-routing settings a repository sets, by dotted key (empty when none)."""
    found: dict[str, Any] = {}
    config = trustmap.repo_path(repo, CONFIG, trustmap.NEEDS_TRUST)
    data = _mapping(config) if config.is_file() else {}
    clis = data.get("clis")
    if isinstance(clis, dict):
        for cli, values in clis.items():
            for key in CLI_KEYS:
                if isinstance(values, dict) and key in values:
                    found[f"clis.{cli}.{key}"] = values[key]
    sandbox = data.get("sandbox")
    if isinstance(sandbox, dict):
        for key in SANDBOX_KEYS:
            if key in sandbox:
                found[f"sandbox.{key}"] = sandbox[key]
    projects = data.get("projects")
    for project in projects if isinstance(projects, list) else []:
        own = project.get("sandbox") if isinstance(project, dict) else None
        if isinstance(own, dict) and own.get("image") is not None:  # its workers' and gates'
            found[f"projects.{project.get('name')}.sandbox.image"] = own["image"]
    temporal = data.get("temporal")  # where tasks are submitted: their descriptions, results
    if isinstance(temporal, dict):
        for key in ("address", "namespace", "remote"):  # remote: where the code is pushed
            if key in temporal:
                found[f"temporal.{key}"] = temporal[key]
    forge = data.get("forge")  # where the user's forge token is sent (supervisor/forge/)
    for key, value in forge.items() if isinstance(forge, dict) else []:
        if key != "comments_from":  # never honoured from a repository: nothing to trust
            found[f"forge.{key}"] = value
    for name, spec in _role_specs(repo).items():
        for key in ROLE_KEYS:
            if spec.get(key):
                found[f"roles.{name}.{key}"] = spec[key]
    return found


def _role_specs(repo: Path) -> dict[str, dict[str, Any]]:
    roles = trustmap.repo_path(repo, ROLES, trustmap.NEEDS_TRUST)
    found: dict[str, dict[str, Any]] = {}
    for path in sorted(roles.glob("*.yaml")) if roles.is_dir() else []:
        spec = read_yaml(path)
        if isinstance(spec, dict):
            found[path.stem] = spec
    return found


POOL_KEYS = ("preferred_worker", "fallback_worker", "requires")


def pool_settings(repo: Path) -> dict[str, Any]:
    """The worker pools the repository's roles send steps to (supervisor/routing/pools.py), by
    dotted key: honoured when the user's own config allows the pool, or as trusted here."""
    return {
        f"roles.{name}.{key}": spec[key]
        for name, spec in _role_specs(repo).items()
        for key in POOL_KEYS
        if spec.get(key)
    }


def role_pool_trusted(repo: Path, key: str, value: Any) -> bool:
    """A repository role's pool field (`roles.<role>.requires`) as `supervisor trust` saw it."""
    trusted = _records().get(_key(repo), {}).get("pools", {})
    return key in trusted and trusted[key] == value


def fingerprint(settings: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()


# -- settings that weaken a protection ---------------------------------------------------------


def weakening_settings(
    repo: Path, project: dict[str, Any] | None = None, below: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The repository's settings that weaken a protection, by dotted key: its config layer's
    (measured against `below`, the package and user layers) and its roles' `allow_paths`."""
    if project is None or below is None:
        from supervisor.core.config import config_layers, deep_merge

        layers = config_layers(None)
        below = {}
        for _, layer in layers:
            below = deep_merge(below, layer)
        config = trustmap.repo_path(repo, CONFIG, trustmap.NEEDS_TRUST)
        project = _mapping(config) if config.is_file() else {}
    found = trustmap.weakenings(project, below)
    for name, spec in _role_specs(repo).items():
        if spec.get("allow_paths"):
            found[f"roles.{name}.allow_paths"] = spec["allow_paths"]
    return found


def role_allow_paths_trusted(repo: Path, role: str, value: Any) -> bool:
    """A project role's `allow_paths` as trusted by `supervisor trust`; warns when it is not."""
    key = f"roles.{role}.allow_paths"
    trusted = _records().get(_key(repo), {}).get("weakening", {})
    if key in trusted and trusted[key] == value:
        return True
    warn(f"Ignored {key}: {json.dumps(value)}: {effect(key)}; {untrusted_reason(repo)}.")
    return False


# -- files that run or decide on the host ------------------------------------------------------


def trust_files(repo: Path) -> dict[str, bytes]:
    """The repository's needs-trust files as they are now: its templates, Dockerfile and
    approval policy, by path below the root (symlinks are never followed)."""
    from supervisor.guard.reading import read_regular

    names = [POLICY, DOCKERFILE]
    templates = trustmap.repo_path(repo, TEMPLATES, trustmap.NEEDS_TRUST)
    if templates.is_dir() and not templates.is_symlink():
        names += sorted(p.relative_to(repo).as_posix() for p in templates.rglob("*") if p.is_file())
    return read_regular(repo, names)


def file_trusted(repo: Path, rel: str, data: bytes) -> bool:
    """`data` (the file `rel` as read now) is exactly what the user trusted."""
    files = _records().get(_key(repo), {}).get("files", {})
    return bool(files.get(rel, {}).get("sha256") == _digest(data))


def file_known(repo: Path, rel: str) -> bool:
    """The user trusted some version of `rel` (so a mismatch is a change, not a new file)."""
    return rel in _records().get(_key(repo), {}).get("files", {})


def file_diff(repo: Path, rel: str, data: bytes) -> str:
    """The change from the trusted text of `rel` to `data`, as a unified diff."""
    old = _records().get(_key(repo), {}).get("files", {}).get(rel, {}).get("text")
    lines = difflib.unified_diff(
        (old or "").splitlines(keepends=True),
        _text(data).splitlines(keepends=True),
        f"{rel} (trusted)" if old is not None else "(not trusted)",
        f"{rel} (now)",
    )
    return "".join(lines)


def require_trusted_file(repo: Path, rel: str, data: bytes, what: str) -> None:
    """Stop unless `rel` is trusted as it is now (for a file that is never used untrusted)."""
    if file_trusted(repo, rel, data):
        return
    state = "changed since you trusted it" if file_known(repo, rel) else "is not trusted"
    raise UntrustedConfigError(
        f"The repository's {rel} ({what}) {state}:\n{file_diff(repo, rel, data).rstrip()}",
        f"Read it, then run `supervisor trust --repo {repo}`; until then it is not used.",
    )


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _text(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


# -- `supervisor trust` -----------------------------------------------------------------------


@dataclass
class Pending:
    """What `supervisor trust` would record, each with what it does (shown before it asks)."""

    repo: Path
    routing: dict[str, Any] = field(default_factory=dict)
    weakening: dict[str, Any] = field(default_factory=dict)
    effects: dict[str, str] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)
    """Each needs-trust file not trusted as it is, with its diff against the trusted text."""
    ignored: list[Ignored] = field(default_factory=list)
    """Settings no trust makes the supervisor honour (the repository's webhook)."""

    @property
    def empty(self) -> bool:
        return not (self.routing or self.weakening or self.files)


def pending(repo: Path) -> Pending:
    config = trustmap.repo_path(repo, CONFIG, trustmap.NEEDS_TRUST)
    project = _mapping(config) if config.is_file() else {}
    routing = {**guarded_settings(repo), **pool_settings(repo)}  # the pools: which hosts
    found = Pending(repo, routing, weakening_settings(repo))
    found.effects = {key: effect(key) for key in [*found.routing, *found.weakening]}
    for rel, data in trust_files(repo).items():
        if not file_trusted(repo, rel, data):
            found.files[rel] = file_diff(repo, rel, data)
    webhook = trustmap._get(project, "notifications.webhook")
    if webhook is not None:
        found.ignored.append(Ignored("notifications.webhook", webhook, NEVER))
    return found


def trust(repo: Path) -> dict[str, Any]:
    """Record the repository's current credential-routing and weakening settings and its
    needs-trust files as trusted; return the settings."""
    settings = guarded_settings(repo)
    records = _records()
    records[_key(repo)] = {
        "sha256": fingerprint(settings),
        "settings": settings,
        "weakening": weakening_settings(repo),
        "pools": pool_settings(repo),
        "files": {
            rel: {"sha256": _digest(data), "text": _text(data)}
            for rel, data in trust_files(repo).items()
        },
    }
    _write_records(records)
    return settings


def trust_file(repo: Path, rel: str) -> None:
    """Record one file the supervisor itself just wrote (the Dockerfile of `sandbox init`) as
    trusted: the user asked for it, and its text is ours."""
    data = trust_files(repo).get(rel)
    if data is None:
        return
    records = _records()
    record = records.setdefault(_key(repo), {})
    record.setdefault("files", {})[rel] = {"sha256": _digest(data), "text": _text(data)}
    _write_records(records)


def require_trusted(repo: Path) -> None:
    """Stop unless every credential-routing setting of the repository is trusted as it is now."""
    current = guarded_settings(repo)
    if not current:
        return
    record = _records().get(_key(repo), {})
    if record.get("sha256") == fingerprint(current):
        return
    old: dict[str, Any] = record.get("settings", {})
    lines = []
    for key in sorted(set(old) | set(current)):
        if old.get(key) != current.get(key):
            before = json.dumps(old[key]) if key in old else "(not trusted)"
            after = json.dumps(current[key]) if key in current else "(removed)"
            lines.append(f"  {key}: {before} -> {after}")
    what = "changed since you trusted it" if record.get("settings") else "is not trusted"
    raise UntrustedConfigError(
        f"The repository {repo} sets where credentials go (.supervisor/config.yaml or "
        f".supervisor/roles/), and this content {what}:\n" + "\n".join(lines),
        f"Check these values, then run `supervisor trust --repo {repo}`; or move them to your "
        f"own config ({user_dir() / 'config.yaml'}).",
    )


def check_login_files(settings: Settings, home: Path | None = None) -> None:
    """Every CLI's `login_files` stays inside the home directory, symlinks resolved."""
    home = (home or Path.home()).resolve()
    for cli, cli_settings in settings.clis.items():
        for rel in cli_settings.login_files:
            problem = login_file_problem(rel)
            if problem is None and not (home / rel).resolve().is_relative_to(home):
                problem = "resolves (through a symbolic link) to a place outside it"
            if problem is not None:
                raise ConfigError(
                    f"clis.{cli}.login_files names '{rel}', which {problem}: login files must "
                    f"stay inside the home directory ({home}).",
                    "Name a path relative to your home directory, e.g. .claude/.credentials.json.",
                )
