"""Installed role packs: where they live, installing, updating, removing and searching them.

Project packs (`role install --project`) live in `.supervisor/roles/packs/` with the lock
`.supervisor/roles.lock`; user packs in `~/.supervisor/roles/packs/`, `~/.supervisor/roles.lock`.
A pack is staged, validated (manifest, refused keys) and only then moved into place and locked,
so a failed install leaves the previous state as it was.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from supervisor.context.packs.lock import LockEntry, Scope, file_hashes, verify
from supervisor.context.packs.manifest import (
    MANIFEST,
    Pack,
    PackDependency,
    builtin_packs,
    load_pack,
)
from supervisor.core import trustmap
from supervisor.core.config import RolePackSettings, read_yaml, user_dir, validate
from supervisor.core.errors import ConfigError, PackChangedError


def user_scope() -> Scope:
    return Scope("user", user_dir() / "roles" / "packs", user_dir() / "roles.lock")


def project_scope(repo: Path) -> Scope:
    return Scope(
        "project",
        trustmap.repo_path(repo, trustmap.ROLE_PACKS, trustmap.DATA),
        trustmap.repo_path(repo, trustmap.ROLES_LOCK, trustmap.DATA),
    )


def scopes(repo: Path | None) -> list[Scope]:
    """Lookup order: the project's packs first, then the user's."""
    return [project_scope(repo), user_scope()] if repo is not None else [user_scope()]


def pack_settings() -> RolePackSettings:
    """`roles:` of the user's own config; a repository's config never loosens it."""
    path = user_dir() / "config.yaml"
    data = read_yaml(path) if path.is_file() else None
    section = data.get("roles") if isinstance(data, dict) else None
    settings: RolePackSettings = validate(RolePackSettings, section or {}, path)
    return settings


@dataclass(frozen=True)
class Installed:
    scope: Scope
    entry: LockEntry

    @property
    def root(self) -> Path:
        return self.scope.pack_dir(self.entry.name)

    def pack(self) -> Pack:
        """The pack, once its files match the lock."""
        verify(self.scope, self.entry)
        return load_pack(self.root)


def installed(repo: Path | None) -> list[Installed]:
    return [Installed(s, e) for s in scopes(repo) for e in s.read().packs.values()]


def find_installed(repo: Path | None, name: str) -> Installed | None:
    return next((i for i in installed(repo) if i.entry.name == name), None)


@dataclass
class Request:
    source: str
    version: str | None = None
    update: bool = False
    parent: str | None = None


@dataclass
class InstallReport:
    installed: list[LockEntry] = field(default_factory=list)
    unchanged: list[LockEntry] = field(default_factory=list)


def split_source(text: str) -> tuple[str, str | None]:
    """`SOURCE@VERSION` apart; an `@` in a scp-like address (git@host:…) is not a version."""
    head, at, tail = text.rpartition("@")
    if not at or not head or not tail or "/" in tail or ":" in tail:
        return text, None
    return head, tail


def install(
    scope: Scope, request: Request, report: InstallReport | None = None, depth: int = 0
) -> InstallReport:
    # Here, not at the top: reading the installed roles (every task's checks) needs neither.
    from supervisor.context.packs import fetch

    report = report if report is not None else InstallReport()
    if depth > 8:
        raise ConfigError(
            f"Role pack dependencies nest deeper than 8 levels at {request.source}.",
            "Check the packs' `requires.roles` for a loop.",
        )
    url = fetch.source_url(request.source)
    clone = fetch.fetch(url).clone
    ref, commit = _resolve(clone, request.version)
    if pack_settings().require_signed:
        if ref is None:
            raise ConfigError(
                f"{url}@{request.version or 'HEAD'} is not a tag, and `roles.require_signed` "
                "asks for signed tags.",
                "Install a signed tag of the pack, or set `roles: {require_signed: false}`.",
            )
        fetch.verify_tag(clone, ref)
    scope.packs_dir.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=scope.packs_dir))
    try:
        fetch.export(clone, commit, staging)
        pack = load_pack(staging)
        _check_tag_matches(pack, ref, url)
        _check_supervisor(pack)
        lock = scope.read()
        old = lock.packs.get(pack.name)
        if old is not None and old.commit == commit and _intact(scope, old):
            report.unchanged.append(old)
        elif old is not None and not request.update and request.parent is None:
            if old.commit == commit:
                verify(scope, old)  # changed since: say so, with the fix
            raise ConfigError(
                f"Role pack '{pack.name}' {old.version} is installed already ({old.source}).",
                f"Run `supervisor role install --update {pack.name}` to move it to another "
                "version.",
            )
        else:
            for dep_name, wanted in pack.manifest.requires.roles.items():
                _install_dependency(scope, url, pack.name, dep_name, wanted, report, depth)
            target = scope.pack_dir(pack.name)
            if target.exists():
                shutil.rmtree(target)
            staging.rename(target)
            entry = LockEntry(
                name=pack.name,
                version=pack.manifest.version,
                source=url,
                requested=request.version,
                ref=ref,
                commit=commit,
                files=file_hashes(target),
                dependency_of=[request.parent] if request.parent else [],
            )
            lock = scope.read()
            if old is not None:
                entry.dependency_of = sorted({*old.dependency_of, *entry.dependency_of})
            lock.packs[pack.name] = entry
            scope.write(lock)
            report.installed.append(entry)
    finally:
        if staging.exists():
            shutil.rmtree(staging)
    return report


def update(scope: Scope, name: str | None) -> InstallReport:
    """Fetch each pack (or the one named) again at its requested version (a range moves on)."""
    lock = scope.read()
    names = [name] if name else sorted(lock.packs)
    report = InstallReport()
    for each in names:
        entry = lock.packs.get(each)
        if entry is None:
            raise ConfigError(
                f"No role pack '{each}' is installed in {scope.lock_path}.",
                "See `supervisor role list`; install it with `supervisor role install SOURCE`.",
            )
        install(scope, Request(entry.source, entry.requested, update=True), report)
    return report


def remove(scope: Scope, name: str) -> LockEntry:
    lock = scope.read()
    entry = lock.packs.pop(name, None)
    if entry is None:
        raise ConfigError(
            f"No role pack '{name}' is installed in {scope.lock_path}.",
            "See `supervisor role list` for the installed packs and where they are.",
        )
    needed = [e.name for e in lock.packs.values() if name in _dependency_names(scope, e)]
    if needed:
        raise ConfigError(
            f"Role pack '{name}' is required by {', '.join(needed)}.",
            f"Remove {', '.join(needed)} first.",
        )
    shutil.rmtree(scope.pack_dir(name), ignore_errors=True)
    scope.write(lock)
    return entry


@dataclass(frozen=True)
class Found:
    name: str
    version: str
    description: str
    source: str
    where: str  # installed (project|user) or fetched


def search(repo: Path | None, word: str) -> list[Found]:
    """Packs built in, installed or already fetched whose name, description, author, keywords
    or roles mention `word`; offline: only what is on this machine is read."""
    from supervisor.context.packs import fetch, versions

    needle = word.lower()
    found: dict[tuple[str, str], Found] = {}
    candidates: list[tuple[str, str, str, dict[str, object]]] = []
    for item in installed(repo):
        data = read_yaml(item.root / MANIFEST) if (item.root / MANIFEST).is_file() else {}
        candidates.append((item.scope.name, item.entry.source, item.entry.version, data or {}))
    for pack in builtin_packs():
        data = read_yaml(pack.root / MANIFEST)
        candidates.append(("built-in", str(pack.root), pack.manifest.version, data))
    sources = user_dir() / "cache" / "role-sources"
    for clone in sorted(sources.iterdir()) if sources.is_dir() else []:
        marker = clone / "supervisor-source"
        url = marker.read_text().strip() if marker.is_file() else str(clone)
        for tag in fetch.tags(clone) or ["HEAD"]:
            text = _show(clone, tag)
            if text is not None:
                import yaml

                data = yaml.safe_load(text)
                if isinstance(data, dict):
                    candidates.append(("fetched", url, str(data.get("version", tag)), data))
    for where, source, version, data in candidates:
        fields = [data.get(k) for k in ("name", "description", "author")]
        listed = [*_strings(data.get("keywords")), *_strings(data.get("roles"))]
        text = " ".join(str(f) for f in [*fields, *listed] if f).lower()
        name = str(data.get("name", ""))
        if needle in text and (name, version) not in found:
            found[(name, version)] = Found(
                name, version, str(data.get("description", "")), source, where
            )
    return sorted(found.values(), key=lambda f: (f.name, versions.order(f.version)))


def _resolve(clone: Path, requested: str | None) -> tuple[str | None, str]:
    """(tag, commit) for a request: the newest release when none, a tag, the newest tag in a
    range, else a branch or a commit (tag None)."""
    from supervisor.context.packs import fetch, versions

    tags = fetch.tags(clone)
    if requested is None:
        tag = versions.best_tag(tags, None)
        return (tag, fetch.commit_of(clone, tag)) if tag else (None, fetch.commit_of(clone, "HEAD"))
    if requested in tags:
        return requested, fetch.commit_of(clone, requested)
    wanted = versions.specifier(requested)
    if wanted is not None:
        tag = versions.best_tag(tags, wanted)
        if tag is None:
            raise ConfigError(
                f"No tag of {clone} satisfies '{requested}' (tags: {', '.join(tags) or 'none'}).",
                "Ask for a range one of the tags satisfies, or a branch or commit.",
            )
        return tag, fetch.commit_of(clone, tag)
    return None, fetch.commit_of(clone, requested)


def _install_dependency(
    scope: Scope,
    url: str,
    parent: str,
    name: str,
    wanted: str | PackDependency,
    report: InstallReport,
    depth: int,
) -> None:
    from supervisor.context.packs import fetch, versions

    spec = wanted if isinstance(wanted, str) else wanted.version
    source = fetch.sibling(url, name) if isinstance(wanted, str) else wanted.source
    have = scope.read().packs.get(name)
    if have is not None and versions.satisfies(have.version, spec):
        return
    if have is not None:
        raise ConfigError(
            f"Role pack '{parent}' needs '{name}' {spec}, but {have.version} is installed.",
            f"Run `supervisor role install --update {name}@{spec}` if the other packs allow it.",
        )
    install(scope, Request(source, spec, parent=parent), report, depth + 1)


def _check_tag_matches(pack: Pack, ref: str | None, url: str) -> None:
    from supervisor.context.packs import versions

    tagged = versions.version(ref) if ref else None
    if tagged is not None and tagged != versions.version(pack.manifest.version):
        raise ConfigError(
            f"Tag {ref} of {url} holds pack.yaml `version: {pack.manifest.version}`.",
            "The pack's author should tag the commit whose pack.yaml has that version.",
        )


def _check_supervisor(pack: Pack) -> None:
    wanted = pack.manifest.requires.supervisor
    if not wanted:
        return
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed_version

    try:
        have = installed_version("supervisor")
    except PackageNotFoundError:  # run from a source checkout: no version to hold it to
        return
    from supervisor.context.packs import versions

    if not versions.satisfies(have, wanted):
        raise ConfigError(
            f"Role pack '{pack.name}' needs supervisor {wanted}; this is {have}.",
            "Install a version of the pack made for this supervisor, or upgrade supervisor.",
        )


def _intact(scope: Scope, entry: LockEntry) -> bool:
    try:
        verify(scope, entry)
    except PackChangedError:
        return False
    return True


def _dependency_names(scope: Scope, entry: LockEntry) -> list[str]:
    path = scope.pack_dir(entry.name) / MANIFEST
    data = read_yaml(path) if path.is_file() else None
    requires = data.get("requires") if isinstance(data, dict) else None
    roles = requires.get("roles") if isinstance(requires, dict) else None
    return list(roles) if isinstance(roles, dict) else []


def _show(clone: Path, ref: str) -> str | None:
    from supervisor.context.packs import fetch

    try:
        return fetch.git("show", f"{ref}:{MANIFEST}", cwd=clone)
    except Exception:  # a tag without a manifest is not a pack version
        return None


def _strings(value: object) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list) else []
