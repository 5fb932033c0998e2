"""The `supervisor` command line: parses arguments, calls `supervisor.lifecycle.tasks`, prints
results.

Errors from the project's hierarchy become one message (cause, then fix) and an exit code here and
nowhere else. Set SUPERVISOR_DEBUG=1 to see the traceback instead.

A command imports what it uses when it runs: `status`, `events`, `approve` and `reject` never
import Docker, networkx, the engine or the workers (tests/test_cli_imports.py), so a person does
not wait for them. `tasks`, `projects` and `images` below are modules imported on first use.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from supervisor.cli import (
    forge_commands,
    help_text,
    landing_commands,
    pr_commands,
    project_commands,
    role_commands,
    roles_config,
    sandbox_commands,
    scaleout,
    submission,
    web_command,
)
from supervisor.cli.common import (
    IdArgument,
    JsonOption,
    RepoOption,
    console,
    err_console,
    hide_flag_types,
    projects,
    tasks,
)
from supervisor.cli.failure import report
from supervisor.cli.interrupt import resumable
from supervisor.cli.plain import fit_to_output
from supervisor.cli.status_view import show_status
from supervisor.core.errors import ApprovalRequired, SupervisorError
from supervisor.core.plural import plural
from supervisor.guard.textsafe import visible
from supervisor.tui import keys as tui_keys

if TYPE_CHECKING:
    from supervisor.forge.base import Issue
    from supervisor.state.records import Workflow


app = typer.Typer(
    name="supervisor",
    help="Runs AI coding CLIs as stateless, sandboxed workers with orchestrator-enforced gates.",
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)
hide_flag_types()


def _version(value: bool) -> None:
    if value:
        from supervisor import __version__

        console.print(f"supervisor {__version__}")
        raise typer.Exit()


@app.callback(invoke_without_command=True)
def main_options(
    ctx: typer.Context,
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Show version.")
    ] = False,
) -> None:
    """supervisor: dependable long-running work with AI coding CLIs."""
    fit_to_output(console)
    fit_to_output(err_console)
    if ctx.invoked_subcommand is None:  # a bare `supervisor` asks what there is: not an error
        typer.echo(ctx.get_help())
        raise typer.Exit(0)


@app.command("start-task")
def start_task(
    description: Annotated[
        str | None, typer.Argument(metavar="TASK", help="What the task should achieve.")
    ] = None,
    repo: RepoOption = Path(),
    cli: Annotated[str | None, typer.Option(help="The AI CLI for the workers.")] = None,
    role: Annotated[
        list[str] | None,
        typer.Option("--role", metavar="STEP=ROLE", help="Run a workflow step with another role."),
    ] = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Start without confirming.")] = False,
    no_gate: Annotated[
        bool,
        typer.Option("--no-gate", help="Run without the workflow's gates (recorded in events)."),
    ] = False,
    allow_protected: Annotated[
        list[str] | None,
        typer.Option(
            "--allow-protected",
            metavar="PATTERN",
            help="A protected path (gate harness, config) this task may change.",
        ),
    ] = None,
    backend: Annotated[
        str | None,
        typer.Option(help="embedded (run here) or temporal (submit; `supervisor worker` runs it)."),
    ] = None,
    depth: Annotated[
        str,
        typer.Option(
            help="auto (an analyzer scores the task first), simple (no planner), planned (plan "
            "first) or researched (investigate, then plan)."
        ),
    ] = "auto",
    from_issue: Annotated[
        str | None,
        typer.Option(
            "--from-issue",
            metavar="URL|#N",
            help="The task's text from an issue (untrusted; an author without write access "
            "needs your approval first).",
        ),
    ] = None,
) -> None:
    """Create the task branch and run the workflow on it."""
    issue = None
    if from_issue is not None or description is None:
        description, issue = forge_commands.issue_text(description, from_issue, repo)
    submission.check_depth(depth)  # `--yes --backend temporal` alone runs without typer:
    link = submission.connecting(backend)  # supervisor/cli/submission.py, the same steps
    overrides = submission.role_overrides(role)
    if yes:
        submission.say_approvals(repo, cli, overrides, no_gate)
    else:
        _confirm_start(description, repo, cli, overrides, no_gate, depth)
    from supervisor.lifecycle.starting import backend_for

    if backend_for(repo, backend) == "temporal":
        if issue is not None:
            raise SupervisorError(
                "--from-issue runs the task here (embedded), not on Temporal's workers.",
                "Pass --backend embedded.",
            )
        with resumable(repo):
            submission.submit(
                description, repo, cli, overrides, no_gate, allow_protected, depth, link
            )
        return
    _run_here(description, repo, cli, overrides, no_gate, allow_protected, depth, issue)


def _confirm_start(
    description: str,
    repo: Path,
    cli: str | None,
    roles: dict[str, str],
    no_gate: bool,
    depth: str,
) -> None:
    """Without --yes a person sees the dry run before anything exists; with no terminal to ask,
    the refusal says how to start without asking."""
    if not sys.stdin.isatty():
        raise SupervisorError(
            "start-task needs confirmation, and there is no terminal to ask.",
            "Pass --yes to start without confirming.",
        )
    preview = projects.start_preview(
        description,
        repo,
        cli=cli,
        roles=roles,
        no_gate=no_gate,
        asked=depth,  # checked by start_task
    )
    stops = projects.approval_stops(repo, cli=cli, roles=roles, no_gate=no_gate)
    console.print(
        f"Dry run, nothing created yet:\n{preview}\n  approvals {stops}",
        highlight=False,
        markup=False,
    )
    typer.confirm("Start?", abort=True)


def _run_here(
    description: str,
    repo: Path,
    cli: str | None,
    roles: dict[str, str],
    no_gate: bool,
    allow_protected: list[str] | None,
    depth: str,
    issue: Issue | None = None,
) -> None:
    """The embedded backend: the workflow runs in this process, its progress on stderr; when it
    stops for an approval, what the approval is about is shown before the error says so."""
    from supervisor.cli.reporter import RichReporter

    try:
        with resumable(repo):
            wf = tasks.start_task(
                description,
                repo,
                cli=cli,
                roles=roles,
                reporter=RichReporter(err_console),
                no_gate=no_gate,
                allow_protected=allow_protected,
                depth=depth,  # checked by start_task
                before_first=forge_commands.before_first(issue),
            )
    except ApprovalRequired:
        _show_pending(repo, None)
        raise
    _finished(wf)


def _show_pending(repo: Path, workflow_id: int | None) -> None:
    """Before the "waits for approval" message: what the approval is about."""
    from supervisor.policy.approvals import pending

    project = projects.open_project(repo)
    found = tasks.workflows(repo)
    wf = next((w for w in reversed(found) if workflow_id in (None, w.id)), None)
    if wf is None:
        return
    for line in pending(wf, project.root):
        err_console.print(visible(line), highlight=False, markup=False)


app.command("complete-task")(landing_commands.complete_task)


@app.command()
def abandon(
    workflow_id: IdArgument,
    repo: RepoOption = Path(),
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Remove without confirming.")] = False,
) -> None:
    """Remove a task's branch, component branches, refs and worktrees, after a preview."""
    from supervisor.lifecycle import abandon as abandoning

    plan = abandoning.preview(workflow_id, repo)
    console.print(f"Abandon workflow {workflow_id} ({plan.workflow.status}); this removes:")
    for item in plan.items():
        console.print(visible(f"  {item}"), highlight=False, markup=False)
    for line in plan.warnings():  # what never landed, and what gets it back
        console.print(visible(line), highlight=False, markup=False, soft_wrap=True)
    if not yes:
        if not sys.stdin.isatty():
            raise SupervisorError(
                "abandon needs confirmation, and there is no terminal.",
                "Pass --yes to remove without confirming.",
            )
        typer.confirm("Remove?", abort=True)
    done = abandoning.abandon(workflow_id, repo)
    console.print(f"[green]✓[/green] workflow {workflow_id} abandoned")
    for branch, sha in done.tips.items():  # as `git branch -D` says it, and how to undo it
        undo = f"; never landed: {done.recovery(branch)}" if branch in done.unlanded else ""
        console.print(
            visible(f"  deleted branch {branch} (was {sha}){undo}"),
            highlight=False,
            markup=False,
            soft_wrap=True,
        )


