"""The workflow's progress as one typed, versioned model, stored as JSON in `workflows.context`.

Why: the progress (plan, components, retry counts, breaker, feedback, candidate, waits) used to be
an untyped dict that several modules changed; a misspelt key or a wrong shape went unnoticed
until a resume read it. The engine now loads it through `WorkflowState.load` (which migrates what
older versions wrote) and writes only what `dump` gives, so every stored context is valid and
carries its version. The JSON layout is unchanged apart from the `version` key: a key left at its
default is not stored, and readers (the CLI, the TUI, the sqlite3 reader) keep using `.get`.

Versions: 0 is every context written before this module (no `version` key); 1 is the same keys,
validated, with `version: 1`. A context from a newer supervisor is refused (StateError).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from supervisor.core.errors import StateError
from supervisor.core.schemas import AnalysisOutput, ResearchOutput
from supervisor.core.strict_model import StrictModel
from supervisor.gates.base_tests import SpecChange
from supervisor.gates.reuse import GateRun
from supervisor.routing.failover import Unavailable
from supervisor.workflow.decompose import Tree

VERSION = 1

Asked = Literal["auto", "simple", "planned", "researched"]
PathName = Literal["simple", "planned", "researched"]


class DepthState(StrictModel):
    """The task's depth (supervisor/workflow/depth.py) as pinned at start-task, and the path
    taken once it is known."""

    asked: Asked
    simple_max: int
    researched_min: int
    plan_step: str
    simple_step: str
    analyze_step: str | None = None
    research_step: str | None = None
    plan_signed_off: bool = False
    """The planner's step waits for a person's approval: the analyzer (a worker) cannot skip
    that by scoring low; only `--depth simple`, asked by a person, can."""
    path: PathName | None = None
    """The path taken; None while the analyzer has not answered."""
    by_score: PathName | None = None
    """The path the score and thresholds alone give (the least depth)."""
    suggested: PathName | None = None
    """The analyzer's own `path`."""
    why: str = ""


class WorkflowState(BaseModel):
    """Everything the engine remembers between steps; other keys (added by a newer module, or by
    a helper such as the dependency review) are kept as they are."""

    # Built when first validated, as StrictModel (supervisor/core/strict_model.py).
    model_config = ConfigDict(extra="allow", defer_build=True)

    version: int = VERSION
    # how deep the task goes (supervisor/workflow/depth.py), and what decided it
    depth: DepthState | None = None
    analysis: AnalysisOutput | None = None
    """The analyzer's verdict, as validated."""
    research: ResearchOutput | None = None
    """The investigator's report, a document for the planner's prompt."""
    # the plan and its components
    plan: dict[str, Any] | None = None
    planned_by: str | None = None
    components: dict[str, dict[str, Any]] = Field(default_factory=dict)
    integrated: str | None = None
    claims: dict[str, str] = Field(default_factory=dict)
    kept_branches: list[str] = Field(default_factory=list)
    decomposition: Tree = Field(default_factory=Tree)
    """Components split into sub-plans, and why (supervisor/workflow/decompose.py)."""
    # the work under judgement, and what judged it
    candidate: str | None = None
    gates_passed: dict[str, list[str]] = Field(default_factory=dict)
    reviewed: dict[str, list[str]] = Field(default_factory=dict)
    gate_failure: dict[str, Any] | None = None
    projects_gated: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """A monorepo's gate step -> its latest per-project runs (steps/project_gate.py), for
    `status` and the TUI; a component's own gates keep theirs in its `components` entry."""
    gate_runs: list[GateRun] = Field(default_factory=list)
    """The task's latest gate runs by tree, command, image and pins: reused, never run twice
    (supervisor/gates/reuse.py)."""
    test_pins: dict[str, int] = Field(default_factory=dict)
    """Test file -> test functions it must keep, beyond the base commit's: what a test engineer
    added and a counted gate accepted (supervisor/gates/test_pins.py)."""
    tests_proposed: dict[str, Any] | None = None
    """A test engineer's candidate (`tree`, `pins`), pinned once a counted gate passes it."""
    spec_change: SpecChange | None = None
    """What the latest counted gate's candidate did to the base's tests, and whether the base's
    tests pass on its code (supervisor/gates/base_oracle.py); the approval policy reads it."""
    spec_conflict: dict[str, Any] | None = None
    """A worker's word that the task contradicts the base's tests (`step`, `reason`, `tests`):
    the run waits for a person, who decides whether the specification changes."""
    locked_files: list[str] = Field(default_factory=list)
    locked_by: str | None = None
    locked_sha: str | None = None
    # retries, loops and the breaker
    feedback: dict[str, list[str]] = Field(default_factory=dict)
    attempts: dict[str, int] = Field(default_factory=dict)
    transient: dict[str, int] = Field(default_factory=dict)
    breaker: dict[str, int] = Field(default_factory=dict)
    trees: dict[str, list[str]] = Field(default_factory=dict)
    noops: dict[str, list[str]] = Field(default_factory=dict)
    degraded: dict[str, str] = Field(default_factory=dict)
    """Step -> the degradation level in force (supervisor/workflow/degrade.py)."""
    sessions: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """Step -> its continued CLI session: cli, session_id, turns (workflow/continuity.py)."""
    # waits for a person or a clock
    approval_step: str | None = None
    decision: dict[str, Any] | None = None
    """A person's decision on the waiting approval (`approval`, `status`), until a resume acts
    on it: what `status` shows as `approved (run supervisor resume N)`."""
    waiting_until: float | None = None
    pinned: dict[str, Any] | None = None
    dependency_request: dict[str, Any] | None = None
    # CLIs a step failed over from, until when (supervisor/routing/failover.py)
    unavailable: dict[str, Unavailable] = Field(default_factory=dict)

    @classmethod
    def load(cls, context: Mapping[str, Any]) -> WorkflowState:
        """The stored context, migrated to this version and validated."""
        data = migrate(dict(context))
        try:
            return cls.model_validate(data)
        except ValidationError as e:
            raise StateError(
                f"The workflow's stored progress is not valid: {e.errors()[0]['loc']}: "
                f"{e.errors()[0]['msg']}",
                "The state database was changed by hand or by another program; restore it "
                "from a backup or start the task again.",
            ) from e

    def merged(self, changes: Mapping[str, Any]) -> WorkflowState:
        """A copy with `changes` (a step's Outcome.context) applied, validated again."""
        return WorkflowState.load({**self.dump(), **changes})

    def dump(self) -> dict[str, Any]:
        """The JSON to store: keys at their default are left out, the version always in."""
        data = self.model_dump(mode="json", exclude_defaults=True)
        data["version"] = VERSION
        return data


def migrate(context: dict[str, Any]) -> dict[str, Any]:
    """Bring a stored context up to VERSION, one version at a time."""
    version = int(context.get("version", 0))
    if version > VERSION:
        raise StateError(
            f"The workflow's progress was written by a newer supervisor (version {version}, "
            f"this one knows up to {VERSION}).",
            "Upgrade supervisor (pip install -U supervisor) before resuming this task.",
        )
    if version == 0:
        # Version 0 is today's layout without a version key; the keys mean the same.
        context = {**context, "version": 1}
    return context
