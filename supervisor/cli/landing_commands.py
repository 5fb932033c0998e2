"""`supervisor complete-task`: land a finished task on its start branch after a preview, or, with
`--pr`, push its gated commit and open a pull or merge request (supervisor/cli/forge_commands.py).
Registered by supervisor/cli/app.py in its place among the commands."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from supervisor.cli import forge_commands
from supervisor.cli.common import IdArgument, RepoOption, console, tasks
from supervisor.core.errors import SupervisorError
from supervisor.core.plural import counted
from supervisor.guard.textsafe import visible


def complete_task(
    workflow_id: IdArgument,
    repo: RepoOption = Path(),
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Land without confirming.")] = False,
    squash: Annotated[bool, typer.Option("--squash", help="Land it as one commit.")] = False,
    merge: Annotated[bool, typer.Option("--merge", help="Land it with a merge commit.")] = False,
    rebase: Annotated[bool, typer.Option("--rebase", help="Replay its commits.")] = False,
    pr: Annotated[
        bool,
        typer.Option("--pr", help="Push its gated commit and open (or update) a pull request."),
    ] = False,
    remote: Annotated[
        str, typer.Option(metavar="REMOTE", help="The git remote --pr pushes to.")
    ] = "origin",
    draft: Annotated[
        bool, typer.Option("--draft", help="Open the pull request as a draft.")
    ] = False,
    base: Annotated[
        str | None,
        typer.Option(metavar="BRANCH", help="The branch --pr targets (default: its start branch)."),
    ] = None,
    forge: Annotated[
        str | None,
        typer.Option(
            metavar="FORGE", help="github or gitlab, when the remote's host says neither."
        ),
    ] = None,
) -> None:
    """Land a completed task's branch on the branch it started from, after a preview.

    Squash by default for a single-component task, merge otherwise.

    --pr instead pushes the gated commit and opens a pull or merge request."""
    if pr:
        forge_commands.open_pr(workflow_id, repo, remote, base, draft, forge)
        return
    from supervisor.workflow.history import default_mode

    chosen = [m for m, on in (("squash", squash), ("merge", merge), ("rebase", rebase)) if on]
    if len(chosen) > 1:
        raise SupervisorError(
            f"complete-task got {', '.join('--' + m for m in chosen)}; they exclude each other.",
            "Pass one of --squash, --merge or --rebase (or none for the default).",
        )
    preview = tasks.completion_preview(workflow_id, repo)
    mode = chosen[0] if chosen else default_mode(preview.workflow.context)
    console.print(
        f"{mode.capitalize()} [bold]{preview.workflow.task_branch}[/bold] into "
        f"[bold]{preview.base_branch}[/bold]: {counted(len(preview.commits), 'commit')}"
    )
    for line in preview.commits:
        console.print(visible(f"  {line}"), highlight=False, markup=False)
    console.print(preview.diffstat, highlight=False, markup=False)
    if not yes:
        if not sys.stdin.isatty():
            raise SupervisorError(
                "complete-task needs confirmation, and there is no terminal.",
                f"Pass --yes to {mode} without confirming.",
            )
        # The question names the mode the preview announced ("Squash ... into main?").
        typer.confirm(f"{mode.capitalize()} into {preview.base_branch}?", abort=True)
    new = tasks.complete_task(workflow_id, repo, mode)
    console.print(f"[green]✓[/green] {preview.base_branch} now at {new[:12]} ({mode})")
