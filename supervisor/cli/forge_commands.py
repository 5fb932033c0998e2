"""The forge's part of `start-task` and `complete-task`: an issue read as a task's text, and a
pull request opened for a finished task. Parsing and rendering only; the lifecycle decides
(supervisor/lifecycle/issue_task.py, pull_request.py). The forge's client libraries load here,
when one of these runs, never for `status`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from supervisor.cli.common import console, err_console
from supervisor.core.errors import SupervisorError
from supervisor.guard.textsafe import visible

if TYPE_CHECKING:
    from pathlib import Path

    from supervisor.forge.base import Issue


def issue_text(description: str | None, from_issue: str | None, repo: Path) -> tuple[str, Issue]:
    """The task's text from the issue `--from-issue` names, and the issue."""
    if description is not None or from_issue is None:
        raise SupervisorError(
            "start-task takes a task's text or --from-issue, not both and not neither.",
            'Pass start-task "..." or start-task --from-issue URL|#N.',
        )
    from supervisor.lifecycle import issue_task

    issue = issue_task.read_issue(from_issue, repo)
    who = visible(issue.author, lines=False)
    if issue_task.needs_approval(issue):
        err_console.print(
            visible(
                f"Issue #{issue.number} is by {who}, who cannot write to the repository: the "
                "task waits for your approval before any worker runs."
            ),
            highlight=False,
            markup=False,
        )
    return issue_task.description(issue), issue


def before_first(issue: Issue | None) -> Any:
    if issue is None:
        return None
    from supervisor.lifecycle import issue_task

    return issue_task.before_first_step(issue)


def open_pr(
    workflow_id: int, repo: Path, remote: str, base: str | None, draft: bool, forge: str | None
) -> None:
    from supervisor.lifecycle.pull_request import open_pull_request

    opened = open_pull_request(
        workflow_id, repo, remote=remote, base=base, draft=draft, forge=forge
    )
    verb = "opened" if opened.request.created else "updated"
    number = ("!" if opened.target.kind == "gitlab" else "#") + str(opened.request.number)
    console.print(
        visible(
            f"✓ {opened.noun} {number} {verb}: {opened.request.url} (pushed {opened.sha[:12]}, "
            "the commit its gates passed)"
        ),
        highlight=False,
        markup=False,
    )
