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
from supervisor.cli.render import (
    RichReporter,
    config_table,
    doctor_table,
    events_table,
    init_report,
    metrics_tables,
    pack_report,
    role_detail,
    roles_table,
    sandbox_report,
    workflow_detail,
    workflows_table,
)
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
    role: Annotated[
        list[str] | None,
        typer.Option("--role", help="STEP=ROLE: run a workflow step with another role."),
    ] = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Start without confirming.")] = False,
) -> None:
    """Create the task branch and run the workflow on it."""
    overrides = {}
    for item in role or []:
        step, sep, name = item.partition("=")
        if not sep or not step or not name:
            raise SupervisorError(
                f"--role {item!r} is not STEP=ROLE.", "E.g. --role implement=implementer_fast"
            )
        overrides[step] = name
    if not yes:
        if not sys.stdin.isatty():
            raise SupervisorError(
                "start-task needs confirmation, and there is no terminal to ask.",
                "Pass --yes to start without confirming.",
            )
        preview = tasks.start_preview(description, repo, cli=cli, roles=overrides)
        console.print(f"Dry run, nothing created yet:\n{preview}", highlight=False, markup=False)
        typer.confirm("Start?", abort=True)
    wf = tasks.start_task(
        description, repo, cli=cli, roles=overrides, reporter=RichReporter(err_console)
    )
    _finished(wf)


@app.command("complete-task")
def complete_task(
    workflow_id: Annotated[int, typer.Argument(help="The workflow id.")],
    repo: RepoOption = Path(),
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Merge without confirming.")] = False,
    squash: Annotated[bool, typer.Option("--squash", help="Land it as one commit.")] = False,
    merge: Annotated[bool, typer.Option("--merge", help="Land it with a merge commit.")] = False,
    rebase: Annotated[bool, typer.Option("--rebase", help="Replay its commits.")] = False,
) -> None:
    """Land a completed task's branch on the branch it started from, after a preview (squash
    by default for a single-component task, merge otherwise)."""
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
        f"[bold]{preview.base_branch}[/bold]: {len(preview.commits)} commit(s)"
    )
    for line in preview.commits:
        console.print(f"  {line}", highlight=False, markup=False)
    console.print(preview.diffstat, highlight=False, markup=False)
    if not yes:
        if not sys.stdin.isatty():
            raise SupervisorError(
                "complete-task needs confirmation, and there is no terminal.",
                "Pass --yes to merge without confirming.",
            )
        typer.confirm("Merge?", abort=True)
    new = tasks.complete_task(workflow_id, repo, mode)
    console.print(f"[green]✓[/green] {preview.base_branch} now at {new[:12]} ({mode})")


@app.command()
def abandon(
    workflow_id: Annotated[int, typer.Argument(help="The workflow id.")],
    repo: RepoOption = Path(),
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Remove without confirming.")] = False,
) -> None:
    """Remove a task's branch, component branches, refs and worktrees, after a preview."""
    from supervisor import abandon as abandoning

    plan = abandoning.preview(workflow_id, repo)
    console.print(f"Abandon workflow {workflow_id} ({plan.workflow.status}); this removes:")
    for item in plan.items():
        console.print(f"  {item}", highlight=False, markup=False)
    if not yes:
        if not sys.stdin.isatty():
            raise SupervisorError(
                "abandon needs confirmation, and there is no terminal.",
                "Pass --yes to remove without confirming.",
            )
        typer.confirm("Remove?", abort=True)
    abandoning.abandon(workflow_id, repo)
    console.print(f"[green]✓[/green] workflow {workflow_id} abandoned")


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


roles_app = typer.Typer(help="Inspect roles: built-in, user and project.", no_args_is_help=True)
config_app = typer.Typer(help="Inspect the effective configuration.", no_args_is_help=True)
app.add_typer(roles_app, name="roles")
app.add_typer(config_app, name="config")


@app.command()
def init(
    repo: RepoOption = Path(),
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Accept the suggestions.")] = False,
) -> None:
    """Detect the project, choose role packs, and write .supervisor/."""
    from supervisor.initialize import PACK_TITLES, initialize, pack_roles

    root = tasks.open_project(repo).root

    def choose(pack: str, suggested: bool) -> bool:
        if yes or not sys.stdin.isatty():
            return suggested
        roles = ", ".join(pack_roles(pack))
        return typer.confirm(
            f"  [{'x' if suggested else ' '}] {PACK_TITLES[pack]} ({roles})", default=suggested
        )

    report = initialize(root, choose)
    console.print(init_report(report))


@roles_app.command("list")
def roles_list(repo: RepoOption = Path()) -> None:
    """Every role and where it comes from (project shadows user shadows built-in)."""
    from supervisor.roles import list_roles

    console.print(roles_table(list_roles(tasks.open_project(repo).root)))


