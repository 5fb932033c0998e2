"""`supervisor roles ...` and `supervisor config ...`: where each role and setting comes from."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from supervisor.cli.common import JsonOption, RepoOption, console, projects
from supervisor.cli.output import show
from supervisor.cli.plain import json_out as _json

roles_app = typer.Typer(
    help="Roles in effect: list them, or show one with its sources.\n\n"
    "Looked up in the repository's .supervisor/roles/, then your ~/.supervisor/roles/, then "
    "installed role packs, then the built-in ones: the first found shadows the rest. To install, "
    "update or remove role packs: `supervisor role`.",
    no_args_is_help=True,
)
config_app = typer.Typer(help="Inspect the effective configuration.", no_args_is_help=True)


@roles_app.command("list")
def roles_list(repo: RepoOption = Path(), as_json: JsonOption = False) -> None:
    """Every role and where it comes from (project shadows user shadows built-in)."""
    from supervisor.context.roles import list_roles
    from supervisor.views.listings import role_rows, roles

    rows = role_rows(list_roles(projects.open_project(repo).root))
    if as_json:
        _json(rows)
    else:
        show(console, roles(rows))


@roles_app.command("show")
def roles_show(
    name: Annotated[str, typer.Argument(metavar="ROLE", help="The role name.")],
    repo: RepoOption = Path(),
    as_json: JsonOption = False,
) -> None:
    """The resolved role, with the file each field came from."""
    from supervisor.context.roles import resolve_role

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
        from supervisor.views.render import role_listing

        show(console, role_listing(resolved))


@config_app.command(
    "show",
    help="The effective configuration and which file each value came from; what the repository "
    "sets but is ignored or not trusted is listed after it.",
)
def config_show(
    repo: RepoOption = Path(),
    cli: Annotated[str | None, typer.Option(help="As if given to start-task.")] = None,
    as_json: JsonOption = False,
) -> None:
    from supervisor.core.config import ignored_settings, settings_provenance
    from supervisor.guard.trust import pending

    overrides = {"cli": cli} if cli else None
    project = projects.open_project(repo, overrides)
    provenance = settings_provenance(project.root, overrides)
    ignored = ignored_settings(project.root)
    waiting = pending(project.root)
    if as_json:
        _json(
            {
                "settings": project.settings.model_dump(mode="json"),
                "from": provenance,
                "ignored": [{"key": i.key, "value": i.value, "reason": i.reason} for i in ignored],
                "untrusted": {
                    "routing": waiting.routing,
                    "files": sorted(waiting.files),
                },
            }
        )
        return
    from supervisor.views.render import config_listing

    show(console, config_listing(project.settings, provenance))
    lines = [f"  {i.key}: {json.dumps(i.value)}  ({i.reason})" for i in ignored]
    lines += [
        f"  {key}: {json.dumps(value)}  (not trusted: start-task stops until "
        f"`supervisor trust --repo {project.root}`)"
        for key, value in waiting.routing.items()
        if not _routing_trusted(project.root)
    ]
    lines += [
        f"  {rel}  (not trusted: not used until `supervisor trust --repo {project.root}`)"
        for rel in sorted(waiting.files)
    ]
    if lines:
        console.print("Set by the repository but ignored or not trusted:", highlight=False)
        console.print("\n".join(lines), highlight=False, markup=False)


def _routing_trusted(root: Path) -> bool:
    from supervisor.core.errors import ConfigError
    from supervisor.guard.trust import require_trusted

    try:
        require_trusted(root)
    except ConfigError:
        return False
    return True
