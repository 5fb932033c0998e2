"""The packages of a monorepo, found in its workspace manifests, for `supervisor init`.

pnpm (`pnpm-workspace.yaml`), npm and yarn (`workspaces` in package.json), Cargo
(`[workspace] members`), uv (`[tool.uv.workspace] members`), Poetry and PDM multi-package
layouts (path dependencies between pyprojects) and Go (`go.work`'s `use`). Each package gets its
own stack, gates and role packs (supervisor/project/detect.py run on its directory, since its
gates run there), and its dependencies on the other packages from its manifest: the
`workspace:` protocol or a workspace package's name, path dependencies, go.mod `replace`.

Only manifests are read, as data (supervisor/project/workspace_manifests.py): nothing from the
repository runs. Member globs are matched against a bounded walk of real directories (no
symlink is followed, nothing outside the repository is reached). What cannot be used is a warning
naming the file; a cycle between packages is the ProjectMap's error, before anything is written.
"""

from __future__ import annotations

import fnmatch
import os
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from supervisor.core.projects import PROJECT_NAME, ProjectDef, ProjectDependency, ProjectMap
from supervisor.project import workspace_manifests as manifests
from supervisor.project.detect import SKIP_DIRS, Detection, detect

if TYPE_CHECKING:
    from pathlib import Path

MAX_DEPTH = 6
MAX_DIRS = 20_000
MANIFEST = {
    "pnpm": "package.json",
    "npm": "package.json",
    "yarn": "package.json",
    "cargo": "Cargo.toml",
    "uv": "pyproject.toml",
    "poetry": "pyproject.toml",
    "pdm": "pyproject.toml",
    "go": "go.mod",
}
WORKSPACE_FILES = {
    "pnpm": "pnpm-workspace.yaml",
    "npm": "package.json (workspaces)",
    "yarn": "package.json (workspaces)",
    "cargo": "Cargo.toml ([workspace] members)",
    "uv": "pyproject.toml ([tool.uv.workspace] members)",
    "go": "go.work (use)",
}
SHARED_CANDIDATES = (
    "pnpm-workspace.yaml",
    "pnpm-lock.yaml",
    "package-lock.json",
    "yarn.lock",
    "package.json",
    "tsconfig.base.json",
    "Cargo.toml",
    "Cargo.lock",
    "pyproject.toml",
    "uv.lock",
    "poetry.lock",
    "pdm.lock",
    "go.work",
    "go.work.sum",
)
"""Root files that every package builds with: a change to one is gated by every project."""


@dataclass
class Package:
    name: str
    """The project's name in the config: its directory's name (its path when two share one)."""
    path: str
    kind: str
    """pnpm, npm, yarn, cargo, uv, poetry, pdm or go."""
    package_name: str | None
    """What its manifest calls it (`@acme/types`, a Go module path)."""
    detection: Detection
    depends_on: dict[str, str] = field(default_factory=dict)
    """Project name -> the manifest line that says so."""


@dataclass
class Workspaces:
    packages: list[Package] = field(default_factory=list)
    kinds: dict[str, str] = field(default_factory=dict)
    """Each workspace kind found -> the file that declares it."""
    shared_paths: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.packages)

    def project_defs(self, roles: dict[str, list[str]] | None = None) -> list[ProjectDef]:
        """The `projects:` entries; `roles`: each package's roles (default none)."""
        return [
            ProjectDef(
                name=p.name,
                path=p.path,
                roles=(roles or {}).get(p.name, []),
                gates=dict(p.detection.gates),
            )
            for p in self.packages
        ]

    def dependencies(self) -> dict[str, ProjectDependency]:
        return {
            p.name: ProjectDependency(depends_on=list(p.depends_on))
            for p in self.packages
            if p.depends_on
        }

    def project_map(self) -> ProjectMap:
        """Validated: a cycle between the packages' manifests is a ConfigError naming it."""
        return ProjectMap.build(
            self.project_defs(),
            self.dependencies(),
            self.shared_paths,
            source="the workspace manifests",
        )

    def only(self, names: list[str]) -> Workspaces:
        """The packages the user kept, with the dependencies on the others dropped."""
        kept = [p for p in self.packages if p.name in names]
        for package in kept:
            package.depends_on = {
                n: why for n, why in package.depends_on.items() if n in set(names)
            }
        return Workspaces(kept, self.kinds, self.shared_paths if kept else [], self.warnings)


