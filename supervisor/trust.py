"""Trusting a repository's settings that decide where credentials go.

A repository's `.supervisor/config.yaml` and its roles are written by whoever wrote the
repository. Most of what they set (gates, limits, the workflow) only shapes the work; but some
settings decide where the user's credentials go: the model API a CLI talks to (`base_url`), which
host variables and login files are handed over (`credential_env`, `login_files`), extra environment
and flags for the CLI or a role (`extra_env`, `extra_flags`, a role's `env` and `flags`), and the
sandbox the worker runs in (`sandbox.image`, `sandbox.egress_network`). Cloning a repository and
running `start-task` in it must not send the user's key to an endpoint of the author's choosing.

So, like direnv's `allow`, those settings are honoured from a repository only after the user ran
`supervisor trust` there: it shows the values and records a hash of exactly them in the user
directory. An untrusted or changed value stops `start-task` and `resume` before anything is
created, with the diff and the command to trust it. The package defaults, the user's own config
and command-line flags need no trust.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from supervisor.config import _mapping, login_file_problem, read_yaml, user_dir
from supervisor.errors import ConfigError

if TYPE_CHECKING:
    from supervisor.config import Settings

CLI_KEYS = ("base_url", "credential_env", "login_files", "extra_env", "extra_flags")
SANDBOX_KEYS = ("image", "egress_network")
ROLE_KEYS = ("env", "flags")
TRUST_FILE = "trusted.json"


class UntrustedConfigError(ConfigError):
    """A repository sets where credentials go, and the user has not trusted that content."""


def guarded_settings(repo: Path) -> dict[str, Any]:
    """The credential-routing settings a repository sets, by dotted key (empty when none)."""
    found: dict[str, Any] = {}
    config = repo / ".supervisor" / "config.yaml"
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
    temporal = data.get("temporal")  # where tasks are submitted: their descriptions, results
    if isinstance(temporal, dict):
        for key in ("address", "namespace", "remote"):  # remote: where the code is pushed
            if key in temporal:
                found[f"temporal.{key}"] = temporal[key]
    roles = repo / ".supervisor" / "roles"
    if roles.is_dir():
        for path in sorted(roles.glob("*.yaml")):
            spec = read_yaml(path)
            for key in ROLE_KEYS:
                if isinstance(spec, dict) and spec.get(key):
                    found[f"roles.{path.stem}.{key}"] = spec[key]
    return found


def fingerprint(settings: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()


def trust(repo: Path) -> dict[str, Any]:
    """Record the repository's current credential-routing settings as trusted; return them."""
    settings = guarded_settings(repo)
    records = _records()
    records[_key(repo)] = {"sha256": fingerprint(settings), "settings": settings}
    _write_records(records)
    return settings


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
    what = "changed since you trusted it" if record else "is not trusted"
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


def _key(repo: Path) -> str:
    return str(repo.resolve())


def _records() -> dict[str, Any]:
    path = user_dir() / TRUST_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as e:
        raise ConfigError(
            f"The trust records {path} cannot be read: {e}.",
            "Delete the file and run `supervisor trust` again in each repository you trust.",
        ) from e
    return data if isinstance(data, dict) else {}


def _write_records(records: dict[str, Any]) -> None:
    """Atomically, readable by the user only: the records hold the trusted values."""
    directory = user_dir()
    directory.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(dir=directory, prefix=".trusted-")
    tmp = Path(name)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(records, handle, indent=2, sort_keys=True)
        tmp.chmod(0o600)
        tmp.replace(directory / TRUST_FILE)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
