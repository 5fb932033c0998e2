"""Credentials for a worker CLI, handed over at run time only.

An API key never enters the sandbox: the container's environment gets a placeholder under the
same variable name (so the CLI sends its usual auth header), fresh for each run, and the real
value travels as an `Injection` to the host-side credential proxy (sandbox/credproxy.py;
guard/placeholders.py says what it applies), which checks the run's placeholder and puts the key on
each request to the one configured API host. A subscription login (files under $HOME), which the
host cannot inject, is copied into a per-run, read-only seed that each container copies into its own
tmpfs home, so parallel containers never share a writable token file. Nothing is baked into an
image, written to the repository, or recorded in the event log (events name the source, never
the value).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from supervisor.core.errors import CredentialsError
from supervisor.guard.placeholders import Injection, new_placeholder

if TYPE_CHECKING:
    from supervisor.core.config import CliSettings

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
    """What the container's environment gets: placeholders only, never a real key."""
    home_files: dict[str, bytes] = field(default_factory=dict)
    source: str = ""
    injection: Injection = field(default_factory=Injection)
    """The real key, for the proxy on the host; empty in login-file mode (the CLI's own auth
    passes through)."""
    placeholder: str = field(default_factory=new_placeholder)
    """This run's stand-in key (in `env`); the proxy forwards only requests that carry it."""

    @property
    def mode(self) -> str:
        return "proxy-injected key" if self.injection.header else "login files"


def injection_for(cli: str, variable: str, value: str) -> Injection:
    """Where each vendor's API reads the key: Anthropic `x-api-key` (an ANTHROPIC_AUTH_TOKEN is a
    bearer token), OpenAI `Authorization: Bearer`, Gemini `x-goog-api-key` or `key=`."""
    if cli == "claude":
        header = "authorization" if variable == "ANTHROPIC_AUTH_TOKEN" else "x-api-key"
        return Injection(header=header, value=value)
    if cli == "gemini":
        return Injection(header="x-goog-api-key", value=value, query_param="key")
    return Injection(header="authorization", value=value)


def collect(cli: str, settings: CliSettings, home: Path | None = None) -> Credentials:
    for name in settings.credential_env:
        value = os.environ.get(name)
        if value:
            placeholder = new_placeholder()
            return Credentials(
                env={name: placeholder},
                placeholder=placeholder,
                source=f"environment variable {name}",
                injection=injection_for(cli, name, value),
            )
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