def detect_workspaces(repo: Path) -> Workspaces:
    reader = manifests.Reader(repo)
    found = Workspaces()
    dirs = _directories(repo)
    members: dict[str, str] = {}  # path -> kind, in discovery order

    def add(kind: str, patterns: list[str], exclude: tuple[str, ...] | list[str] = ()) -> None:
        found.kinds.setdefault(kind, WORKSPACE_FILES[kind])
        for path in _expand(patterns, exclude, dirs, reader, WORKSPACE_FILES[kind]):
            if path != "." and MANIFEST[kind] in dirs.get(path, ()):
                members.setdefault(path, kind)

    pnpm = manifests.pnpm_members(reader)
    if pnpm is not None:
        add("pnpm", pnpm)
    npm = manifests.npm_members(reader)
    if npm is not None and pnpm is None:
        add("yarn" if "yarn.lock" in dirs.get(".", ()) else "npm", npm)
    crates = manifests.cargo_members(reader)
    if crates is not None:
        add("cargo", *crates)
    uv = manifests.uv_members(reader)
    if uv is not None:
        add("uv", *uv)
    go = manifests.go_work_members(reader)
    if go is not None:
        add("go", go)
    _python_layouts(reader, dirs, members, found)
    paths = _outermost(members, found.warnings)
    names = _names(paths)
    packages: list[Package] = []
    declared: dict[str, list[manifests.Need]] = {}
    cargo_root = manifests.table(manifests.table(reader.toml("Cargo.toml") or {}).get("workspace"))
    for path in paths:
        kind = members[path]
        package_name, needs = _read_member(reader, kind, path, cargo_root)
        detection = detect(repo / path, workspace_root=repo)
        packages.append(Package(names[path], path, kind, package_name, detection))
        declared[path] = needs
    _link(packages, declared)
    found.packages = packages
    found.shared_paths = (
        [f for f in SHARED_CANDIDATES if f in dirs.get(".", ())] if packages else []
    )
    found.warnings += reader.warnings
    return found


def _read_member(
    reader: manifests.Reader, kind: str, path: str, cargo_root: dict[str, object]
) -> tuple[str | None, list[manifests.Need]]:
    if kind in ("pnpm", "npm", "yarn"):
        return manifests.node_package(reader, path)
    if kind == "cargo":
        return manifests.cargo_package(
            reader, path, manifests.table(cargo_root.get("dependencies"))
        )
    if kind == "go":
        return manifests.go_module(reader, path)
    return manifests.python_package(reader, path)


def _link(packages: list[Package], declared: dict[str, list[manifests.Need]]) -> None:
    """Each package's dependencies on the others: a path naming a package's directory, or a
    name a package's manifest carries (normalised for Python, exact elsewhere)."""
    by_path = {p.path: p for p in packages}
    by_name: dict[str, Package] = {}
    for p in packages:
        if p.package_name:
            by_name.setdefault(_normal(p.kind, p.package_name), p)
    for package in packages:
        for need in sorted(declared[package.path], key=lambda n: n.path is None):  # paths first
            target = by_path.get(need.path) if need.path else None
            if target is None and need.name is not None:
                target = by_name.get(_normal(package.kind, need.name))
            if target is not None and target is not package:
                package.depends_on.setdefault(target.name, need.why)


def _normal(kind: str, name: str) -> str:
    if kind in ("uv", "poetry", "pdm"):
        return re.sub(r"[-_.]+", "-", name).lower()  # PEP 503
    return name


def _python_layouts(
    reader: manifests.Reader,
    dirs: dict[str, set[str]],
    members: dict[str, str],
    found: Workspaces,
) -> None:
    """Poetry and PDM multi-package layouts: pyprojects joined by path dependencies (without a
    workspace file, the paths are the only evidence)."""
    pyprojects = [d for d, names in dirs.items() if "pyproject.toml" in names and d.count("/") < 3]
    for directory in pyprojects:
        if directory in members and members[directory] == "uv":
            continue
        _, needs = manifests.python_package(reader, directory)
        targets = [
            n.path for n in needs if n.path and "pyproject.toml" in dirs.get(n.path, ()) and n.path
        ]
        if not targets:
            continue
        for path in [directory, *targets]:
            if path == "." or path in members:
                continue
            kind = manifests.python_layout(reader, path) or "poetry"
            found.kinds.setdefault(kind, f"{directory}/pyproject.toml (path dependencies)")
            members[path] = kind