@roles_app.command("show")
def roles_show(
    name: Annotated[str, typer.Argument(help="The role name.")], repo: RepoOption = Path()
) -> None:
    """The resolved role, with the file each field came from."""
    from supervisor.roles import resolve_role

    console.print(role_detail(resolve_role(name, tasks.open_project(repo).root)))


@config_app.command("show")
def config_show(
    repo: RepoOption = Path(),
    cli: Annotated[str | None, typer.Option(help="As if given to start-task.")] = None,
) -> None:
    """The effective configuration and which file each value came from."""
    from supervisor.config import settings_provenance

    overrides = {"cli": cli} if cli else None
    project = tasks.open_project(repo, overrides)
    console.print(config_table(project.settings, settings_provenance(project.root, overrides)))


@app.command()
def context(
    role: Annotated[str, typer.Argument(help="The role whose context to pack.")],
    target: Annotated[
        list[str] | None, typer.Option("--target", help="A target file (repeatable).")
    ] = None,
    task: Annotated[str, typer.Option(help="The task text to budget for.")] = "(dry run)",
    repo: RepoOption = Path(),
    show: Annotated[bool, typer.Option("--show", help="Print the whole prompt too.")] = False,
) -> None:
    """Dry run: what the role would be sent, its token count, what was pruned or redacted."""
    prompt, pack = tasks.context_preview(repo, role, target or [], task)
    if show:
        console.print(prompt, markup=False, highlight=False)
    console.print(pack_report(pack))


sandbox_app = typer.Typer(help="The project's sandbox image.", no_args_is_help=True)
app.add_typer(sandbox_app, name="sandbox")


@sandbox_app.command("init")
def sandbox_init(repo: RepoOption = Path()) -> None:
    """Write .supervisor/sandbox/Dockerfile for the detected stack (never over an edited one)."""
    path, written = tasks.sandbox_init(repo)
    console.print(f"{'Wrote' if written else 'Left alone (exists)'}: {path}")


@sandbox_app.command("build")
def sandbox_build(
    repo: RepoOption = Path(),
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Rebuild every layer.")] = False,
) -> None:
    """Build the project image (dependencies installed now, with network)."""
    tag, seconds = tasks.sandbox_build(
        repo,
        no_cache=no_cache,
        on_output=lambda t: err_console.print(t.rstrip(), style="dim", markup=False),
    )
    console.print(f"{tag}: " + ("up to date" if seconds is None else f"built in {seconds:.1f} s"))


@sandbox_app.command("status")
def sandbox_status(repo: RepoOption = Path()) -> None:
    """Which image gates use, built from what, when, and its size."""
    console.print(sandbox_report(tasks.sandbox_status(repo)))


@sandbox_app.command("shell")
def sandbox_shell(
    repo: RepoOption = Path(),
    command: Annotated[
        list[str] | None, typer.Argument(help="Run this instead of a shell.")
    ] = None,
) -> None:
    """A shell in the gate sandbox (no network, your checkout read-only) to debug a gate."""
    argv = tasks.sandbox_shell_argv(repo, command)
    os.execvp(argv[0], argv)


@app.command("analyze-deps")
def analyze_deps(
    workflow_id: Annotated[int, typer.Argument(help="The workflow id.")],
    repo: RepoOption = Path(),
) -> None:
    """Suggest dependencies between the plan's components from their files' imports."""
    found = tasks.analyze_deps(workflow_id, repo)
    if not found:
        console.print("No undeclared dependencies: the plan already orders every import.")
        return
    console.print("Suggested dependencies (not applied; add them to the plan's depends_on):")
    for component, dependency, why in found:
        console.print(f"  {component} → depends on {dependency}   ({why})", highlight=False)


@app.command()
def doctor(repo: RepoOption = Path()) -> None:
    """Check Docker, the sandbox image, each CLI and its credentials, Repomix and git."""
    from supervisor.doctor import run_checks

    project = tasks.open_project(repo)
    checks = run_checks(project.root, project.settings)
    console.print(doctor_table(checks))
    missing = [c for c in checks if c.required and not c.ok]
    if missing:
        raise SupervisorError(
            f"{len(missing)} thing(s) the configured workflow needs are missing: "
            f"{', '.join(c.name for c in missing)}.",
            "Apply the fixes in the table above.",
        )


@app.command()
def metrics(
    repo: RepoOption = Path(),
    last: Annotated[
        str | None, typer.Option(help="Only this recent period, e.g. 30d, 12h.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Success rate, retries, time, tokens and cost per role, and per CLI by task type."""
    from supervisor import metrics as m

    with tasks.reading(repo) as store:
        rows = store.invocations(m.since(last))
    roles, clis = m.by_role(rows), m.cli_by_task(rows)
    if as_json:
        sys.stdout.write(json.dumps({"by_role": roles, "cli_by_task_type": clis}, indent=2) + "\n")
        return
    console.print(metrics_tables(roles, clis))


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
