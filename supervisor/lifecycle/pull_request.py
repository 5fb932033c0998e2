"""`supervisor complete-task <id> --pr`: the task's gated commit pushed to the user's remote and
a pull request (GitHub) or merge request (GitLab) opened for it, or updated on a re-run.

Only the commit the gates passed leaves the machine: the task branch's tip must be the commit
the task's last `commit` step recorded (the only step that moves the branch, and only with a
tree every gate passed: supervisor/workflow/steps/commit.py). A tip moved by hand since, or a
task that has not finished, is refused before anything is pushed. The body is written from the
state (supervisor/forge/body.py); the push and the API calls use the user's own credentials
(supervisor/forge/tokens.py), and the event recorded names the request, never a token.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from supervisor.core.errors import StateError
from supervisor.forge import body, target
from supervisor.forge.push import push_commit
from supervisor.lifecycle import refusals
from supervisor.lifecycle.opening import open_project, require_trust
from supervisor.state.locks import task_lock
from supervisor.state.store import EventSpec

if TYPE_CHECKING:
    from pathlib import Path

    from supervisor.forge.base import PullRequest, Target
    from supervisor.lifecycle.opening import Project
    from supervisor.state.store import Store, Workflow

EVENT = "pull_request"
ISSUE_EVENT = "from_issue"


@dataclass(frozen=True)
class Opened:
    request: PullRequest
    sha: str
    noun: str
    target: Target


def open_pull_request(
    wf_id: int,
    path: Path,
    *,
    remote: str = "origin",
    base: str | None = None,
    draft: bool = False,
    forge: str | None = None,
) -> Opened:
    """Push task `wf_id`'s gated commit to `remote` and open (or update) its pull request into
    `base` (by default the branch the task started from)."""
    from supervisor.forge.connect import connect

    project = open_project(path)
    require_trust(project)  # a repository's `forge.api_url` routes the token: trusted or refused
    where = target.resolve(target.remote_url(project.root, remote), project.settings.forge, forge)
    with task_lock(project.state_dir, wf_id), project.store() as store:
        wf = store.workflow(wf_id)
        sha = gated_tip(project, store, wf)
        into = base or wf.base_branch
        if not into:
            raise StateError(
                f"Workflow {wf.id} started from a detached HEAD: no branch to open it against.",
                "Name one with --base BRANCH.",
            )
        client = connect(where)
        client.check()  # the token and the repository, before anything is pushed
        push_commit(project.root, remote, sha, wf.task_branch)
        text = body.render(_facts(project, store, wf, sha))
        request = client.open_or_update(wf.task_branch, into, body.title(wf), text, draft)
        store.add_event(
            wf.id,
            EventSpec(
                EVENT,
                status="opened" if request.created else "updated",
                payload={
                    "number": request.number, "url": request.url, "sha": sha, "base": into,
                    "remote": remote, "forge": where.kind, "repository": where.path,
                },
            ),
        )  # fmt: skip
    return Opened(request, sha, client.noun, where)


def gated_tip(project: Project, store: Store, wf: Workflow) -> str:
    """The task branch's tip, when it is the commit the gates passed; else StateError."""
    refusals.not_abandoned(wf, "complete-task --pr")
    if wf.status != "completed":
        raise StateError(
            f"Workflow {wf.id} is {wf.status}, not completed: only a finished task's gated "
            "commit is pushed.",
            f"Finish it first (`supervisor status {wf.id}` says what it waits for).",
        )
    committed = [e for e in store.events(wf.id) if e.type == "commit" and e.status == "committed"]
    if not committed:
        raise StateError(
            f"Workflow {wf.id} committed nothing to {wf.task_branch}: there is nothing to open a "
            "pull request for.",
            f"`supervisor abandon {wf.id}` removes its branch.",
        )
    gated = str(committed[-1].payload["sha"])
    tip = project.workspace.branch_tip(wf.task_branch)
    if tip != gated:
        raise StateError(
            f"The tip of {wf.task_branch} ({tip[:12]}) is not the commit its gates passed "
            f"({gated[:12]}): the branch moved after the task's last commit step, so what would "
            "be pushed was never gated.",
            f"Put the branch back (`git branch -f {wf.task_branch} {gated[:12]}`) and run the "
            "command again; a change of your own goes in after review, on the pull request.",
        )
    return gated


def _facts(project: Project, store: Store, wf: Workflow, sha: str) -> body.Facts:
    events = store.events(wf.id)
    issue = next((e.payload for e in events if e.type == ISSUE_EVENT), {})
    return body.Facts(
        wf=wf,
        sha=sha,
        events=events,
        steps=store.steps(wf.id),
        usage=store.usage_totals(wf.id),
        repo=project.root,
        dashboard_url=project.settings.forge.dashboard_url,
        issue=dict(issue),
    )
