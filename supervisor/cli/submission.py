"""`start-task` up to its backend's work, and the whole of a submission to Temporal.

A submission is a command a person waits for, and typer spends a tenth of it building a parser
for every command before it runs one. Its plain form (`start-task DESCRIPTION --yes --backend
temporal` with any of --repo, --cli, --role, --no-gate, --allow-protected, --depth) is answered
from supervisor/cli/entry.py without loading typer (`parse`, then `run`); anything else, --help
and a prompt to confirm included, goes to the full command line (supervisor/cli/app.py), which
runs the same steps below, so both say and do the same (tests/test_cli_entry.py).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from supervisor.lifecycle.opening import Project
    from supervisor.temporal.link import Link

DEPTHS = ("auto", "simple", "planned", "researched")


class SubmitArgs(NamedTuple):
    description: str
    repo: Path
    cli: str | None
    roles: list[str]
    no_gate: bool
    allow_protected: list[str] | None
    depth: str


_VALUED = ("--repo", "--cli", "--backend", "--depth")
_LISTS = ("--role", "--allow-protected")


def parse(args: list[str]) -> SubmitArgs | None:
    """A plain submission's arguments, or None for anything the full parser should see (its
    errors and help are typer's): an option given twice or unknown, a value that looks like an
    option, no --yes, a backend other than temporal."""
    if args[:1] != ["start-task"]:
        return None
    values: dict[str, str] = {}
    lists: dict[str, list[str]] = {name: [] for name in _LISTS}
    flags: set[str] = set()
    description: str | None = None
    rest = iter(args[1:])
    for arg in rest:
        name, eq, inline = arg.partition("=")
        if name in _VALUED or name in _LISTS:
            value = inline if eq else next(rest, None)
            if not value or value.startswith("-") or name in values:
                return None
            if name in _LISTS:
                lists[name].append(value)
            else:
                values[name] = value
        elif arg in ("--yes", "-y", "--no-gate"):
            flags.add("--no-gate" if arg == "--no-gate" else "--yes")
        elif not arg.startswith("-") and description is None:
            description = arg
        else:
            return None
    if description is None or "--yes" not in flags or values.get("--backend") != "temporal":
        return None
    return SubmitArgs(
        description,
        Path(values.get("--repo", ".")),
        values.get("--cli"),
        lists["--role"],
        "--no-gate" in flags,
        lists["--allow-protected"] or None,
        values.get("--depth", "auto"),
    )


def run(args: SubmitArgs) -> None:
    """The submission, as `start-task --yes --backend temporal` runs it (supervisor/cli/app.py).
    Its helper process first: it loads Temporal's client while this one loads the rest."""
    check_depth(args.depth)
    link = connecting("temporal")
    from supervisor.cli.interrupt import resumable
    from supervisor.lifecycle.opening import open_project

    try:
        overrides = role_overrides(args.roles)
        # Opened once for both (the full command line opens it for each: the same checks)
        project = open_project(args.repo, {"cli": args.cli} if args.cli else None)
        server = project.settings.temporal
        if link is not None:  # the server's answer comes while the checks run
            link.connect(server.address, server.namespace)
        say_approvals(args.repo, args.cli, overrides, args.no_gate, project)
        with resumable(args.repo):
            submit(
                args.description, args.repo, args.cli, overrides, args.no_gate,
                args.allow_protected, args.depth, link, project,
            )  # fmt: skip
    except KeyboardInterrupt:  # before the task's creation began: as click says it
        say("\nAborted!", err=True)
        raise SystemExit(1) from None


def connecting(backend: str | None) -> Link | None:
    """`--backend temporal`: the submission's connection to Temporal, begun before anything
    else the command does (its helper process loads Temporal's client meanwhile)."""
    if backend != "temporal":
        return None
    from supervisor.temporal.link import Link

    return Link()


def check_depth(depth: str) -> None:
    from supervisor.core.errors import SupervisorError

    if depth not in DEPTHS:
        raise SupervisorError(
            f"--depth {depth!r} is unknown.", "Use auto, simple, planned or researched."
        )


def role_overrides(role: list[str] | None) -> dict[str, str]:
    """`--role STEP=ROLE`, each."""
    from supervisor.core.errors import SupervisorError

    overrides = {}
    for item in role or []:
        step, sep, name = item.partition("=")
        if not sep or not step or not name:
            raise SupervisorError(
                f"--role {item!r} is not STEP=ROLE.", "E.g. --role implement=implementer_fast"
            )
        overrides[step] = name
    return overrides


def say_approvals(
    repo: Path,
    cli: str | None,
    roles: dict[str, str],
    no_gate: bool,
    project: Project | None = None,
) -> None:
    """With --yes: the approvals the run will stop at, said before it starts."""
    from supervisor.lifecycle import opening

    stops = opening.approval_stops(repo, cli=cli, roles=roles, no_gate=no_gate, project=project)
    if not stops.startswith("none:"):  # "none planned; the approval policy ..." is said
        say(f"Approvals this run asks for: {stops}", err=True)


def submit(
    description: str,
    repo: Path,
    cli: str | None,
    roles: dict[str, str],
    no_gate: bool,
    allow_protected: list[str] | None,
    depth: str,
    link: Link | None = None,
    project: Project | None = None,
) -> None:
    """`start-task --backend temporal`: create the task and hand it to the workers; loads
    neither Docker nor the engine (supervisor/temporal/submit.py). `link`: see `connecting`."""
    from supervisor.temporal.submit import submit_task

    wf = submit_task(
        description, repo, cli=cli, roles=roles, no_gate=no_gate,
        allow_protected=allow_protected, depth=depth, link=link,  # type: ignore[arg-type]
        project=project,
    )  # fmt: skip
    say(
        f"Workflow {wf.id} submitted to Temporal; `supervisor worker` runs it. "
        f"Follow it with: supervisor status {wf.id}"
    )


def say(line: str, *, err: bool = False) -> None:
    """One plain line, as it is (no markup, no highlighting, the terminal wraps it): rich's
    console, a tenth of a second to import, is loaded only to report an error."""
    print(line, file=sys.stderr if err else sys.stdout, flush=True)
