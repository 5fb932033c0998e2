"""The projects of a monorepo: which package a file belongs to, and which packages a change reaches.

One repository may hold several projects (`projects:` in the config, written by `supervisor
init` from the workspace manifests), each with its own roles, gates and image, and declared
dependencies between them (`cross_project_dependencies:`). Everything that needs the map (the
planner's prompt, the component scope check, the gates of a candidate, the context packer)
asks this one pure object, so the rules are decided in one place: a change to a project is
gated by that project and by every project that depends on it, transitively; producers are
built before their consumers. Validation happens before anything runs, and every error names
what is wrong and the line to fix.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Annotated

from pydantic import Field, field_validator

from supervisor.core.errors import ConfigError
from supervisor.core.strict_model import StrictModel

if TYPE_CHECKING:
    import networkx as nx

PROJECT_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.@/-]{0,127}$"
ROLE_NAME = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$"
"""A role's name, never a path: a repository's config names roles, their files decide."""


class ProjectSandbox(StrictModel):
    image: str | None = None
    """A prebuilt image for this project's workers and gates; None: the project's own image,
    built from its lock files like the repository's (supervisor/project/project_image.py)."""


class ProjectDef(StrictModel):
    name: str = Field(pattern=PROJECT_NAME)
    path: str
    """Relative to the repository root, `/`-separated; `.` is not a project path."""
    roles: list[Annotated[str, Field(pattern=ROLE_NAME)]] = Field(default_factory=list)
    """Roles suited to this project (shown to the planner beside it)."""
    gates: dict[str, str] = Field(default_factory=dict)
    """Gate name -> command, run in the project's directory; empty: the repository's gates."""
    sandbox: ProjectSandbox = Field(default_factory=ProjectSandbox)

    @field_validator("path")
    @classmethod
    def _relative(cls, value: str) -> str:
        return _clean(value, "a project's path")


class ProjectDependency(StrictModel):
    depends_on: list[str] = Field(default_factory=list)


def _clean(value: str, what: str) -> str:
    """A repository-relative path in one spelling: `./packages/api/` -> `packages/api`."""
    path = PurePosixPath(value.replace("\\", "/"))
    if path.is_absolute() or ".." in path.parts:
        raise ValueError(f"{what} must be inside the repository, relative to its root: {value!r}")
    parts = [p for p in path.parts if p != "."]
    if not parts:
        raise ValueError(f"{what} must name a directory below the repository root: {value!r}")
    return "/".join(parts)


def _inside(file: str, directory: str) -> bool:
    return file == directory or file.startswith(directory + "/")


@dataclass(frozen=True)
class Affected:
    """A project a change reaches, and why (shown in events, `status` and the TUI)."""

    project: str
    reason: str