@app.command()
def resume(
    workflow_id: IdArgument,
    repo: RepoOption = Path(),
    here: Annotated[
        bool, typer.Option("--here", help="Run a task submitted to Temporal in this checkout.")
    ] = False,
) -> None:
    """Continue a workflow from its last checkpoint (after a crash, failure or approval)."""
    from supervisor.cli.reporter import RichReporter
    from supervisor.cli.scaleout import resume_elsewhere

    if resume_elsewhere(repo, workflow_id, here):
        return
    try:
        with resumable(repo, workflow_id):
            wf = tasks.resume(workflow_id, repo, reporter=RichReporter(err_console))
    except ApprovalRequired:
        _show_pending(repo, workflow_id)
        raise
    _finished(wf)


AsOption = Annotated[
    str | None,
    typer.Option(
        "--as", metavar="EMAIL", help="Who decides (default: git user.email).", show_default=False
    ),
]


@app.command()
def approve(
    workflow_id: IdArgument,
    repo: RepoOption = Path(),
    who: AsOption = None,
    extend: Annotated[
        float | None,
        typer.Option(
            "--extend", metavar="DOLLARS", help="Raise a paused workflow's budget by these dollars."
        ),
    ] = None,
    extend_tokens: Annotated[
        int | None,
        typer.Option("--extend-tokens", metavar="TOKENS", help="Raise it by these tokens."),
    ] = None,
) -> None:
    """Approve the step a workflow is waiting on, or raise the budget it stopped at."""
    from supervisor.core.errors import AlreadyDecidedError
    from supervisor.lifecycle.task_state import decide
    from supervisor.policy.approvals import risk_lines

    try:
        wf = decide(
            workflow_id,
            repo,
            approve=True,
            approver=who,
            extend_usd=extend,
            extend_tokens=extend_tokens,
        )
    except AlreadyDecidedError as e:
        if e.decision != "approved":
            raise
        # Approving twice is no mistake worth an error: it stands approved, and says what's next.
        console.print(f"{e.message} {e.hint}", highlight=False, markup=False)
        return
    if extend is not None or extend_tokens is not None:
        console.print(
            f"Budget raised. Continue with: supervisor resume {workflow_id}", highlight=False
        )
        return
    risk = wf.context.get("risk") or {}
    for line in risk_lines(wf, str(wf.context.get("approval_step") or "")):
        console.print(visible(line), highlight=False, markup=False)
    if wf.status == "awaiting_approval" and risk.get("action") == "require_multi_approval":
        given = risk.get("approved_by") or []
        more = int(risk.get("approvers", 2)) - len(given)
        console.print(
            f"Approval {len(given)} of {risk.get('approvers', 2)} recorded; it waits for "
            f"{more} more distinct {plural(more, 'approver')}.",
            highlight=False,
        )
        return
    from supervisor.cli.scaleout import signal_decision

    if not signal_decision(repo, workflow_id):
        console.print(f"Approved. Continue with: supervisor resume {workflow_id}")


