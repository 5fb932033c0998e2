"""`supervisor pr sync ID`: the pull request's new review comments and failing checks as the
task's next, gated round, pushed and answered (supervisor/lifecycle/pr_sync.py decides; this
parses and renders). The forge's client libraries load when it runs, never for `status`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from supervisor.cli.common import IdArgument, RepoOption, console, err_console
from supervisor.core.plural import counted
from supervisor.guard.textsafe import visible

PR_HELP = "Keep a task's pull (or merge) request and the task in step."
SYNC_EPILOG = "\nEXAMPLES\n  $ supervisor pr sync 3\n  $ supervisor pr sync 3 --forge gitlab"

pr_app = typer.Typer(help=PR_HELP, no_args_is_help=True)


@pr_app.command("sync", epilog=SYNC_EPILOG)
def sync(
    workflow_id: IdArgument,
    repo: RepoOption = Path(),
    forge: Annotated[
        str | None,
        typer.Option(
            metavar="FORGE", help="github or gitlab, when the remote's host says neither."
        ),
    ] = None,
) -> None:
    """Take the pull request's new review comments and failing checks into a fix-up round.

    The round is gated and reviewed like any; its gated commit is pushed, each thread answered.

    Only writers' comments count, unless your own config says forge.comments_from: everyone."""
    from supervisor.cli.reporter import RichReporter
    from supervisor.lifecycle.pr_sync import sync_pull_request

    done = sync_pull_request(workflow_id, repo, reporter=RichReporter(err_console), forge=forge)
    if done.ignored:
        names = ", ".join(done.ignored)
        err_console.print(
            visible(f"Left out the comments of {names}: they cannot write to the repository."),
            highlight=False,
            markup=False,
        )
    took = f"{counted(done.comments, 'comment')} and {counted(done.checks, 'failing check')}"
    lines = [
        f"Took {took} into a fix-up round." if done.comments or done.checks else "Nothing new."
    ]
    if done.pushed:
        lines.append(f"Pushed {done.pushed[:12]}, the commit its gates passed.")
    if done.answered:
        lines.append(f"Answered {counted(done.answered, 'thread')} with it.")
    if done.workflow.status != "completed":
        lines.append(
            f"Workflow {done.workflow.id} is {done.workflow.status}: once it completes "
            f"(`supervisor resume {done.workflow.id}`), `supervisor pr sync {done.workflow.id}` "
            "pushes it."
        )
    console.print(visible(" ".join(lines)), highlight=False, markup=False)
