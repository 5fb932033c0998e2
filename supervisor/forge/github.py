"""GitHub (and GitHub Enterprise) through PyGithub: a pull request opened or updated, an issue
and whether its author may write to the repository, a pull request's comments and failing check
runs, and a reply in a comment's thread."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from github import Auth, Github, GithubException

from supervisor.forge.base import (
    LOG_KEPT,
    Check,
    Comment,
    Forge,
    Issue,
    PullRequest,
    Target,
    refused,
)
from supervisor.forge.tokens import scrubbed

if TYPE_CHECKING:
    from collections.abc import Iterator

    from github.Repository import Repository

WRITERS = frozenset({"admin", "maintain", "write"})


class GitHub(Forge):
    kind = "github"
    noun = "pull request"

    def __init__(self, target: Target, token: str) -> None:
        self.target, self._token = target, token
        # A command makes a handful of calls: PyGithub's pauses between writes (made for
        # scripts that make thousands) would only slow it down.
        self._client = Github(
            base_url=target.api_url,
            auth=Auth.Token(token),
            timeout=30,
            seconds_between_requests=None,
            seconds_between_writes=None,
        )
        self._repo: Repository | None = None
        self._writers: dict[str, bool] = {}

    def check(self) -> None:
        with self._errors("read the repository"):
            self.repo()

    def open_or_update(
        self, head: str, base: str, title: str, body: str, draft: bool
    ) -> PullRequest:
        with self._errors("open the pull request"):
            repo = self.repo()
            owner = self.target.path.split("/", 1)[0]
            for pr in repo.get_pulls(state="open", head=f"{owner}:{head}", base=base):
                pr.edit(title=title, body=body)
                return PullRequest(pr.number, pr.html_url, created=False)
            pr = repo.create_pull(base=base, head=head, title=title, body=body, draft=draft)
            return PullRequest(pr.number, pr.html_url, created=True)

    def issue(self, number: int) -> Issue:
        with self._errors(f"read issue #{number}"):
            repo = self.repo()
            found = repo.get_issue(number)
            author = found.user.login
            return Issue(
                number, found.title or "", found.body or "", author, self.can_write(author),
                found.html_url,
            )  # fmt: skip

    def comments(self, number: int) -> list[Comment]:
        with self._errors(f"read the comments of pull request #{number}"):
            pr = self.repo().get_pull(number)
            found = [
                Comment(
                    f"review:{c.id}",
                    c.user.login,
                    self.can_write(c.user.login),
                    c.body or "",
                    c.path or "",
                    c.line or c.original_line,
                    str(c.in_reply_to_id or c.id),
                )
                for c in pr.get_review_comments()
            ]
            found += [
                Comment(f"issue:{c.id}", c.user.login, self.can_write(c.user.login), c.body or "")
                for c in pr.get_issue_comments()
            ]
            return found

    def failing_checks(self, number: int, sha: str) -> list[Check]:
        with self._errors(f"read the check runs of {sha[:12]}"):
            found = []
            for run in self.repo().get_commit(sha).get_check_runs():
                if run.conclusion not in ("failure", "timed_out"):
                    continue
                out = run.output
                said = [out.title, out.summary, out.text] if out is not None else []
                log = "\n".join(s for s in said if s)
                found.append(Check(f"check:{run.id}", run.name or "", log[-LOG_KEPT:]))
            return found

    def reply(self, number: int, thread: str, text: str) -> str:
        with self._errors(f"answer on pull request #{number}"):
            pr = self.repo().get_pull(number)
            if thread:
                return f"review:{pr.create_review_comment_reply(int(thread), text).id}"
            return f"issue:{pr.create_issue_comment(text).id}"

    def can_write(self, login: str) -> bool:
        """Whether `login` may write to the repository (asked once per login)."""
        if login not in self._writers:
            try:
                permission = self.repo().get_collaborator_permission(login)
            except GithubException as e:
                if e.status not in (403, 404):
                    raise
                permission = "none"  # not a collaborator, or ours cannot tell: not a writer
            self._writers[login] = permission in WRITERS
        return self._writers[login]

    def repo(self) -> Repository:
        if self._repo is None:
            self._repo = self._client.get_repo(self.target.path)
        return self._repo

    @contextlib.contextmanager
    def _errors(self, doing: str) -> Iterator[None]:
        """GitHub's refusals as the supervisor's errors, with the token never in their text."""
        try:
            yield
        except GithubException as e:
            said = e.data.get("message") if isinstance(e.data, dict) else e.data
            detail = scrubbed(f"{e.status} {said or ''}".strip(), self._token)
            where = f"{self.target.path} on {self.target.api_url}"
            token = "GH_TOKEN / GITHUB_TOKEN (or `gh auth status`)"
            raise refused(
                "GitHub", e.status, detail, where, doing, token=token, owner="repository"
            ) from None
