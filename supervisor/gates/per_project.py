"""Which projects of a monorepo a gate runs in, for one candidate, and with what command.

Why: one set of gates for a whole monorepo either misses a consumer broken by a change to a
shared package (only that package's gates run) or runs every package's suite for a one-line
change to one app. So a candidate runs the gate in the projects it changed and in every project
that depends on them, transitively (ProjectMap.affected), each in its own directory, with its own
command (`projects[].gates`, or the repository's when the project names none) and its own image;
a change outside every project runs the repository's gate as before. Pure: the runner is
supervisor/workflow/steps/project_gate.py.

The workflow's own gate steps (the task's gate on its whole candidate, after the components)
run every project once: a dependency nobody declared is caught there, before the commit.

Interface-first falls out of this with the work graph's order: a consumer's components wait for
every component of its producers (supervisor/core/dag.py), and a producer's component is gated in
the producer and in each consumer before it merges, so the consumers' typecheck and tests have run
against the new shared types before any consumer component starts.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Mapping

    from supervisor.core.projects import ProjectMap


@dataclass(frozen=True)
class ProjectGate:
    """One project's run of a gate."""

    project: str
    reason: str
    """Why it runs: `changed (apps/web/x.ts)`, `depends on types`, ..."""
    directory: str
    command: str
    """As configured (shown to people); `script` is what runs."""
    image: str | None
    """The project's own image (`sandbox.image`); None: the repository's project image."""
    defined: bool = True
    """False: the project has gates of its own, and not this one: nothing runs for it."""

    @property
    def script(self) -> str:
        """The command run from the project's directory (the container starts at the root)."""
        return f"cd {shlex.quote(self.directory)} && {self.command}"


def choose(
    projects: ProjectMap,
    gate: str,
    repo_command: str,
    changed: list[str],
    everything: bool = False,
    pinned: Mapping[str, dict[str, str]] | None = None,
) -> list[ProjectGate] | None:
    """The projects `gate` runs in for a change of `changed` files, in build order (with
    `everything`, the task's final gate: every project, once); None: the repository's gate runs
    as before (one project, no change, or a file outside every project and the shared paths,
    which no project's gates would see). `pinned`: the projects' gates as the task pinned them
    when it started (supervisor/guard/protected.py), which win over today's configuration."""
    if not projects or not changed:
        return None
    for path in changed:
        try:
            owned = projects.project_of(path) is not None or projects.is_shared(path)
        except ValueError:
            owned = False
        if not owned:
            return None
    reasons = {a.project: a.reason for a in projects.affected(changed)}
    if everything:
        final = "the task's final gate runs every project"
        reasons = {name: reasons.get(name, final) for name in projects.order()}
    chosen = []
    for name, reason in reasons.items():
        project = projects.get(name)
        own = pinned[name] if pinned is not None and name in pinned else project.gates
        command = own.get(gate) if own else repo_command
        chosen.append(
            ProjectGate(
                project=project.name,
                reason=reason,
                directory=project.path,
                command=command or "",
                image=project.sandbox.image,
                defined=command is not None,
            )
        )
    return chosen
