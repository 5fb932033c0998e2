"""Which forge a git remote is on, and where its API answers.

The host is read from the user's own git remote (their checkout's config, never a file of the
repository's tree), so a repository cannot send the user's token elsewhere by naming a host. The
API's address is the forge's public one for github.com and gitlab.com; for another host it is
`forge.api_url` from the user's config (or the repository's, once `supervisor trust` recorded
it: supervisor/core/trustmap.py), else the forge's usual path on that host.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from supervisor.core import process
from supervisor.core.errors import ConfigError, ToolFailedError
from supervisor.forge.base import KINDS, Kind, Target
from supervisor.workspace import treedata

if TYPE_CHECKING:
    from pathlib import Path

    from supervisor.core.settings import ForgeSettings

# https://host/owner/name(.git), ssh://git@host(:port)/owner/name(.git), git@host:owner/name(.git)
_URL = re.compile(r"^(?:[a-z+]+://)?(?:[^@/]+@)?(?P<host>[^/:]+)(?::\d+)?[:/](?P<path>.+?)/?$")
PUBLIC = {
    "github.com": ("github", "https://api.github.com"),
    "gitlab.com": ("gitlab", "https://gitlab.com"),
}


def remote_url(repo: Path, remote: str) -> str:
    """The remote's URL as the user configured it (before `insteadOf` rewriting: that names
    where git fetches from, the configured URL names the repository on the forge)."""
    try:
        done = process.run(
            [
                "git",
                *treedata.SAFE_CONFIG,
                "-C",
                str(repo),
                "config",
                "--get",
                f"remote.{remote}.url",
            ]
        )
    except ToolFailedError as e:
        raise ConfigError(
            f"The repository has no git remote named {remote!r}.",
            f"Add it (`git remote add {remote} URL`) or name another with --remote.",
        ) from e
    return done.stdout.strip()


def resolve(url: str, settings: ForgeSettings, asked: str | None = None) -> Target:
    """The forge `url` is on; `asked`: `--forge`, which wins over the configured kind."""
    found = _URL.match(url)
    if found is None or "/" not in found["path"] or url.startswith(("/", "file:")):
        raise ConfigError(
            f"The remote {url!r} names no repository on a forge (a local path?).",
            "Push to a GitHub or GitLab remote (https://host/owner/name or git@host:owner/name).",
        )
    host, path = found["host"].lower(), found["path"].removesuffix(".git")
    public_kind, public_api = PUBLIC.get(host, (None, None))
    kind = asked or settings.kind or public_kind or _guess(host)
    if kind not in KINDS:
        raise ConfigError(
            f"Which forge {host} runs is not known" + (f" ({kind!r} is none)." if kind else "."),
            "Pass --forge github or --forge gitlab (or set forge.kind in your config).",
        )
    chosen: Kind = "github" if kind == "github" else "gitlab"
    api = settings.api_url or (public_api if public_kind == chosen else None)
    if api is None:
        api = f"https://{host}/api/v3" if chosen == "github" else f"https://{host}"
    return Target(chosen, host, path, api.rstrip("/"))


def _guess(host: str) -> str | None:
    names = [k for k in KINDS if k in host]
    return names[0] if len(names) == 1 else None
