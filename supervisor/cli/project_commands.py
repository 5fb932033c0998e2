"""The commands that set a project up and look into it: `init`, `context`, `analyze-deps`,
`doctor`, `metrics`, `demo` and `setup` (and `mcp`, from supervisor/cli/mcp_command.py). Each
parses its arguments, calls the core and prints what it returns; `register` adds them to the
`supervisor` app (supervisor/cli/app.py)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from supervisor.cli.common import (
    IdArgument,
    JsonOption,
    RepoOption,
    console,
    err_console,
    projects,
    tasks,
)
from supervisor.cli.eval_command import EVAL_HELP, evaluate
from supervisor.cli.mcp_command import MCP_HELP, mcp
from supervisor.cli.plain import json_out as _json
from supervisor.cli.reports import (
    doctor_table,
    pack_report,
    suggestions_report,
)
from supervisor.core.errors import SupervisorError
from supervisor.core.plural import counted, plural


def init(
    repo: RepoOption = Path(),
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Accept the suggestions.")] = False,
    check_gates: Annotated[
        bool,
        typer.Option(
            "--check-gates/--no-check-gates",
            help="Build the project image and run each detected gate once; keep those that pass.",
        ),
    ] = True,
) -> None:
    """Detect the project, choose role packs, check its gates, and write .supervisor/."""
    from supervisor.cli import init_flow

    init_flow.run(projects.open_project(repo).root, yes=yes, check_gates=check_gates)


def context(
    role: Annotated[str, typer.Argument(help="The role whose context to pack.")],
    target: Annotated[
        list[str] | None,
        typer.Option("--target", metavar="FILE", help="A target file (repeatable)."),
    ] = None,
    task: Annotated[str, typer.Option(help="The task text to budget for.")] = "(dry run)",
    repo: RepoOption = Path(),
    show: Annotated[bool, typer.Option("--show", help="Print the whole prompt too.")] = False,
    as_json: JsonOption = False,
    project: Annotated[
        str | None,
        typer.Option(help="As for a component of this project (of `projects:` in the config)."),
    ] = None,
) -> None:
    """Dry run: what the role would be sent, its token count, what was pruned or redacted."""
    prompt, pack, targets = projects.context_preview(repo, role, target or [], task, project)
    if as_json:
        cli = projects.cli_choice(repo, role)
        shown = {"prompt": prompt} if show else {}
        _json({**pack.summary(), "targets": targets.files, "cli": cli, **shown})
        return
    if show:
        console.print(prompt, markup=False, highlight=False)
    console.print(pack_report(pack, targets))
    console.print(f"CLI: {projects.cli_choice(repo, role)}", highlight=False, markup=False)


def analyze_deps(
    workflow_id: IdArgument,
    repo: RepoOption = Path(),
    as_json: JsonOption = False,
) -> None:
    """Suggest dependencies between the plan's components from their files' imports."""
    found = tasks.analyze_deps(workflow_id, repo)
    if as_json:
        _json([{"component": c, "depends_on": d, "why": why} for c, d, why in found])
        return
    if not found:
        console.print("No undeclared dependencies: the plan already orders every import.")
        return
    console.print("Suggested dependencies (not applied; add them to the plan's depends_on):")
    for component, dependency, why in found:
        console.print(
            f"  {component} → depends on {dependency}   ({why})", highlight=False, markup=False
        )


DOCTOR_HELP = (
    "Check the repository, Docker, the sandbox image, each CLI and its credentials, Repomix and "
    "git (at once: it takes as long as the slowest, the image's CLI versions)."
)
"""Given as `help=` (as TRUST_HELP): typer's list of commands keeps a docstring's line breaks,
which fold the summary mid-sentence in `supervisor -h` (tests/test_help.py)."""


def doctor(repo: RepoOption = Path(), as_json: JsonOption = False) -> None:
    from supervisor.lifecycle.demo import configured_by_demo
    from supervisor.lifecycle.doctor import diagnose

    if err_console.is_terminal and not as_json:
        with err_console.status("doctor: checking…") as line:
            finished: list[str] = []

            def progress(name: str) -> None:
                finished.append(name)
                line.update(f"doctor: checking… ({', '.join(finished)} done)")

            checks = diagnose(repo, progress, configured_by_demo)
    else:
        checks = diagnose(repo, demo=configured_by_demo)
    if as_json:
        _json([c.__dict__ for c in checks])
    elif console.is_terminal:
        console.print(doctor_table(checks))
    else:
        from supervisor.cli.output import show
        from supervisor.views.listings import doctor as listed

        show(console, listed(checks))
    missing = [c for c in checks if c.required and not c.ok]
    if missing:
        where = (
            "the `hint` of each row whose `ok` is false" if as_json else "the fixes listed above"
        )
        raise SupervisorError(
            f"{counted(len(missing), 'thing')} the configured workflow needs "
            f"{plural(len(missing), 'is', 'are')} missing: "
            f"{', '.join(c.name for c in missing)}.",
            f"Apply {where}, then run `supervisor doctor` again.",
        )


def metrics(
    repo: RepoOption = Path(),
    last: Annotated[
        str | None, typer.Option(metavar="PERIOD", help="Only this recent period, e.g. 30d, 12h.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
    suggest: Annotated[
        bool, typer.Option("--suggest", help="Suggest config changes, with the figures behind.")
    ] = False,
) -> None:
    """Success rate, retries, time, tokens and cost per role, and per CLI by task type."""
    from supervisor.routing import metrics as m

    period = m.since(last)  # a usage error before anything is opened
    if suggest:
        from supervisor.routing.suggest import suggestions

        with tasks.reading(repo) as store:
            found = suggestions(store, period)
        if as_json:
            _json([s.model_dump() for s in found])
            return
        console.print(suggestions_report(found, last), highlight=False, markup=False)
        return
    with tasks.reading(repo) as store:
        from supervisor.routing.history import accepted_runs

        rows = accepted_runs(store, period)  # a run whose work was sent back did not succeed
        from supervisor.policy.budgets import spend_rows

        budgets = spend_rows(store)
    roles, clis = m.by_role(rows), m.cli_by_task(rows)
    if as_json:
        data = {"by_role": roles, "cli_by_task_type": clis, "budgets": budgets}
        sys.stdout.write(json.dumps(data, indent=2) + "\n")
        return
    from supervisor.cli.output import show
    from supervisor.views.listings import metrics as listed

    show(console, *listed(roles, clis))
    for row in budgets:
        console.print(f"workflow {row['workflow']} ({row['status']}): {row['line']}", markup=False)


def demo(
    keep: Annotated[
        Path | None,
        typer.Option(
            metavar="DIR",
            help="Make the demo repository here and keep it (a new or empty directory, or an "
            "earlier demo's).",
        ),
    ] = None,
) -> None:
    """Run a real task on a throw-away repository, answered by a scripted model API."""
    from supervisor.cli.demo_run import run_demo

    run_demo(console, err_console, keep)


def setup(
    quiet: Annotated[bool, typer.Option(help="Print only the steps that did work.")] = False,
) -> None:
    """Install what supervisor runs on: Docker engine, Repomix and the CLIs, the sandbox image."""
    from supervisor.lifecycle.bootstrap import run_setup

    run_setup(quiet)


TRUST_HELP = (
    "Trust what this repository sets that decides where credentials go or weakens a protection, "
    "and its prompt templates, Dockerfile and approval policy, as they are now."
)


def trust(
    repo: RepoOption = Path(),
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Trust without asking.")] = False,
) -> None:
    found = projects.trust_pending(repo)
    for item in found.ignored:
        console.print(
            f"Ignored whatever you trust: {item.key}: {json.dumps(item.value)} ({item.reason}).",
            highlight=False,
            markup=False,
        )
    if found.empty:
        console.print(f"{found.repo} sets nothing that needs trust; nothing to trust.")
        projects.trust_repo(found.repo)
        return
    sections = [
        ("Where credentials go:", found.routing),
        ("Protections weakened:", found.weakening),
    ]
    for title, settings in sections:
        if settings:
            console.print(title, highlight=False)
        for key, value in settings.items():
            line = f"  {key}: {json.dumps(value)}  ({found.effects[key]})"
            console.print(line, highlight=False, markup=False)
    for rel, diff in found.files.items():
        console.print(f"File {rel}, not trusted as it is now:", highlight=False, markup=False)
        console.print(diff.rstrip() or "  (empty)", highlight=False, markup=False)
    if sys.stdin.isatty() and not yes:
        typer.confirm("Trust all of this?", default=False, abort=True)
    root, _ = projects.trust_repo(found.repo)
    console.print(f"Trusted for {root} (a change to any of these needs trust again).")


def register(app: typer.Typer) -> None:
    """Add these commands to `app`, in the order `supervisor --help` lists them."""
    app.command()(init)
    app.command()(context)
    app.command("analyze-deps")(analyze_deps)
    app.command(help=DOCTOR_HELP)(doctor)
    app.command()(metrics)
    app.command()(demo)
    app.command("eval", help=EVAL_HELP)(evaluate)
    app.command()(setup)
    app.command(help=TRUST_HELP)(trust)
    app.command(help=MCP_HELP)(mcp)
