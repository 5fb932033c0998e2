"""Credentials for a worker CLI, handed over at run time only.

API-key variables go into the container's environment; a subscription login (files under $HOME)
is copied into a per-run, read-only seed that each container copies into its own tmpfs home, so
parallel containers never share a writable token file. Nothing is baked into an image, written to
the repository, or recorded in the event log (events name the source, never the value).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from supervisor.errors import CredentialsError

if TYPE_CHECKING:
    from supervisor.config import CliSettings

LOGIN_HINTS = {
    "claude": "Set ANTHROPIC_API_KEY, or log in once with `claude` on this machine "
    "(the login in ~/.claude is copied read-only into each run).",
    "codex": "Set OPENAI_API_KEY, or log in once with `codex login` on this machine "
    "(~/.codex/auth.json is copied read-only into each run).",
    "gemini": "Set GEMINI_API_KEY, or log in once with `gemini` on this machine "
    "(the login in ~/.gemini is copied read-only into each run).",
}


@dataclass
class Credentials:
    env: dict[str, str] = field(default_factory=dict)
    home_files: dict[str, bytes] = field(default_factory=dict)
    source: str = ""


def collect(cli: str, settings: CliSettings, home: Path | None = None) -> Credentials:
    for name in settings.credential_env:
        value = os.environ.get(name)
        if value:
            return Credentials(env={name: value}, source=f"environment variable {name}")
    home = home or Path.home()
    present = [rel for rel in settings.login_files if (home / rel).is_file()]
    files = {rel: (home / rel).read_bytes() for rel in present}
    if files:
        return Credentials(home_files=files, source=f"login files {', '.join(sorted(files))}")
    tried = [*settings.credential_env, *(f"~/{rel}" for rel in settings.login_files)]
    raise CredentialsError(
        f"No credentials for the {cli} CLI (looked for {', '.join(tried)}).",
        LOGIN_HINTS.get(cli, f"Set one of: {', '.join(settings.credential_env)}."),
    )