@dataclass(frozen=True)
class ProjectMap:
    """The validated projects of one repository (empty: a single-project repository)."""

    projects: tuple[ProjectDef, ...] = ()
    depends_on: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    shared_paths: tuple[str, ...] = ()

    @classmethod
    def build(
        cls,
        projects: Iterable[ProjectDef],
        dependencies: Mapping[str, ProjectDependency],
        shared_paths: Iterable[str] = (),
        source: str = "the config",
    ) -> ProjectMap:
        """The map, or a ConfigError naming the unknown project, the overlap or the cycle."""
        listed = tuple(projects)
        names = [p.name for p in listed]
        seen: set[str] = set()
        for name in names:
            if name in seen:
                raise ConfigError(
                    f"{source}: two projects are named {name!r}.",
                    "Give every entry of `projects:` its own name.",
                )
            seen.add(name)
        for a, b in itertools.permutations(listed, 2):
            if _inside(b.path, a.path):
                raise ConfigError(
                    f"{source}: the paths of projects {a.name!r} ({a.path}) and {b.name!r} "
                    f"({b.path}) overlap: a file would belong to both.",
                    "Give each project its own directory, neither inside the other.",
                )
        edges: dict[str, tuple[str, ...]] = {}
        for name, dep in dependencies.items():
            for other in (name, *dep.depends_on):
                if other not in seen:
                    raise ConfigError(
                        f"{source}: `cross_project_dependencies` names {other!r}, which is not "
                        f"a project (the projects are: {', '.join(names) or 'none'}).",
                        "Fix the name, or add the project to `projects:`.",
                    )
            if name in dep.depends_on:
                raise ConfigError(
                    f"{source}: project {name!r} depends on itself.",
                    f"Remove {name!r} from its own `depends_on`.",
                )
            edges[name] = tuple(dict.fromkeys(dep.depends_on))
        shared = tuple(_shared(shared_paths, source))
        built = cls(listed, edges, shared)
        cycle = built._cycle()
        if cycle:
            raise ConfigError(
                f"{source}: the projects depend on each other in a cycle: "
                + " -> ".join([*cycle, cycle[0]])
                + ".",
                "A project cannot be built before itself: remove one of these `depends_on`.",
            )
        return built

    def __bool__(self) -> bool:
        return bool(self.projects)

    @property
    def names(self) -> list[str]:
        return [p.name for p in self.projects]

    def get(self, name: str) -> ProjectDef:
        for project in self.projects:
            if project.name == name:
                return project
        raise ConfigError(
            f"There is no project named {name!r} (the projects are: {', '.join(self.names)}).",
            "Name one of the projects of `projects:` in the config.",
        )

    def check_paths(self, repo: Path) -> None:
        """Every project's directory exists in the repository: a typo is caught before a run."""
        for project in self.projects:
            if not (repo / project.path).is_dir():
                raise ConfigError(
                    f"Project {project.name!r}: its path {project.path!r} is not a directory "
                    f"of {repo}.",
                    "Fix `path:` in `projects:` (relative to the repository root), or remove "
                    "the project.",
                )

    def project_of(self, file: str) -> str | None:
        """The project a repository-relative file belongs to; None: outside every project."""
        path = _clean(file, "a file")
        for project in self.projects:
            if _inside(path, project.path):
                return project.name
        return None

    def is_shared(self, file: str) -> bool:
        path = _clean(file, "a file")
        return any(_inside(path, shared) for shared in self.shared_paths)

    def may_touch(self, project: str, file: str) -> bool:
        """A component of `project` changes its own project's files and the declared shared
        paths, nothing else: a consumer's fix never lands in the producer unseen."""
        return self.project_of(file) == project or self.is_shared(file)

    def dependencies(self, name: str) -> list[str]:
        """What `name` builds on, transitively, producers first."""
        graph = self._graph()
        import networkx

        wanted = networkx.descendants(graph, name)
        return [n for n in self.order() if n in wanted]

    def dependents(self, names: Iterable[str]) -> list[str]:
        """Every project that builds on any of `names`, transitively (not `names` themselves)."""
        graph = self._graph()
        import networkx

        start = set(names)
        found: set[str] = set()
        for name in start:
            found |= networkx.ancestors(graph, name)
        return [n for n in self.order() if n in found - start]

    def affected(self, changed_files: Iterable[str]) -> list[Affected]:
        """The projects whose gates a change must pass: those it changed, then every project
        depending on them; a shared path reaches every project. In build order."""
        files = list(changed_files)
        reasons: dict[str, str] = {}
        if any(self.is_shared(f) for f in files):
            shared = next(f for f in files if self.is_shared(f))
            for name in self.names:
                reasons[name] = f"shared path changed ({shared})"
        for file in files:
            owner = self.project_of(file)
            if owner is not None and owner not in reasons:
                reasons[owner] = f"changed ({file})"
        for name in self.dependents(list(reasons)):
            if name not in reasons:
                via = [d for d in self.dependencies(name) if d in reasons]
                reasons[name] = f"depends on {', '.join(via)}"
        return [Affected(n, reasons[n]) for n in self.order() if n in reasons]

    def order(self) -> list[str]:
        """Producers before consumers; among equals, the config's order."""
        import networkx

        rank = {name: i for i, name in enumerate(self.names)}
        builds_first = self._graph().reverse(copy=False)  # producer -> consumer
        return list(networkx.lexicographical_topological_sort(builds_first, key=rank.__getitem__))

    def _cycle(self) -> list[str]:
        if not any(self.depends_on.values()):
            return []  # no edge, no cycle: and no networkx to load for a one-project repository
        import networkx

        try:
            edges = networkx.find_cycle(self._graph())
        except networkx.NetworkXNoCycle:
            return []
        return [a for a, _ in edges]

    def _graph(self) -> nx.DiGraph[str]:
        """An edge consumer -> producer for every declared dependency."""
        import networkx

        graph: nx.DiGraph[str] = networkx.DiGraph()
        graph.add_nodes_from(self.names)
        for name, deps in self.depends_on.items():
            graph.add_edges_from((name, dep) for dep in deps)
        return graph


def _shared(paths: Iterable[str], source: str) -> Iterable[str]:
    for path in paths:
        try:
            yield _clean(path, "a shared path")
        except ValueError as e:
            raise ConfigError(f"{source}: {e}", "Fix `shared_paths:` in the config.") from None
