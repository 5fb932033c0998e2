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


def refused(
    forge: str, status: int | None, detail: str, where: str, doing: str, *, token: str, owner: str
) -> ForgeError:
    """A forge's refusal in the supervisor's words: a refused token (401), a repository the
    token cannot see (404), or anything else with the forge's own answer. `detail` has had the
    token scrubbed from it; `token` names where the token came from, `owner` what it must reach
    (a repository, a project)."""
    if status == 401:
        return ForgeAuthError(
            f"{forge} refused the token for {where} ({detail}).",
            f"Check {token}: it may be expired.",
        )
    if status == 404:
        return ForgeError(
            f"{forge} has no {where} that this token can see ({detail}).",
            f"Check the remote's URL and that the token has access to the {owner}.",
        )
    return ForgeError(
        f"{forge} could not {doing} in {where}: {detail}.",
        f"Read {forge}'s answer above; nothing was changed by the failed call.",
    )


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


@dataclass(frozen=True)
class Comment:
    """A comment on a pull request; its text is its author's, untrusted."""

    id: str
    """Unique on the forge and stable: `review:<id>`, `issue:<id>` (GitHub), `note:<id>`
    (GitLab)."""
    author: str
    author_can_write: bool
    body: str
    path: str = ""
    """The file a review comment is on; "" for a comment on the conversation."""
    line: int | None = None
    thread: str = ""
    """What a reply answers: GitHub's review comment id, GitLab's discussion id; "" for a
    comment on GitHub's conversation (answered by one comment on the conversation)."""


@dataclass(frozen=True)
class Check:
    """A check that failed on the pull request's head; its log is the forge's text, untrusted."""

    id: str
    """`check:<id>` (a GitHub check run), `job:<id>` (a GitLab job)."""
    name: str
    log: str
    """The end of its output (GitHub: the check run's output title, summary and text; GitLab:
    the job's trace), cut by the adapter to at most `LOG_KEPT` characters."""


LOG_KEPT = 20_000
"""Characters of a failing check's log an adapter keeps (its end: where the failure is)."""


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

    @abstractmethod
    def comments(self, number: int) -> list[Comment]:
        """Every comment on pull request `number` (review comments and the conversation's),
        oldest first, each with whether its author may write to the repository."""

    @abstractmethod
    def failing_checks(self, number: int, sha: str) -> list[Check]:
        """The checks (GitHub check runs, GitLab jobs) that failed on commit `sha` of pull
        request `number`."""

    @abstractmethod
    def reply(self, number: int, thread: str, text: str) -> str:
        """`text` as a reply in `thread` of pull request `number` (a comment on the
        conversation when `thread` is ""); the id of the reply, as `Comment.id` names it."""
