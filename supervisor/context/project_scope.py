"""What a component of one project of a monorepo sees: its own project's files, and of each
project it declares a dependency on only the public surface.

A component of app `web` is written against `web`'s own code and the types and exports of the
packages it builds on; another app's files are noise in its budget (and a temptation to change
what its scope does not allow). The public surface of a package is what its consumers import:
its manifest, the entry points it names (package.json `types`/`typings`/`exports`/`main`/
`module`, falling back to `src/index.ts` and the like; a Python package's `__init__.py`; a Go
module's non-test files at its root; a crate's `lib.rs`), its declaration files (`*.d.ts`,
`*.pyi`), and the files those entry points re-export or import from the same package, one step
deep. The repository's root files (README, the workspace manifest) and the declared shared paths
stay visible. Everything here is decided from the file list and file texts handed in (blobs of
the step's commit): nothing is run, and the token budget still decides what fits.
"""

from __future__ import annotations

import json
import posixpath
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from supervisor.project.imports import resolve_imports

if TYPE_CHECKING:
    from collections.abc import Callable

    from supervisor.core.config import Settings
    from supervisor.core.projects import ProjectDef, ProjectMap

MANIFESTS = ("package.json", "pyproject.toml", "go.mod", "Cargo.toml")
NODE_ENTRY_FIELDS = ("types", "typings", "exports", "module", "main")
NODE_FALLBACKS = (
    "src/index.ts",
    "src/index.tsx",
    "index.ts",
    "index.d.ts",
    "src/index.js",
    "index.js",
)
DECLARATIONS = (".d.ts", ".d.mts", ".d.cts", ".pyi")
MAX_SURFACE_FILES = 200


@dataclass(frozen=True)
class ProjectScope:
    project: ProjectDef
    dependencies: tuple[ProjectDef, ...]
    """The projects it declares in `cross_project_dependencies`, producers first."""
    projects: ProjectMap

    @classmethod
    def of(cls, projects: ProjectMap, name: str | None) -> ProjectScope | None:
        """The scope of a component of project `name`; None (the whole repository) when the
        repository has no projects or the component names none it knows (the plan's own
        validation names an unknown project before any step runs)."""
        if not projects or name not in projects.names:
            return None
        declared = projects.depends_on.get(name, ())
        order = [n for n in projects.order() if n in declared]
        return cls(projects.get(name), tuple(projects.get(n) for n in order), projects)

    @property
    def name(self) -> str:
        return self.project.name

    def visible(self, path: str) -> bool:
        """The project's own files, the shared paths, and the repository's root files."""
        owner = self.projects.project_of(path)
        if owner == self.project.name or self.projects.is_shared(path):
            return True
        return owner is None and "/" not in path

    def note(self) -> str:
        """Said in the pack, so the worker knows the files it sees are one project's."""
        lines = [
            f"This component belongs to project {self.name!r} ({self.project.path}/): its files "
            "are shown, and it changes only them"
            + (
                f" and the shared paths ({', '.join(self.projects.shared_paths)})."
                if self.projects.shared_paths
                else "."
            ),
        ]
        for dependency in self.dependencies:
            lines.append(
                f"It builds on project {dependency.name!r} ({dependency.path}/): only its public "
                "surface (manifest, entry points, types) is shown; use it, do not change it."
            )
        return "\n".join(lines)

    def surface(self, files: set[str], read: Callable[[str], str | None]) -> list[str]:
        """The public surface of each declared dependency, producers first, each package's
        manifest and entry points before the files they re-export."""
        found: list[str] = []
        for dependency in self.dependencies:
            for path in public_surface(dependency.path, files, read):
                if path not in found and len(found) < MAX_SURFACE_FILES:
                    found.append(path)
        return found


def public_surface(root: str, files: set[str], read: Callable[[str], str | None]) -> list[str]:
    """The files a consumer of the package at `root` builds against (see the module's doc)."""
    own = {f for f in files if f.startswith(root + "/")}
    entries = [f"{root}/{m}" for m in MANIFESTS if f"{root}/{m}" in own]
    if f"{root}/package.json" in own:
        entries += _node_entries(root, own, read(f"{root}/package.json"))
    entries += sorted(f for f in own if _python_init(root, f))
    entries += sorted(f for f in own if _go_root_file(root, f))
    if f"{root}/src/lib.rs" in own:
        entries.append(f"{root}/src/lib.rs")
    entries += sorted(f for f in own if f.endswith(DECLARATIONS))
    surface = list(dict.fromkeys(entries))
    for entry in list(surface):
        if entry.endswith(MANIFESTS):
            continue
        for imported in resolve_imports(read, entry, own):
            if imported not in surface:
                surface.append(imported)
    return surface


def _node_entries(root: str, own: set[str], manifest: str | None) -> list[str]:
    """package.json's entry points as files of the repository: a built path (`dist/x.js`,
    `dist/x.d.ts`) is mapped to its source (`src/x.ts`), absent that the usual index files."""
    try:
        data = json.loads(manifest or "{}")
    except ValueError:
        data = {}
    named = [s for key in NODE_ENTRY_FIELDS for s in _leaves(data.get(key))] if data else []
    found: list[str] = []
    for spec in named:
        rel = posixpath.normpath(posixpath.join(root, spec))
        if not rel.startswith(root + "/"):
            continue
        for option in _sources_of(rel):
            if option in own:
                found.append(option)
                break
    if not found:
        found = [f"{root}/{f}" for f in NODE_FALLBACKS if f"{root}/{f}" in own][:1]
    return found


def _sources_of(path: str) -> list[str]:
    options = [path]
    stem = path
    for suffix in (".d.ts", ".js", ".mjs", ".cjs", ".ts"):
        if stem.endswith(suffix):
            stem = stem[: -len(suffix)]
            break
    for built, source in (("/dist/", "/src/"), ("/lib/", "/src/"), ("/build/", "/src/")):
        if built in stem:
            stem_source = stem.replace(built, source, 1)
            options += [stem_source + s for s in (".ts", ".tsx", ".js")]
    options += [stem + s for s in (".ts", ".tsx", ".d.ts")]
    return options


def _leaves(value: Any) -> list[str]:
    """Every string of an `exports` map (conditions nested in any order), or the string."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _leaves(v)]
    if isinstance(value, list):
        return [s for v in value for s in _leaves(v)]
    return []


def _python_init(root: str, path: str) -> bool:
    """A top-level package's `__init__.py` (flat or `src/` layout)."""
    rel = path[len(root) + 1 :].split("/")
    return rel[-1] == "__init__.py" and (len(rel) == 2 or (len(rel) == 3 and rel[0] == "src"))


def _go_root_file(root: str, path: str) -> bool:
    """A Go file of the module's root package (its exported API), not a test."""
    rel = path[len(root) + 1 :]
    return "/" not in rel and rel.endswith(".go") and not rel.endswith("_test.go")


def for_component(
    settings: Settings, component: object | None, projects: ProjectMap | None = None
) -> ProjectScope | None:
    """The scope of a step's component (its `project`, when the plan names one), or None;
    `projects`: the task's pinned map (None: the configuration's)."""
    name = getattr(component, "project", None)
    if projects is None:
        projects = settings.project_map() if settings.projects else None
    if not projects or not isinstance(name, str):
        return None
    return ProjectScope.of(projects, name)
