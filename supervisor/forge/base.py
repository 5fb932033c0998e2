"""What every forge adapter offers, and what it answers with.

An adapter builds the call and parses the answer (docs/architecture.md: adapters stay small);
which commit may be pushed, what a pull request says and who must approve an issue's task are
the lifecycle's (supervisor/lifecycle/pull_request.py, issue_task.py).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Literal

from supervisor.core.errors import SupervisorError

Kind = Literal["github", "gitlab"]
KINDS: tuple[Kind, ...] = ("github", "gitlab")


class ForgeError(SupervisorError):
    """The forge refused or could not be reached; the message never holds a token."""


class ForgeAuthError(ForgeError):
    """No token for the forge, or the forge refused the one given."""

    exit_code = 2


@dataclass(frozen=True)
class Target:
    """One repository on one forge: where its API answers and what the forge calls it."""

    kind: Kind
    host: str
    """The git remote's host: what the token is looked up for (`gh auth token --hostname`)."""
    path: str
    """`owner/name` on GitHub, `group/subgroup/name` on GitLab."""
    api_url: str


@dataclass(frozen=True)
class PullRequest:
    number: int
    url: str
    created: bool
    """False: an open one for the same head was found and updated."""


@dataclass(frozen=True)
class Issue:
    """An issue as the forge has it: every text field is the author's, untrusted."""

    number: int
    title: str
    body: str
    author: str
    author_can_write: bool
    url: str


class Forge(ABC):
    """One forge's client for one repository (`Target`)."""

    kind: Kind
    noun: str = "pull request"

    @abstractmethod
    def check(self) -> None:
        """The repository is there and the token may see it: asked before anything is pushed."""

    @abstractmethod
    def open_or_update(
        self, head: str, base: str, title: str, body: str, draft: bool
    ) -> PullRequest:
        """The open pull request from `head` into `base`, with this title and body: created
        when there is none, else updated (a re-run never opens a second; a draft stays one)."""

    @abstractmethod
    def issue(self, number: int) -> Issue:
        """Issue `number`, with whether its author may write to the repository."""
