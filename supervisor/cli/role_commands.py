"""`supervisor role ...`: install, pin, verify, list and scaffold role packs."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from supervisor.cli.common import JsonOption, RepoOption, console
from supervisor.cli.plain import json_out as _json
from supervisor.cli.roles_config import roles_list, roles_show

if TYPE_CHECKING:
    from supervisor.context.packs.store import InstallReport

role_app = typer.Typer(
    help="Role packs from any git repository: install, update, remove, search, init, check.\n\n"
    "A pack adds roles; the roles in effect, a pack's among them, are `supervisor roles list` "
    "and `supervisor roles show ROLE` (`role list` and `role show` are the same commands, kept "
    "for scripts).",
    no_args_is_help=True,
)
ProjectOption = Annotated[
    bool,
    typer.Option(
        "--project", help="The repository's .supervisor/roles/packs/ (default: your own)."
    ),
]
# The same commands as `roles list` / `roles show`, kept for scripts, out of `role --help`: two
# groups listing the same two commands, described alike, left a person to guess the difference.
role_app.command("list", hidden=True)(roles_list)
role_app.command("show", hidden=True)(roles_show)


def _root(repo: Path, required: bool = False) -> Path | None:
    """The repository around `repo`; outside one, None (only the user's packs), unless the
    command needs it (`--project`): then the reason it is not one."""
    from supervisor.core.errors import RepoError
    from supervisor.workspace.worktrees import find_repo_root

    try:
        return find_repo_root(repo)
    except RepoError:
        if required:
            raise
        return None


def _print(report: InstallReport) -> None:
    for entry in report.installed:
        how = f" ({entry.ref})" if entry.ref else f" (commit {entry.commit[:12]})"
        also = f", needed by {', '.join(entry.dependency_of)}" if entry.dependency_of else ""
        console.print(
            f"Installed {entry.name} {entry.version}{how} from {entry.source}{also}",
            highlight=False,
            markup=False,
        )
    for entry in report.unchanged:
        console.print(
            f"{entry.name} {entry.version} is installed already", highlight=False, markup=False
        )


@role_app.command("install")
def role_install(
    source: Annotated[
        str,
        typer.Argument(
            metavar="SOURCE[@VERSION]",
            help="A git URL, host/owner/repo or a path; VERSION a tag, a range (^1.0, >=1.2,<2), "
            "a branch or a commit. With --update: an installed name.",
        ),
    ],
    project: ProjectOption = False,
    update: Annotated[
        bool, typer.Option("--update", help="Move an installed pack to the version asked for.")
    ] = False,
    repo: RepoOption = Path(),
) -> None:
    """Fetch a role pack and its dependencies with git (nothing run); lock commit and hashes."""
    from supervisor.context.packs import api

    _print(api.install(source, _root(repo, project), project, update))


@role_app.command("update")
def role_update(
    name: Annotated[str | None, typer.Argument(help="The pack (default: every one).")] = None,
    project: ProjectOption = False,
    repo: RepoOption = Path(),
) -> None:
    """Fetch installed packs again at the version asked for at install (a range moves on)."""
    from supervisor.context.packs import api

    _print(api.update(name, _root(repo, project), project))


@role_app.command("remove")
def role_remove(
    name: Annotated[str, typer.Argument(help="The pack.")],
    project: ProjectOption = False,
    repo: RepoOption = Path(),
) -> None:
    """Remove an installed pack and its lock entry."""
    from supervisor.context.packs import api

    scope, entry = api.remove(name, _root(repo, project), project)
    console.print(
        f"Removed {entry.name} {entry.version} ({scope.name}: {scope.lock_path})",
        highlight=False,
        markup=False,
    )


@role_app.command("search")
def role_search(
    word: Annotated[str, typer.Argument(help="A word of the name, description or keywords.")],
    repo: RepoOption = Path(),
    as_json: JsonOption = False,
) -> None:
    """Search the packs already fetched or installed (offline)."""
    from supervisor.context.packs.store import search

    found = search(_root(repo), word)
    if as_json:
        _json([f.__dict__ for f in found])
        return
    if not found:
        console.print(f"No fetched pack mentions '{word}'.", highlight=False, markup=False)
    for f in found:
        console.print(
            f"{f.name} {f.version} [{f.where}] {f.description}  ({f.source})",
            highlight=False,
            markup=False,
        )


@role_app.command("init")
def role_init(
    name: Annotated[str, typer.Argument(help="The new pack's name.")],
    path: Annotated[
        Path | None, typer.Option(metavar="DIR", help="The folder (default: ./NAME).")
    ] = None,
) -> None:
    """Scaffold a role pack: pack.yaml, one role and its template."""
    from supervisor.context.packs.scaffold import init

    target = path or Path(name)
    for written in init(target, name):
        console.print(f"wrote {written}", highlight=False, markup=False)
    console.print(
        f"Check it with `supervisor role check {target}`; publish it by pushing a tag "
        "(e.g. 0.1.0) to any git host.",
        highlight=False,
        markup=False,
    )


@role_app.command("check")
def role_check(
    path: Annotated[Path, typer.Argument(metavar="DIR", help="The pack's folder.")],
    repo: RepoOption = Path(),
) -> None:
    """Validate a pack: schema, refused keys, `extends` chains, templates render sandboxed."""
    from supervisor.context.packs.scaffold import check

    report = check(path, _root(repo))
    manifest = report.pack.manifest
    console.print(f"{manifest.name} {manifest.version}: valid", highlight=False, markup=False)
    for role, chain in report.roles.items():
        console.print(f"  {role}: {' → '.join(chain)}", highlight=False, markup=False)
