"""`supervisor sandbox ...`: the project's sandbox image, built, inspected, or entered."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from supervisor.cli.common import JsonOption, RepoOption, console, err_console, images
from supervisor.cli.plain import json_out as _json
from supervisor.cli.reports import sandbox_report

sandbox_app = typer.Typer(help="The project's sandbox image.", no_args_is_help=True)


@sandbox_app.command("init")
def sandbox_init(repo: RepoOption = Path()) -> None:
    """Write .supervisor/sandbox/Dockerfile for the detected stack (never over an edited one)."""
    path, written = images.sandbox_init(repo)
    console.print(f"{'Wrote' if written else 'Left alone (exists)'}: {path}")


@sandbox_app.command("build")
def sandbox_build(
    repo: RepoOption = Path(),
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Rebuild every layer.")] = False,
) -> None:
    """Build the project image (dependencies installed now, with network)."""
    tag, seconds = images.sandbox_build(
        repo,
        no_cache=no_cache,
        on_output=lambda t: err_console.print(t.rstrip(), style="dim", markup=False),
    )
    console.print(f"{tag}: " + ("up to date" if seconds is None else f"built in {seconds:.1f} s"))


@sandbox_app.command("status")
def sandbox_status(repo: RepoOption = Path(), as_json: JsonOption = False) -> None:
    """Which image gates use, built from what, when, and its size."""
    info = images.sandbox_status(repo)
    if as_json:
        _json(info)
    elif console.is_terminal:
        console.print(sandbox_report(info))
    else:
        from supervisor.cli.output import show
        from supervisor.views.listings import images as listed

        show(console, listed(info))


@sandbox_app.command(
    "shell",
    help="A shell in the gate sandbox (no network) on a writable throwaway copy of HEAD, as a "
    "gate gets one, to debug a gate: uncommitted files are not there, and nothing it writes is "
    "kept.",
    # `sandbox shell python -m pytest -x`: everything after the first word is the command's,
    # options included; --repo goes before it.
    context_settings={"allow_interspersed_args": False, "ignore_unknown_options": True},
)
def sandbox_shell(
    repo: RepoOption = Path(),
    command: Annotated[
        list[str] | None,
        typer.Argument(help="Run this instead of a shell (the rest of the line, options too)."),
    ] = None,
) -> None:
    raise typer.Exit(images.sandbox_shell(repo, command))
