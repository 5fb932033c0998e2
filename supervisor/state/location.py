"""Where a repository's state lives: its own SQLite file, or a shared PostgreSQL database.

`state.url` is read from the user's own config (`~/.supervisor/config.yaml`) or from
$SUPERVISOR_STATE_URL, never from the project's config: the repository must not choose where
task descriptions, gate output and approvals are written (nor hand a password to). Read with a
plain YAML load, not the settings cascade, because the read-only commands (status, events) start
without loading the configuration.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from supervisor.core.errors import ConfigError

STATE_DIR = ".supervisor"
"""supervisor.workspace.host_git.STATE_DIR, not imported: it brings git's runner with it."""

_STATE_SECTION = re.compile(r"^state\s*:", re.MULTILINE)


def state_url() -> str | None:
    """The shared database's URL, or None for the default per-repository SQLite file."""
    url = os.environ.get("SUPERVISOR_STATE_URL", "").strip()
    if url:
        return url
    # supervisor.core.config.user_dir(), without importing pydantic (the read-only commands do not)
    user_dir = Path(os.environ.get("SUPERVISOR_USER_DIR") or Path.home() / ".supervisor")
    path = user_dir / "config.yaml"
    try:
        text = path.read_text()
    except OSError:
        return None
    if not _STATE_SECTION.search(text):
        return None  # no YAML parse (nor import) for the read-only commands' common case
    import yaml

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        return None  # the settings cascade reports it, with the line, when a command loads it
    section = data.get("state") if isinstance(data, dict) else None
    value = section.get("url") if isinstance(section, dict) else None
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(
            f"state.url in {path} must be a database URL.",
            "Write it as postgresql+psycopg://USER:PASSWORD@HOST:PORT/DATABASE, or remove it.",
        )
    return value.strip()


def state_db_beside_git(path: Path) -> Path | None:
    """The state database in the nearest folder above `path` that has a `.git`, when there is
    one there; None when git must be asked (no database yet, GIT_DIR or GIT_WORK_TREE set).
    Found without running git: two processes are a third of a `status`."""
    if os.environ.keys() & {"GIT_DIR", "GIT_WORK_TREE"}:
        return None
    here = Path(path).resolve()
    for folder in (here, *here.parents):
        if os.path.lexists(folder / ".git"):
            db = folder / STATE_DIR / "state.db"
            return db if db.is_file() else None
    return None
