"""The Feature → Phase → Component work graph, as a networkx DAG.

A validated plan becomes components with explicit `depends_on` edges, plus the implicit phase
sequencing: every component of phase N+1 waits for every component of phase N. A cycle is an error
that names it. Ready components are offered by priority (more dependents first, then plan order)
and batched so that no two components running at once touch the same file. Statuses roll up from
components to phases to the feature.

networkx is imported when a graph is first needed: `status` shows a stored plan's progress without
one, and importing networkx costs a command ~0.3 s.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from supervisor.core.errors import ConfigError

if TYPE_CHECKING:
    import networkx as nx
    from networkx import DiGraph

    from supervisor.core.projects import ProjectMap
    from supervisor.core.schemas import PlanOutput

ACTIVE = {"implementing", "testing", "review", "running"}
MERGING = "merging"
"""Finished, its merge not yet in: its slot is free, its files are not (`batch`)."""
HOLDING_FILES = ACTIVE | {MERGING}
# A component's recorded progress (supervisor.workflow.steps.components) as the graph counts it.
PROGRESS = {
    "pending": "pending",
    "running": "running",
    "implemented": "running",
    "gated": "running",
    "merged": "complete",
    "failed": "failed",
    "conflict": "failed",
    "waiting": "waiting",
    "expanding": "waiting",  # split into a sub-plan, or waiting for the engine to decide
}


@dataclass
class Component:
    id: str
    phase: str
    description: str
    files: list[str]
    depends_on: list[str]
    order: int
    status: str = "pending"
    parent: str | None = None
    """The component it is a sub-component of (supervisor/workflow/decompose.py), if any."""
    project: str | None = None
    """The monorepo project it belongs to (supervisor/core/projects.py), if any."""


def _networkx() -> Any:
    import networkx

    return networkx


def import_ahead() -> None:
    """Import networkx now, from a thread that waits anyway (steps/prepare.py, while a worker
    runs): the planner's answer becomes a graph before the next step can start, and the first
    import (~0.25 s) sat there, between the planner's exit and the next worker's prompt."""
    _networkx()


@dataclass
class WorkGraph:
    phases: list[str]
    components: dict[str, Component]
    _graph: nx.DiGraph[str] | None = field(default=None, repr=False, compare=False)
    builds_on: Mapping[str, list[str]] = field(default_factory=dict)
    """Project -> the projects it depends on, transitively (empty: one project): a consumer's
    component waits for every component of its producers, so the shared types are built and
    gated (with the consumers' gates: supervisor/gates/per_project.py) before it starts."""

    @classmethod
    def from_plan(cls, plan: PlanOutput, projects: ProjectMap | None = None) -> WorkGraph:
        """The graph of a plan; a cycle or a dangling depends_on is an error here and now."""
        work = cls._of_plan_data(plan.model_dump())
        if projects:
            work.builds_on = {name: projects.dependencies(name) for name in projects.names}
        work._graph = work._build()
        return work

    @classmethod
    def _of_plan_data(cls, plan: dict[str, Any]) -> WorkGraph:
        """Components from a plan as `PlanOutput.model_dump()` writes it; no graph built yet."""
        components: dict[str, Component] = {}
        phases: list[str] = []
        for phase in plan["phases"]:
            phases.append(phase["id"])
            for c in phase["components"]:
                if c["id"] in components:
                    raise ConfigError(
                        f"The plan names component '{c['id']}' twice.",
                        "Component ids must be unique across phases; ask for a new plan.",
                    )
                components[c["id"]] = Component(
                    c["id"],
                    phase["id"],
                    c["description"],
                    list(c.get("files") or []),
                    list(c.get("depends_on") or []),
                    len(components),
                    project=c.get("project"),
                )
        for dep in plan.get("dependencies") or []:
            source, target = dep["source"], dep["target"]
            if source in components and target not in components[source].depends_on:
                components[source].depends_on.append(target)
        return cls(phases, components)

    @property
    def graph(self) -> nx.DiGraph[str]:
        """Explicit depends_on edges plus phase sequencing, built on first use."""
        if self._graph is None:
            self._graph = self._build()
        return self._graph

    def _build(self) -> DiGraph[str]:
        nx = _networkx()
        g: DiGraph[str] = nx.DiGraph()
        for comp in self.components.values():
            g.add_node(comp.id)
        for comp in self.components.values():
            for dep in comp.depends_on:
                if dep not in self.components:
                    raise ConfigError(
                        f"Component '{comp.id}' depends on '{dep}', which the plan does not "
                        "define.",
                        "Fix the plan's depends_on (or ask the planner again).",
                    )
                g.add_edge(dep, comp.id, kind="explicit")
        for comp in self.components.values():
            producers = set(self.builds_on.get(comp.project or "", []))
            for other in self.components.values():
                if other.project in producers and not g.has_edge(other.id, comp.id):
                    g.add_edge(other.id, comp.id, kind="project")
        for earlier, later in zip(self.phases, self.phases[1:], strict=False):
            for a in self.in_phase(earlier):
                for b in self.in_phase(later):
                    if not g.has_edge(a.id, b.id):
                        g.add_edge(a.id, b.id, kind="phase")
        try:
            cycle = nx.find_cycle(g)
        except nx.NetworkXNoCycle:
            return g
        path = [edge[0] for edge in cycle] + [cycle[0][0]]
        across = any(g.edges[a, b].get("kind") == "project" for a, b, *_ in cycle)
        raise ConfigError(
            f"The plan's dependencies form a cycle: {' → '.join(path)}.",
            "Remove one of those depends_on entries (a component cannot wait for itself)"
            + (
                "; a component waits for every component of the projects its project depends "
                "on, so a producer's component cannot come after its consumer's (phases, "
                "depends_on)."
                if across
                else "."
            ),
        )

    def in_phase(self, phase: str, project: str | None = None) -> list[Component]:
        """The phase's components (of `project` only, when given)."""
        return [
            c
            for c in self.components.values()
            if c.phase == phase and (project is None or c.project == project)
        ]

    def projects(self) -> list[str]:
        """The projects the plan's components belong to, in plan order (empty: one project):
        `status` and the TUI show feature → project → phase → component."""
        return list(dict.fromkeys(c.project for c in self.components.values() if c.project))

    def project_status(self, project: str) -> str:
        return rollup([c.status for c in self.components.values() if c.project == project])

    def ready(self) -> list[Component]:
        """Pending components whose every predecessor is complete, by priority."""
        nx = _networkx()
        found = [
            c
            for c in self.components.values()
            if c.status == "pending"
            and all(self.components[p].status == "complete" for p in self.graph.predecessors(c.id))
        ]
        return sorted(found, key=lambda c: (-len(nx.descendants(self.graph, c.id)), c.order))

    def batch(self, limit: int) -> list[Component]:
        """Up to `limit` ready components that share no file with each other or a running one."""
        busy = {f for c in self.components.values() if c.status in HOLDING_FILES for f in c.files}
        chosen: list[Component] = []
        for comp in self.ready():
            if len(chosen) + sum(c.status in ACTIVE for c in self.components.values()) >= limit:
                break
            if busy & set(comp.files):
                continue
            chosen.append(comp)
            busy |= set(comp.files)
        return chosen

    def merge_order(self) -> list[str]:
        """Dependency order (ties by plan order): the order finished components are merged in."""
        nx = _networkx()
        return list(
            nx.lexicographical_topological_sort(self.graph, key=lambda n: self.components[n].order)
        )

    @classmethod
    def of_workflow(cls, context: dict[str, Any]) -> WorkGraph | None:
        """The plan of a workflow with each component's recorded progress, for `status`. Read as
        stored (the engine validated it when it accepted the plan), without pydantic or networkx:
        a person waits for `status`."""
        plan = context.get("plan")
        if not plan:
            return None
        children = tree_children(context)
        work = cls._of_plan_data(flatten(plan, children) if children else plan)
        for parent, below in children.items():
            for child in below:
                if child["id"] in work.components:
                    work.components[child["id"]].parent = parent
        for cid, entry in (context.get("components") or {}).items():
            if cid in work.components:
                work.components[cid].status = PROGRESS.get(entry.get("status"), "pending")
        return work

    def phase_status(self, phase: str) -> str:
        return rollup([c.status for c in self.in_phase(phase)])

    def feature_status(self) -> str:
        return rollup([self.phase_status(p) for p in self.phases])


def depth(work: WorkGraph, cid: str) -> int:
    """0 for a component of the plan, 1 for a sub-component, and so on."""
    found, parent = 0, work.components[cid].parent
    while parent is not None and parent in work.components:
        found, parent = found + 1, work.components[parent].parent
    return found


def tree_children(context: Mapping[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """Parent component -> its sub-components, as the workflow's context stores the tree."""
    nodes = (context.get("decomposition") or {}).get("nodes") or {}
    return {cid: list(n["children"]) for cid, n in nodes.items() if n.get("children")}


def flatten(plan: dict[str, Any], children: Mapping[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """The plan with every installed sub-plan in it, for the work graph: a sub-component sits in
    its parent's phase and inherits the parent's dependencies (they are done before it starts);
    the parent depends on its sub-components, so that it comes back (for its QA pass) once they
    are all merged into its branch."""
    deps_of: dict[str, list[str]] = {}
    for phase in plan.get("phases") or []:
        for comp in phase.get("components") or []:
            deps_of[comp["id"]] = list(comp.get("depends_on") or [])
    for dep in plan.get("dependencies") or []:
        if dep["source"] in deps_of and dep["target"] not in deps_of[dep["source"]]:
            deps_of[dep["source"]].append(dep["target"])

    def expand(comp: dict[str, Any], inherited: list[str]) -> list[dict[str, Any]]:
        own = list(dict.fromkeys([*inherited, *(comp.get("depends_on") or [])]))
        below_ids = [c["id"] for c in children.get(comp["id"], [])]
        if not below_ids:
            return [{**comp, "depends_on": own}]
        below: list[dict[str, Any]] = []
        for child in children[comp["id"]]:  # a sub-component stays in its parent's project
            below += expand({**child, "project": comp.get("project")}, own)
        return [{**comp, "depends_on": [*own, *below_ids]}, *below]

    phases = []
    for phase in plan.get("phases") or []:
        comps: list[dict[str, Any]] = []
        for comp in phase.get("components") or []:
            comps += expand({**comp, "depends_on": deps_of[comp["id"]]}, [])
        phases.append({**phase, "components": comps})
    return {**plan, "phases": phases, "dependencies": []}


def rollup(statuses: list[str]) -> str:
    if statuses and all(s == "complete" for s in statuses):
        return "complete"
    if any(s == "failed" for s in statuses):
        return "failed"
    if any(s in ACTIVE or s in ("in_progress", "complete", "waiting") for s in statuses):
        return "in_progress"
    return "pending"


def suggest_dependencies(
    work: WorkGraph, imports_of: dict[str, list[str]]
) -> list[tuple[str, str, str]]:
    """(component, should depend on, why) for imports between components that the plan does not
    already order; `imports_of` maps a file to the repository files it imports."""
    nx = _networkx()
    owner = {f: c.id for c in work.components.values() for f in c.files}
    found: dict[tuple[str, str], str] = {}
    for comp in work.components.values():
        for path in comp.files:
            for imported in imports_of.get(path, []):
                other = owner.get(imported)
                if other is None or other == comp.id or (comp.id, other) in found:
                    continue
                if not nx.has_path(work.graph, other, comp.id):
                    found[(comp.id, other)] = f"{path} imports {imported}"
    return [(a, b, why) for (a, b), why in found.items()]
