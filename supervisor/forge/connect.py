"""The adapter for a target's forge, with the user's token; each client library is imported
here only, when a command needs it (`supervisor status` never loads them)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from supervisor.forge import tokens

if TYPE_CHECKING:
    from supervisor.forge.base import Forge, Target


def connect(target: Target) -> Forge:
    token = tokens.token_for(target)
    if target.kind == "github":
        from supervisor.forge.github import GitHub

        return GitHub(target, token)
    from supervisor.forge.gitlab import GitLab

    return GitLab(target, token)