def _outermost(members: dict[str, str], warnings: list[str]) -> list[str]:
    """Member paths with none inside another (a project owns its whole directory)."""
    kept: list[str] = []
    for path in sorted(members, key=lambda p: (p.count("/"), p)):
        outer = next((k for k in kept if path.startswith(k + "/")), None)
        if outer is not None:
            warnings.append(
                f"{path} is inside the package {outer}: it is left out (a project owns its "
                "whole directory)."
            )
            continue
        kept.append(path)
    order = list(members)
    return sorted(kept, key=order.index)


def _names(paths: list[str]) -> dict[str, str]:
    """A short unique name per path: the directory's own name, or its path when two share it."""
    base = {p: _safe(p.rsplit("/", 1)[-1]) for p in paths}
    counts: dict[str, int] = {}
    for name in base.values():
        counts[name] = counts.get(name, 0) + 1
    named = {p: (base[p] if counts[base[p]] == 1 else _safe(p)) for p in paths}
    taken: set[str] = set()
    for path, name in named.items():  # two paths that clean up to one name: numbered
        unique, n = name, 1
        while unique in taken:
            n += 1
            unique = f"{name[:120]}-{n}"
        named[path] = unique
        taken.add(unique)
    return named


def _safe(name: str) -> str:
    cleaned = re.sub(r"[^A-Za-z0-9_.@/-]", "-", name).lstrip("_.@/-")[:128]
    return cleaned if re.fullmatch(PROJECT_NAME, cleaned) else "package"


def _directories(repo: Path) -> dict[str, set[str]]:
    """Every real directory below the root (bounded, dependency folders skipped, symlinks not
    followed), `/`-separated and relative, with the names of the manifests it holds."""
    wanted = {*MANIFEST.values(), *SHARED_CANDIDATES}
    found: dict[str, set[str]] = {}
    stack = [(str(repo), ".", 0)]
    while stack and len(found) < MAX_DIRS:
        directory, rel, depth = stack.pop()
        names: set[str] = set()
        try:
            entries = list(os.scandir(directory))
        except OSError:
            continue
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                if (
                    entry.name not in SKIP_DIRS
                    and not entry.name.startswith(".")
                    and depth < MAX_DEPTH
                ):
                    child = entry.name if rel == "." else f"{rel}/{entry.name}"
                    stack.append((entry.path, child, depth + 1))
            elif entry.name in wanted and entry.is_file(follow_symlinks=False):
                names.add(entry.name)
        found[rel] = names
    return found


def _expand(
    patterns: list[str],
    exclude: tuple[str, ...] | list[str],
    dirs: dict[str, set[str]],
    reader: manifests.Reader,
    source: str,
) -> list[str]:
    """The directories member globs name, in the walk's sorted order; `!pattern` (pnpm) and
    `exclude` remove. A pattern that leaves the repository is a warning."""
    include: list[str] = []
    removed = list(exclude)
    for raw in patterns:
        negated = raw.startswith("!")
        cleaned = _pattern(raw[1:] if negated else raw)
        if cleaned is None:
            reader.warnings.append(
                f"{source}: the member pattern {raw!r} leaves the repository; it was skipped."
            )
            continue
        (removed if negated else include).append(cleaned)
    cleaned_removed = [p for p in (_pattern(r) for r in removed) if p is not None]
    return [
        d
        for d in sorted(dirs)
        if any(_glob(d, p) for p in include) and not any(_glob(d, p) for p in cleaned_removed)
    ]


def _pattern(raw: str) -> str | None:
    pattern = raw.strip().strip("/").removeprefix("./")
    parts = pattern.split("/")
    if not pattern or raw.strip().startswith("/") or ".." in parts or "\\" in pattern:
        return None if pattern != "" else "."
    return "/".join(p for p in parts if p not in ("", "."))


def _glob(path: str, pattern: str) -> bool:
    """Segment by segment: `*` within one name, `**` any number of names."""
    return _segments(path.split("/") if path != "." else [], pattern.split("/"))


def _segments(path: list[str], pattern: list[str]) -> bool:
    if not pattern:
        return not path
    if pattern[0] == "**":
        return any(_segments(path[i:], pattern[1:]) for i in range(len(path) + 1))
    return (
        bool(path) and fnmatch.fnmatchcase(path[0], pattern[0]) and _segments(path[1:], pattern[1:])
    )