@app.command()
def reject(
    workflow_id: IdArgument,
    reason: Annotated[str, typer.Option("--reason", help="Why; it is fed back to the step.")],
    repo: RepoOption = Path(),
    who: AsOption = None,
) -> None:
    """Reject the step a workflow is waiting on; the step runs again with your reason."""
    from supervisor.lifecycle.task_state import decide
    from supervisor.policy.approvals import risk_lines

    wf = decide(workflow_id, repo, approve=False, reason=reason, approver=who)
    for line in risk_lines(wf, str(wf.context.get("approval_step") or "")):
        console.print(visible(line), highlight=False, markup=False)
    from supervisor.cli.scaleout import signal_decision

    if not signal_decision(repo, workflow_id):
        console.print(f"Rejected. Re-run the step with: supervisor resume {workflow_id}")


@app.command()
def status(
    workflow_id: Annotated[int | None, typer.Argument(metavar="ID", help="A workflow id.")] = None,
    repo: RepoOption = Path(),
    as_json: JsonOption = False,
    watch: Annotated[
        bool,
        typer.Option(
            "--watch", "-w", help="Redraw until Ctrl-C, or until the workflow ends or waits."
        ),
    ] = False,
    interval: Annotated[
        float, typer.Option(metavar="SECONDS", help="Seconds between redraws (--watch).")
    ] = 2.0,
    exit_status: Annotated[
        bool,
        typer.Option(
            "--exit-status",
            help="With --watch: exit 1 if the workflow fails or its supervisor died, 10 if it "
            "waits for a person, 0 when it completes (130 on Ctrl-C, with or without it).",
        ),
    ] = False,
) -> None:
    """List workflows, or show one in detail (with what a waiting approval is about)."""
    if watch or exit_status:
        from supervisor.cli.watch import watch as watching

        code = watching(console, repo, workflow_id, max(0.1, interval), exit_status)
        raise typer.Exit(code)
    show_status(lambda: console, repo, workflow_id, as_json=as_json)


@app.command(epilog=tui_keys.help_text())
def tui(
    repo: RepoOption = Path(),
    interval: Annotated[
        float, typer.Option(metavar="SECONDS", help="Seconds between refreshes.")
    ] = 1.0,
) -> None:
    """Watch this repository's workflows and approve or reject with the change in view."""
    from supervisor.tui.app import run

    run(repo, max(0.1, interval))


@app.command()
def events(
    workflow_id: IdArgument,
    repo: RepoOption = Path(),
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per line.")] = False,
) -> None:
    """The workflow's event log."""
    from supervisor.lifecycle import task_state as access

    if as_json:
        from supervisor.cli.events_json import stream_events

        stream_events(repo, workflow_id)
        return
    with access.reading(repo) as store:
        store.workflow(workflow_id)
        log = store.events(workflow_id)
    from supervisor.cli.output import show
    from supervisor.views.listings import events as listed

    if not console.is_terminal:
        show(console, listed(log))  # whole rows, the payload's SHAs and paths uncut
        return
    from supervisor.views.render import events_view

    console.print(events_view(log, console.width))


app.add_typer(roles_config.roles_app, name="roles")
app.add_typer(role_commands.role_app, name="role")
app.add_typer(roles_config.config_app, name="config")
app.add_typer(sandbox_commands.sandbox_app, name="sandbox")
app.add_typer(web_command.web_app, name="web")
app.add_typer(pr_commands.pr_app, name="pr")
project_commands.register(app)  # init, context, analyze-deps, doctor, metrics, demo, setup
app.command("worker")(scaleout.worker)
help_text.arrange(app)  # panels, examples, exit codes (supervisor/cli/help_text.py)


def main() -> None:
    try:
        app()
    except SupervisorError as e:
        report(e)


def _finished(wf: Workflow) -> None:
    if wf.status == "completed":
        console.print(
            f"[green]✓[/green] Workflow {wf.id} completed: branch [bold]{wf.task_branch}[/bold]"
        )
    else:
        console.print(f"Workflow {wf.id}: {wf.status}")
