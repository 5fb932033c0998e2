"""Creating a task: the checks before it exists, then its row and its branch.

Shared by the two ways a task starts: run here (supervisor/lifecycle/tasks.py, which also opens the
sandbox and drives the engine) and submitted to Temporal (supervisor/temporal/submit.py, which
hands it to workers that open their own). It imports neither Docker nor the engine, so that a
submission, which needs neither on the submitting host, does not wait for them to load.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from supervisor.core.errors import StateError, SupervisorError
from supervisor.core.redaction import redact
from supervisor.guard import protected
from supervisor.lifecycle.doctor import clis_in_use
from supervisor.lifecycle.opening import (
    Project,
    open_project,
    require_trust,
    task_definition,
    with_depth,
)
from supervisor.policy import approval_policy
from supervisor.state import registry
from supervisor.state.records import EventSpec

if TYPE_CHECKING:
    from pathlib import Path

    from supervisor.core.config import WorkflowDef
    from supervisor.state.records import Workflow
    from supervisor.state.writer import TaskRows
    from supervisor.workflow.depth import Asked


CREATED: list[int] = []
"""The ids of the tasks this process created, oldest first: what a Ctrl-C names
(supervisor/cli/interrupt.py) without opening the state database a second time."""


Backend = Literal["embedded", "temporal"]


def backend_for(path: Path, asked: str | None) -> Backend:
    """Where a task runs: `--backend` when a person gives it, else the project's setting. A name
    neither backend answers to is refused before the task exists, not left to run here."""
    if (asked or open_project(path).settings.backend) == "temporal":
        return "temporal"
    if asked not in (None, "embedded"):
        raise SupervisorError(f"--backend {asked!r} is unknown.", "Use embedded or temporal.")
    return "embedded"


@dataclass
class Prepared:
    """A task that passed every check that needs no sandbox, not created yet."""

    project: Project
    description: str  # redacted
    definition: WorkflowDef
    clis: list[str]
    skipped_gates: list[str]
    no_gate: bool
    start: dict[str, Any] = field(default_factory=dict)  # the first context and events


def prepare(
    description: str,
    project: Project,
    *,
    roles: dict[str, str] | None = None,
    no_gate: bool = False,
    allow_protected: list[str] | None = None,
    depth: Asked = "planned",
) -> Prepared:
    """`project`: opened with the task's CLI (`open_project(path, {"cli": ...})`)."""
    if not description.strip():
        raise StateError("The task description is empty.", 'Describe the task: start-task "..."')
    description, _ = redact(description)  # its branch name, state and prompts never hold a secret
    require_trust(project)
    definition, skipped = task_definition(project, roles, no_gate)
    definition, depth_context, depth_events = with_depth(project, definition, depth, description)
    approval_policy.load(project.root)  # a bad policy file stops the task before it starts
    pinned = protected.pinned_start(project.settings, allow_protected)
    return Prepared(
        project,
        description,
        definition,
        clis_in_use(definition, project.settings, project.root),
        skipped,
        no_gate,
        {
            "context": {**pinned["context"], **depth_context},
            "events": [*pinned["events"], *depth_events],
        },
    )


def create(task: Prepared, store: TaskRows) -> Workflow:
    """The task's row, from the checkout's current commit."""
    ws = task.project.workspace
    wf = store.create_workflow(
        description=task.description,
        cli=task.project.settings.cli,
        base_branch=ws.current_branch(),
        base_sha=ws.head_commit(),
        branch_for_id=lambda i: f"ai/{i}-{ws.slugify(task.description)}",
        definition=task.definition.model_dump(),
        first_step=task.definition.initial_step,
        **task.start,
    )
    CREATED.append(wf.id)
    registry.remember(task.project.root)  # what `supervisor web` lists; never raises
    return wf


def begin(task: Prepared, store: TaskRows, wf: Workflow) -> None:
    """What follows the row, under the task's lock: the skipped gates said, the task branch."""
    if task.no_gate:
        store.add_event(
            wf.id,
            EventSpec(
                "gates_skipped",
                status="skipped",
                payload={"gates": task.skipped_gates, "reason": "start-task --no-gate"},
            ),
        )
    task.project.workspace.create_task_branch(wf.id, task.description, base=wf.base_sha)
