"""The trust records and the filter of a repository's config layer, below supervisor.core.config.

The settings cascade (supervisor/core/config.py) drops a repository's untrusted weakening settings
as it reads them, so what it needs lives here, under it: the records `supervisor trust` writes in
the user directory, and the warning. supervisor/guard/trust.py builds the rest on top.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from supervisor.core import trustmap
from supervisor.core.errors import ConfigError

TRUST_FILE = "trusted.json"
CONFIG = trustmap.CONFIG
NEVER = "never honoured from a repository: set it in your own config"


def user_dir() -> Path:
    """~/.supervisor, or $SUPERVISOR_USER_DIR (as supervisor.core.config.user_dir, which is
    above)."""
    return Path(os.environ.get("SUPERVISOR_USER_DIR") or Path.home() / ".supervisor")


@dataclass(frozen=True)
class Ignored:
    """A repository setting the supervisor does not honour, and why."""

    key: str
    value: Any
    reason: str


def filter_project_layer(
    repo: Path, project: dict[str, Any], below: dict[str, Any]
) -> tuple[dict[str, Any], list[Ignored]]:
    """The repository's config layer without what it may not set: its webhook (never) and each
    weakening setting the user has not trusted with this value. Each dropped one is warned about
    once per process, naming the setting and the command that trusts it."""
    ignored: list[Ignored] = []
    for name in trustmap.NEVER_FROM_REPOSITORY:  # where task data goes: the user's choice
        value = trustmap._get(project, name)
        if value is not None:
            ignored.append(Ignored(name, value, NEVER))
    trusted = records().get(key(repo), {}).get("weakening", {})
    for name, value in trustmap.weakenings(project, below).items():
        if name not in trusted or trusted[name] != value:
            ignored.append(Ignored(name, value, untrusted_reason(repo)))
    for item in ignored:
        if item.reason != NEVER:
            value = json.dumps(item.value)
            where = repo / CONFIG
            warn(f"Ignored {item.key}: {value} from {where}: {effect(item.key)}; {item.reason}.")
    return trustmap.without(project, [i.key for i in ignored]), ignored


def untrusted_reason(repo: Path) -> str:
    return f"not trusted (check it, then run `supervisor trust --repo {repo}`)"


def effect(key: str) -> str:
    entry = trustmap.setting(key)
    return entry.effect if entry is not None else "weakens a protection"


_WARNED: set[str] = set()


def warn(message: str) -> None:
    """Once per process: the settings are read again at every step."""
    if message not in _WARNED:
        _WARNED.add(message)
        sys.stderr.write(f"Warning: {message}\n")


def key(repo: Path) -> str:
    return str(repo.resolve())


def records() -> dict[str, Any]:
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


def write_records(data: dict[str, Any]) -> None:
    """Atomically, readable by the user only: the records hold the trusted values."""
    directory = user_dir()
    directory.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(dir=directory, prefix=".trusted-")
    tmp = Path(name)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(data, handle, indent=2, sort_keys=True)
        tmp.chmod(0o600)
        tmp.replace(directory / TRUST_FILE)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
