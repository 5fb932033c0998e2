"""`supervisor pr sync <id>`: a pull request's new review comments and failing checks become the
task's next round, gated and reviewed like any, then pushed, and each thread is answered with the
commit that addressed it.

The round is the engine's own way back: the comments and the checks' log tails become the
feedback of the step a review's rejection sends work back to (the implementer), and the
completed task is reopened there (supervisor/workflow/resuming.py `reopen`, the engine's writer);
`resume` then runs it through the gates, the reviews and the commit step. Only the commit the
gates passed is pushed (`complete-task --pr`'s own path, supervisor/lifecycle/pull_request.py).

What counts: a comment or a check no earlier sync took (each sync records what it took in a
`pr_synced` event; the replies it wrote in `pr_answered`, so they are never taken back), and
of the comments only those whose author may write to the repository, unless the user's own
config says `forge.comments_from: everyone` (a repository's config never widens it:
supervisor/core/trustmap.py). The text is the attacker's: pr_feedback.py quotes it as data.

A round that stops for a person (an approval) or fails is finished with `resume`; the next
`pr sync` then pushes it and answers the threads, taking any newer comments into another round.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from supervisor.core.config import WorkflowDef
from supervisor.core.errors import ConfigError, StateError
from supervisor.forge import target
from supervisor.lifecycle import pr_feedback, refusals
from supervisor.lifecycle.opening import open_project, require_trust
from supervisor.lifecycle.pull_request import EVENT as PR_EVENT
from supervisor.lifecycle.pull_request import gated_tip, open_pull_request
from supervisor.state.locks import task_lock
from supervisor.state.store import EventSpec
from supervisor.workflow import resuming

if TYPE_CHECKING:
    from pathlib import Path

    from supervisor.forge.base import Check, Comment, Forge
    from supervisor.lifecycle.opening import Project
    from supervisor.state.store import Event, Workflow
    from supervisor.workflow.engine import Reporter

SYNCED = "pr_synced"
ANSWERED = "pr_answered"
MARK = "<!-- supervisor:addressed -->"
"""In every reply the sync writes: a reply is never taken as a comment."""


@dataclass
class Synced:
    """What one sync did."""

    workflow: Workflow
    number: int
    noun: str
    comments: int = 0
    """New comments taken into a round."""
    checks: int = 0
    """New failing checks taken into a round."""
    ignored: list[str] = field(default_factory=list)
    """Authors of new comments left out: they may not write to the repository."""
    pushed: str | None = None
    """The gated commit pushed, when one was."""
    answered: int = 0
    """Threads (and the conversation) answered with that commit."""


def sync_pull_request(
    wf_id: int, path: Path, *, reporter: Reporter | None = None, forge: str | None = None
) -> Synced:
    """Take task `wf_id`'s pull request's new comments and failing checks into a round, run it,
    push its gated commit and answer the threads; or, with nothing new, push and answer what an
    earlier round left (it stopped for an approval that was given since)."""
    from supervisor.forge.connect import connect

    project = open_project(path)
    require_trust(project)  # a repository's `forge.api_url` routes the token: trusted or refused
    with project.store() as store:
        wf = store.workflow(wf_id)
        events = store.events(wf_id)
    refusals.not_abandoned(wf, "pr sync")
    opened = _opened(wf, events)
    remote = str(opened.payload.get("remote") or "origin")
    kind = forge or str(opened.payload.get("forge") or "") or None
    where = target.resolve(target.remote_url(project.root, remote), project.settings.forge, kind)
    client = connect(where)
    number = int(opened.payload["number"])
    found = Synced(wf, number, client.noun)
    comments, checks = _new(project, client, events, number, str(opened.payload["sha"]), found)
    if comments or checks:
        _reopen(project, wf_id, comments, checks, number, found)
        from supervisor.lifecycle import tasks

        found.workflow = tasks.resume(wf_id, path, reporter=reporter)
    if found.workflow.status == "completed":
        _publish(project, client, wf_id, opened, found, path, kind)
    return found


def _opened(wf: Workflow, events: list[Event]) -> Event:
    opened = [e for e in events if e.type == PR_EVENT]
    if not opened:
        raise StateError(
            f"Workflow {wf.id} has no pull request to sync with.",
            f"Open one first: `supervisor complete-task {wf.id} --pr`.",
        )
    return opened[-1]


def _new(
    project: Project, client: Forge, events: list[Event], number: int, head: str, found: Synced
) -> tuple[list[Comment], list[Check]]:
    """The comments and failing checks no earlier sync took, of authors that count."""
    seen = {str(i) for e in events if e.type in (SYNCED, ANSWERED) for i in _ids(e.payload)}
    everyone = project.settings.forge.comments_from == "everyone"
    comments = []
    for comment in client.comments(number):
        if comment.id in seen or MARK in comment.body:
            continue
        if comment.author_can_write or everyone:
            comments.append(comment)
        elif comment.author not in found.ignored:
            found.ignored.append(comment.author)
    checks = [c for c in client.failing_checks(number, head) if c.id not in seen]
    found.comments, found.checks = len(comments), len(checks)
    return comments, checks


def _ids(payload: dict[str, Any]) -> list[Any]:
    return [
        *(c["id"] for c in payload.get("comments") or []),
        *(payload.get("checks") or []),
        *(payload.get("replies") or []),
    ]


def _reopen(
    project: Project,
    wf_id: int,
    comments: list[Comment],
    checks: list[Check],
    number: int,
    found: Synced,
) -> None:
    """The completed task reopened at its fix-up step with the feedback, and what was taken
    recorded, in one transaction."""
    where = f"{found.noun} {'!' if found.noun == 'merge request' else '#'}{number}"
    text = pr_feedback.feedback(comments, checks, where)
    with task_lock(project.state_dir, wf_id), project.store() as store:
        wf = store.workflow(wf_id)
        step = resuming.fix_up_step(WorkflowDef.model_validate(wf.definition))
        if step is None:
            raise ConfigError(
                f"Workflow {wf_id}'s definition sends no work back (no step has on_reject or "
                "on_fail), so there is no step for a fix-up round.",
                "Give its review an `on_reject: implement` (see config/workflow_templates/).",
            )
        taken = EventSpec(
            SYNCED,
            step=step,
            status="taken",
            payload={
                "number": number,
                "comments": [
                    {"id": c.id, "thread": c.thread, "author": c.author} for c in comments
                ],
                "checks": [c.id for c in checks],
                "check_names": [c.name for c in checks],
                "ignored_authors": found.ignored,
            },
        )
        resuming.reopen(store, wf, step, text, [taken])


def _publish(
    project: Project,
    client: Forge,
    wf_id: int,
    opened: Event,
    found: Synced,
    path: Path,
    kind: str | None,
) -> None:
    """The gated commit pushed (when the pull request's head is not it yet) and every thread
    taken but not yet answered answered with it."""
    with project.store() as store:
        wf = store.workflow(wf_id)
        sha = gated_tip(project, store, wf)
        events = store.events(wf_id)
        pending = _pending(events)
    pushed = str(([e for e in events if e.type == PR_EVENT][-1]).payload["sha"])
    if sha == pushed and not any(pending):
        return
    if sha != pushed:
        open_pull_request(
            wf_id,
            path,
            remote=str(opened.payload.get("remote") or "origin"),
            base=opened.payload.get("base"),
            forge=kind,
        )
        found.pushed = sha
    comments, checks = pending
    replies = _answer(client, found.number, sha, comments, checks)
    found.answered = len(replies)
    with project.store() as store:
        store.add_event(
            wf_id,
            EventSpec(
                ANSWERED,
                status="answered",
                payload={
                    "sha": sha,
                    "comments": [{"id": c["id"]} for c in comments],
                    "checks": checks,
                    "replies": replies,
                },
            ),
        )


def _pending(events: list[Event]) -> tuple[list[dict[str, Any]], list[str]]:
    """The comments and checks taken by a sync and not answered yet."""
    answered = {str(i) for e in events if e.type == ANSWERED for i in _ids(e.payload)}
    taken = [e.payload for e in events if e.type == SYNCED]
    comments = [c for p in taken for c in p.get("comments") or [] if c["id"] not in answered]
    checks = [c for p in taken for c in p.get("checks") or [] if c not in answered]
    return comments, checks


def _answer(
    client: Forge, number: int, sha: str, comments: list[dict[str, Any]], checks: list[str]
) -> list[str]:
    """One reply per thread, and one on the conversation for comments made there and checks."""
    said = f"Addressed in {sha} (the commit its gates passed).\n\n{MARK}"
    threads = list(dict.fromkeys(c["thread"] for c in comments if c.get("thread")))
    replies = [client.reply(number, thread, said) for thread in threads]
    if checks or any(not c.get("thread") for c in comments):
        replies.append(client.reply(number, "", said))
    return replies
