"""`supervisor roles ...` and `supervisor config ...`: where each role and setting comes from."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from supervisor.cli.common import JsonOption, RepoOption, console, projects
from supervisor.cli.plain import json_out as _json
from supervisor.cli.render import config_table, fit, role_detail, roles_rows, roles_table

roles_app = typer.Typer(help="Inspect roles: built-in, user and project.", no_args_is_help=True)
config_app = typer.Typer(help="Inspect the effective configuration.", no_args_is_help=True)


@roles_app.command("list")
def roles_list(repo: RepoOption = Path(), as_json: JsonOption = False) -> None:
    """Every role and where it comes from (project shadows user shadows built-in)."""
    from supervisor.roles import list_roles

    files = list_roles(projects.open_project(repo).root)
    if as_json:
        _json(roles_rows(files))
    else:
        console.print(fit(console, roles_table(files)))


@roles_app.command("show")
def roles_show(
    name: Annotated[str, typer.Argument(help="The role name.")],
    repo: RepoOption = Path(),
    as_json: JsonOption = False,
) -> None:
    """The resolved role, with the file each field came from."""
    from supervisor.roles import resolve_role

    resolved = resolve_role(name, projects.open_project(repo).root)
    if as_json:
        _json(
            {
                "role": resolved.role.model_dump(mode="json"),
                "chain": [
                    {"name": f.name, "layer": f.layer, "file": str(f.path)} for f in resolved.chain
                ],
                "provenance": resolved.provenance,
            }
        )
    else:
        console.print(fit(console, role_detail(resolved)))


@config_app.command("show")
def config_show(
    repo: RepoOption = Path(),
    cli: Annotated[str | None, typer.Option(help="As if given to start-task.")] = None,
    as_json: JsonOption = False,
) -> None:
    """The effective configuration and which file each value came from."""
    from supervisor.config import settings_provenance

    overrides = {"cli": cli} if cli else None
    project = projects.open_project(repo, overrides)
    provenance = settings_provenance(project.root, overrides)
    if as_json:
        _json({"settings": project.settings.model_dump(mode="json"), "from": provenance})
    else:
        console.print(fit(console, config_table(project.settings, provenance)))
