"""What a plan must say about the projects of a monorepo, and what a component may change.

Why: in a monorepo each component is built, scoped and gated as part of one project (its
directory, its gates, its image: supervisor/core/projects.py). A plan whose component names
no project, a project that does not exist, or files of another project would have its worker
write where its gates never look, or behind a producer's back. So the plan is refused with the
reason and goes back to its planner, like a plan with a cycle; and at run time a worker's
change outside its component's project (and the declared shared paths) is refused like any
other scope violation (supervisor/workflow/ownership.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from supervisor.core.projects import ProjectMap


def problem(plan: dict[str, Any], projects: ProjectMap) -> str | None:
    """Why the plan's components do not fit the repository's projects, or None."""
    names = projects.names
    listed = ", ".join(names)
    for phase in plan.get("phases") or []:
        for comp in phase.get("components") or []:
            cid, project = comp["id"], comp.get("project")
            if not projects:
                if project is not None:
                    return (
                        f"Component '{cid}' names project {project!r}, but this repository "
                        "has no projects: set its `project` to null."
                    )
                continue
            if project is None:
                return (
                    f"Component '{cid}' names no project; this repository is a monorepo, and "
                    f"each component belongs to one of its projects ({listed}): set `project`."
                )
            if project not in names:
                return (
                    f"Component '{cid}' names project {project!r}, which is not one of this "
                    f"repository's projects ({listed})."
                )
            outside = strays(projects, project, comp.get("files") or [])
            if outside:
                where = projects.get(project).path
                shared = ", ".join(projects.shared_paths)
                return (
                    f"Component '{cid}' of project {project!r} ({where}/) names "
                    f"{', '.join(outside[:10])}, outside its project"
                    + (f" and the shared paths ({shared})" if shared else "")
                    + ": give those files to a component of their own project (it may depend "
                    "on this one)."
                )
    return None


def strays(projects: ProjectMap, project: str | None, files: Iterable[str]) -> list[str]:
    """The files a component of `project` may not change (none without a project map, or for
    a component without a project: the plan was checked when it was accepted)."""
    if not projects or project is None:
        return []
    found = []
    for path in files:
        try:
            allowed = projects.may_touch(project, path)
        except ValueError:  # an absolute path or one with `..`: never inside a project
            allowed = False
        if not allowed:
            found.append(path)
    return found


def owner_label(projects: ProjectMap, path: str) -> str:
    """Who a stray file belongs to, for the scope feedback: its project, or no project."""
    try:
        owner = projects.project_of(path)
    except ValueError:
        owner = None
    return f"project {owner}" if owner else "no project (outside every project)"


def for_prompt(projects: ProjectMap) -> list[dict[str, Any]]:
    """The project map as the planner's prompt shows it (planning.j2): producers first."""
    return [
        {
            "name": name,
            "path": projects.get(name).path,
            "roles": list(projects.get(name).roles),
            "depends_on": list(projects.depends_on.get(name, ())),
            "gates": sorted(projects.get(name).gates),
        }
        for name in (projects.order() if projects else [])
    ]
