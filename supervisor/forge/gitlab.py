"""GitLab (gitlab.com or a self-managed host) through python-gitlab: a merge request opened or
updated, an issue and whether its author may write to the project (Developer or above)."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

import gitlab
from gitlab.exceptions import GitlabError

from supervisor.forge.base import Forge, ForgeAuthError, ForgeError, Issue, PullRequest, Target
from supervisor.forge.tokens import scrubbed

if TYPE_CHECKING:
    from collections.abc import Iterator

DEVELOPER = 30
"""GitLab's access level from which a member may push: Developer, Maintainer, Owner."""
DRAFT = "Draft: "


class GitLab(Forge):
    kind = "gitlab"
    noun = "merge request"

    def __init__(self, target: Target, token: str) -> None:
        self.target, self._token = target, token
        # keep_base_url: the API's own idea of its address (behind a proxy) never redirects
        # the token elsewhere.
        self._client = gitlab.Gitlab(
            target.api_url, private_token=token, timeout=30, keep_base_url=True
        )
        self._project: Any = None

    def check(self) -> None:
        with self._errors("read the project"):
            self.project()

    def open_or_update(
        self, head: str, base: str, title: str, body: str, draft: bool
    ) -> PullRequest:
        with self._errors("open the merge request"):
            project = self.project()
            for mr in project.mergerequests.list(
                source_branch=head, target_branch=base, state="opened", get_all=True
            ):
                kept = str(mr.title).startswith(DRAFT)  # a draft stays one until a person says
                mr.title, mr.description = (DRAFT if draft or kept else "") + title, body
                mr.save()
                return PullRequest(mr.iid, mr.web_url, created=False)
            title = (DRAFT if draft else "") + title  # GitLab's draft is a title's prefix
            mr = project.mergerequests.create(
                {"source_branch": head, "target_branch": base, "title": title, "description": body}
            )
            return PullRequest(mr.iid, mr.web_url, created=True)

    def issue(self, number: int) -> Issue:
        with self._errors(f"read issue #{number}"):
            project = self.project()
            found = project.issues.get(number)
            author = found.author or {}
            try:
                level = project.members_all.get(author.get("id")).access_level
            except GitlabError as e:
                if e.response_code not in (403, 404):
                    raise
                level = 0  # not a member: not a writer
            return Issue(
                number, found.title or "", found.description or "", str(author.get("username")),
                level >= DEVELOPER, found.web_url,
            )  # fmt: skip

    def project(self) -> Any:
        if self._project is None:
            self._project = self._client.projects.get(self.target.path)
        return self._project

    @contextlib.contextmanager
    def _errors(self, doing: str) -> Iterator[None]:
        """GitLab's refusals as the supervisor's errors, with the token never in their text."""
        try:
            yield
        except GitlabError as e:
            detail = scrubbed(f"{e.response_code} {e.error_message}".strip(), self._token)
            where = f"{self.target.path} on {self.target.api_url}"
            if e.response_code == 401:
                raise ForgeAuthError(
                    f"GitLab refused the token for {where} ({detail}).",
                    "Check GITLAB_TOKEN (or `glab auth status`): it may be expired.",
                ) from None
            if e.response_code == 404:
                raise ForgeError(
                    f"GitLab has no {where} that this token can see ({detail}).",
                    "Check the remote's URL and that the token has access to the project.",
                ) from None
            raise ForgeError(
                f"GitLab could not {doing} in {where}: {detail}.",
                "Read GitLab's answer above; nothing was changed by the failed call.",
            ) from None
