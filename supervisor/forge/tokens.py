"""The user's forge token, found on the host and handed to the client library alone.

Where from, in order: the environment the user runs the supervisor in (GH_TOKEN, GITHUB_TOKEN;
GITLAB_TOKEN), then their own CLI login (`gh auth token`, `glab config get token`) when that CLI
is installed. Never from a repository's file, and never copied anywhere: a container's
environment is built key by key by the supervisor (supervisor/sandbox/) and names none of these,
prompts and events are written from the state, which never holds it, and an error from the
forge is passed through `scrubbed` before it is shown.
"""

from __future__ import annotations

import os
import shutil

from supervisor.core import process
from supervisor.core.errors import CommandTimeoutError, ToolFailedError
from supervisor.forge.base import ForgeAuthError, Kind, Target

ENV: dict[Kind, tuple[str, ...]] = {
    "github": ("GH_TOKEN", "GITHUB_TOKEN"),
    "gitlab": ("GITLAB_TOKEN",),
}
LOGIN: dict[Kind, tuple[str, ...]] = {
    "github": ("gh", "auth", "token", "--hostname"),
    "gitlab": ("glab", "config", "get", "token", "--host"),
}


def token_for(target: Target) -> str:
    """The token for `target`'s forge; ForgeAuthError naming how to give one when none is
    found."""
    for name in ENV[target.kind]:
        value = os.environ.get(name, "").strip()
        if value:
            return value
    login = LOGIN[target.kind]
    if shutil.which(login[0]):
        try:
            found = process.run([*login, target.host], timeout=30, check=True).stdout.strip()
        except (ToolFailedError, CommandTimeoutError):
            found = ""
        if found:
            return found
    names = " or ".join(ENV[target.kind])
    raise ForgeAuthError(
        f"No {target.kind} token for {target.host}: {names} is unset and `{login[0]}` has no "
        "login for it.",
        f"Run `{login[0]} auth login`, or export {ENV[target.kind][0]} in this shell.",
    )


def scrubbed(text: str, token: str) -> str:
    """`text` (an error from the forge or its client) without `token` in it."""
    return text.replace(token, "[token]") if token else text
