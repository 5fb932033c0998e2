"""What the `role` commands ask of the pack store, with the scope (project or user) chosen."""

from __future__ import annotations

from pathlib import Path

from supervisor.context.packs import store
from supervisor.context.packs.lock import LockEntry, Scope
from supervisor.core.errors import ConfigError


def scope_for(repo: Path | None, project: bool) -> Scope:
    if project:
        if repo is None:
            raise ConfigError(
                "`--project` installs into the repository's .supervisor/, but this is not inside "
                "a git repository.",
                "Run it inside the repository, pass --repo PATH, or drop --project.",
            )
        return store.project_scope(repo)
    return store.user_scope()


def install(spec: str, repo: Path | None, project: bool, update: bool) -> store.InstallReport:
    """`SOURCE[@VERSION]`; with `update`, SOURCE may be an installed pack's name (fetched again
    from its recorded source, at VERSION or its recorded request)."""
    source, version = store.split_source(spec)
    if update:
        found = _installed_scope(source, repo, project)
        if found is not None:
            scope, entry = found
            wanted = version if version is not None else entry.requested
            return store.install(scope, store.Request(entry.source, wanted, update=True))
    return store.install(scope_for(repo, project), store.Request(source, version, update=update))


def update(name: str | None, repo: Path | None, project: bool) -> store.InstallReport:
    if name is None:
        report = store.InstallReport()
        for scope in store.scopes(repo) if not project else [scope_for(repo, True)]:
            got = store.update(scope, None)
            report.installed += got.installed
            report.unchanged += got.unchanged
        return report
    found = _installed_scope(name, repo, project)
    if found is None:
        raise _not_installed(name)
    return store.update(found[0], name)


def remove(name: str, repo: Path | None, project: bool) -> tuple[Scope, LockEntry]:
    found = _installed_scope(name, repo, project)
    if found is None:
        raise _not_installed(name)
    return found[0], store.remove(found[0], name)


def _installed_scope(name: str, repo: Path | None, project: bool) -> tuple[Scope, LockEntry] | None:
    for scope in [scope_for(repo, True)] if project else store.scopes(repo):
        entry = scope.read().packs.get(name)
        if entry is not None:
            return scope, entry
    return None


def _not_installed(name: str) -> ConfigError:
    return ConfigError(
        f"No role pack '{name}' is installed (project or user).",
        "See `supervisor role list`; install it with `supervisor role install SOURCE[@VERSION]`.",
    )
