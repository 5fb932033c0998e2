"""What every step module shares: the context a step acts through, and the Outcome it returns.

Why one small interface: the engine decides and is the only writer of workflow progress; a step
module acts (runs a worker, a gate, a merge) and hands back an `Outcome`, including the records of
the step runs it finished (`StepRecord`), which the engine commits together with the workflow's
move in one transaction (`Store.transition`). The component fan-out drives several step runs
inside one workflow step, so it commits its own progress through `StepContext.checkpoint`, which
is the engine's writer too.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from supervisor.core.errors import SupervisorError
from supervisor.sandbox.docker import LABEL_REPO, LABEL_STEP, LABEL_WORKFLOW, repo_label
from supervisor.state.store import EventSpec, StepRecord
from supervisor.workspace.worktrees import Workspace

if TYPE_CHECKING:
    from pathlib import Path

    from supervisor.core.config import Settings
    from supervisor.policy.recovery import Classification
    from supervisor.sandbox.base import Sandbox
    from supervisor.state.store import Store, Workflow


class Reporter:
    """Where the engine tells a person what it is doing; the CLI supplies a richer one."""

    def step(self, wf_id: int, name: str, detail: str) -> None: ...
    def output(self, text: str) -> None: ...
    def info(self, text: str) -> None: ...


@dataclass
class Outcome:
    """What one step run amounted to, before the engine decides where to go next."""

    result: str  # passed | failed | rejected
    feedback: str | None = None
    events: list[EventSpec] = field(default_factory=list)
    context: dict[str, Any] = field(default_factory=dict)
    git_sha: str | None = None
    escalate: SupervisorError | None = None
    transient: Classification | None = None
    """Set when the step should simply run again (after a delay): network, crash, rate limit."""
    resume_at: str | None = None
    """With `escalate`: the step a later `resume` starts at (a gate, to re-check it first)."""
    goto: str | None = None
    """With a failure or rejection: the step the work goes back to, instead of on_fail/on_reject."""
    records: list[StepRecord] = field(default_factory=list)
    """The step runs this outcome finished, not yet written: they commit with the transition."""
    session: dict[str, Any] | None = None
    """A worker of a role that may continue: the CLI session its run left (cli, session_id)."""
    cli: str | None = None
    """The CLI a worker step ran on: where a failover starts from (supervisor/routing)."""


Checkpoint = Callable[[int, str, dict[str, Any], list[EventSpec], list[StepRecord]], None]
"""(workflow id, step, new context, events, finished step runs): one transaction."""


class Preparing(Protocol):
    """What the engine drives of steps/prepare.py's Pipeline (named here, not imported: that
    module acts through a StepContext)."""

    def ahead(self, wf: Workflow, expected: Any, worker: bool = False) -> None: ...
    def answered(self, wf: Workflow, context: dict[str, Any]) -> None: ...
    def settle(self) -> None: ...
    def close(self) -> None: ...


@dataclass
class StepContext:
    """Everything a step module may use. The names match the engine's attributes they replace
    (dependency_review reads `repo`, `settings`, `store`, `ws`, `reporter` from it)."""

    repo: Path
    settings: Settings
    store: Store
    ws: Workspace
    sandbox: Sandbox
    reporter: Reporter
    checkpoint: Checkpoint
    routes: dict[str, str] = field(default_factory=dict)
    """role -> the CLI the engine chose for it, for the step running now (supervisor.routing)."""
    dispatch: list[dict[str, Any]] | None = None
    """The Temporal runner: a component fan-out hands its ready components to the workflow (one
    activity each, on any worker host) instead of running them here; this holds what the last
    ones came back with (supervisor/temporal/components.py). None: they run here, in threads."""

    pipeline: Preparing | None = None
    """The next step's preparations, made while this one runs (steps/prepare.py); None: none."""

    def labels(self, wf_id: int, step: str) -> dict[str, str]:
        return {LABEL_REPO: repo_label(self.repo), LABEL_WORKFLOW: str(wf_id), LABEL_STEP: step}


class LineSplitter:
    """Turns streamed chunks into whole lines for an adapter's progress formatter."""

    def __init__(self, describe: Callable[[str], str | None], sink: Callable[[str], None]):
        self.describe = describe
        self.sink = sink
        self.pending = ""

    def __call__(self, chunk: str) -> None:
        self.pending += chunk
        *lines, self.pending = self.pending.split("\n")
        for line in lines:
            text = self.describe(line)
            if text:
                self.sink(text)


def candidate_ref(wf_id: int) -> str:
    return f"refs/supervisor/wf{wf_id}/candidate"


def component_branch(task_branch: str, component_id: str) -> str:
    """A sibling of the task branch (`ai/3-x--parser`): git forbids `ai/3-x/parser` next to it."""
    return f"{task_branch}--{Workspace.slugify(component_id)}"


def feedback_of(ctx: dict[str, Any]) -> dict[str, list[str]]:
    return ctx.setdefault("feedback", {})  # type: ignore[no-any-return]


def message(error: Exception) -> str:
    return error.message if isinstance(error, SupervisorError) else str(error)


def err(error: Exception) -> dict[str, Any]:
    payload: dict[str, Any] = {"error": message(error), "kind": type(error).__name__}
    if isinstance(error, SupervisorError) and error.hint:
        payload["hint"] = error.hint
    return payload
