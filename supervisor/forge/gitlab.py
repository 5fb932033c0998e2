"""GitLab (gitlab.com or a self-managed host) through python-gitlab: a merge request opened or
updated, an issue and whether its author may write to the project (Developer or above), a merge
request's notes and failed jobs (with their trace's end), and a note in a discussion."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

import gitlab
from gitlab.exceptions import GitlabError

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
        self._writers: dict[int, bool] = {}

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
            return Issue(
                number, found.title or "", found.description or "", str(author.get("username")),
                self.can_write(author.get("id")), found.web_url,
            )  # fmt: skip

    def comments(self, number: int) -> list[Comment]:
        with self._errors(f"read the discussions of merge request !{number}"):
            mr = self.project().mergerequests.get(number, lazy=True)
            found = []
            for discussion in mr.discussions.list(get_all=True):
                for note in discussion.attributes.get("notes") or []:
                    if note.get("system"):
                        continue  # GitLab's own ("added 1 commit"), not a person's
                    author = note.get("author") or {}
                    where = note.get("position") or {}
                    found.append(
                        Comment(
                            f"note:{note['id']}",
                            str(author.get("username")),
                            self.can_write(author.get("id")),
                            str(note.get("body") or ""),
                            str(where.get("new_path") or ""),
                            where.get("new_line"),
                            str(discussion.id),
                        )
                    )
            return found

    def failing_checks(self, number: int, sha: str) -> list[Check]:
        with self._errors(f"read the pipelines of merge request !{number}"):
            project = self.project()
            mr = project.mergerequests.get(number, lazy=True)
            pipelines = [p for p in mr.pipelines.list(get_all=True) if p.sha == sha]
            if not pipelines:
                return []
            latest = max(pipelines, key=lambda p: int(p.id))
            found = []
            for job in project.pipelines.get(latest.id, lazy=True).jobs.list(
                scope="failed", get_all=True
            ):
                if job.status != "failed":
                    continue
                trace = project.jobs.get(job.id, lazy=True).trace()
                log = trace.decode(errors="replace") if isinstance(trace, bytes) else str(trace)
                found.append(Check(f"job:{job.id}", str(job.name), log[-LOG_KEPT:]))
            return found

    def reply(self, number: int, thread: str, text: str) -> str:
        with self._errors(f"answer on merge request !{number}"):
            mr = self.project().mergerequests.get(number, lazy=True)
            if thread:
                note = mr.discussions.get(thread, lazy=True).notes.create({"body": text})
            else:
                note = mr.notes.create({"body": text})
            return f"note:{note.id}"

    def can_write(self, user_id: Any) -> bool:
        """Whether user `user_id` may push to the project (asked once per user)."""
        if not isinstance(user_id, int):
            return False
        if user_id not in self._writers:
            try:
                level = self.project().members_all.get(user_id).access_level
            except GitlabError as e:
                if e.response_code not in (403, 404):
                    raise
                level = 0  # not a member: not a writer
            self._writers[user_id] = level >= DEVELOPER
        return self._writers[user_id]

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
            token = "GITLAB_TOKEN (or `glab auth status`)"
            raise refused(
                "GitLab", e.response_code, detail, where, doing, token=token, owner="project"
            ) from None
