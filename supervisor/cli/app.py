"""The `supervisor` command line: parses arguments, calls `supervisor.tasks`, prints results.

Errors from the project's hierarchy become one message (cause, then fix) and an exit code here and
nowhere else. Set SUPERVISOR_DEBUG=1 to see the traceback instead.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from supervisor import __version__, tasks
from supervisor.cli.render import RichReporter, events_table, workflow_detail, workflows_table
from supervisor.errors import ApprovalRequired, SupervisorError

app = typer.Typer(
    name="supervisor",
    help="Runs AI coding CLIs as stateless, sandboxed workers with orchestrator-enforced gates.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
console = Console()
err_console = Console(stderr=True)

RepoOption = Annotated[
    Path, typer.Option("--repo", help="The git repository to work on.", show_default="cwd")
]


def _version(value: bool) -> None:
    if value:
        console.print(f"supervisor {__version__}")
        raise typer.Exit()


@app.callback()
def main_options(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Show version.")
    ] = False,
) -> None:
    """supervisor: dependable long-running work with AI coding CLIs."""


@app.command("start-task")
def start_task(
    description: Annotated[str, typer.Argument(help="What the task should achieve.")],
    repo: RepoOption = Path(),
    cli: Annotated[str | None, typer.Option(help="The AI CLI for the workers.")] = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Start without confirming.")] = False,
) -> None:
    """Create the task branch and run the workflow on it."""
    if not yes:
        if not sys.stdin.isatty():
            raise SupervisorError(
                "start-task needs confirmation, and there is no terminal to ask.",
                "Pass --yes to start without confirming.",
            )
        typer.confirm(f"Start a task in {repo.resolve()} on a new branch from HEAD?", abort=True)
    wf = tasks.start_task(description, repo, cli=cli, reporter=RichReporter(err_console))
    _finished(wf)


@app.command()
def resume(
    workflow_id: Annotated[int, typer.Argument(help="The workflow id.")],
    repo: RepoOption = Path(),
) -> None:
    """Continue a workflow from its last checkpoint (after a crash, failure or approval)."""
    _finished(tasks.resume(workflow_id, repo, reporter=RichReporter(err_console)))


@app.command()
def approve(
    workflow_id: Annotated[int, typer.Argument(help="The workflow id.")],
    repo: RepoOption = Path(),
) -> None:
    """Approve the step a workflow is waiting on."""
    tasks.decide(workflow_id, repo, approve=True)
    console.print(f"Approved. Continue with: supervisor resume {workflow_id}")


@app.command()
def reject(
    workflow_id: Annotated[int, typer.Argument(help="The workflow id.")],
    reason: Annotated[str, typer.Option("--reason", help="Why; it is fed back to the step.")],
    repo: RepoOption = Path(),
) -> None:
    """Reject the step a workflow is waiting on; the step runs again with your reason."""
    tasks.decide(workflow_id, repo, approve=False, reason=reason)
    console.print(f"Rejected. Re-run the step with: supervisor resume {workflow_id}")


@app.command()
def status(
    workflow_id: Annotated[int | None, typer.Argument(help="A workflow id.")] = None,
    repo: RepoOption = Path(),
) -> None:
    """List workflows, or show one in detail."""
    if workflow_id is None:
        console.print(workflows_table(tasks.workflows(repo)))
        return
    with tasks.reading(repo) as store:
        console.print(workflow_detail(store, workflow_id))


@app.command()
def events(
    workflow_id: Annotated[int, typer.Argument(help="The workflow id.")],
    repo: RepoOption = Path(),
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per line.")] = False,
) -> None:
    """The workflow's event log."""
    with tasks.reading(repo) as store:
        store.workflow(workflow_id)
        log = store.events(workflow_id)
    if as_json:
        for e in log:
            record = {**e.__dict__, "timestamp": e.timestamp.isoformat()}
            sys.stdout.write(json.dumps(record, default=str) + "\n")
        return
    console.print(events_table(log))


@app.command()
def demo(
    keep: Annotated[
        Path | None, typer.Option(help="Make the demo repository here and keep it.")
    ] = None,
) -> None:
    """Run a real task on a throw-away repository, answered by a scripted model API."""
    from supervisor.demo import run_demo

    run_demo(console, err_console, keep)


def main() -> None:
    try:
        app()
    except ApprovalRequired as e:
        err_console.print(f"[yellow]⏸ {e.message}[/yellow]")
        if e.hint:
            err_console.print(f"  next: {e.hint}")
        sys.exit(e.exit_code)
    except SupervisorError as e:
        if os.environ.get("SUPERVISOR_DEBUG"):
            raise
        err_console.print(f"[red]error:[/red] {e.message}", highlight=False)
        if e.hint:
            err_console.print(f"  fix: {e.hint}", highlight=False)
        sys.exit(e.exit_code)


def _finished(wf: tasks.Workflow) -> None:
    if wf.status == "completed":
        console.print(
            f"[green]✓[/green] Workflow {wf.id} completed: branch [bold]{wf.task_branch}[/bold]"
        )
    else:
        console.print(f"Workflow {wf.id}: {wf.status}")
