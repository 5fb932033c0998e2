"""The schema of a workflow: its steps, what each runs (a role, parallel reviewers, a gate or the
commit), where it goes next, and a template's own depth setting.

Apart from the settings (supervisor/core/settings.py) because a workflow is not read from the
settings cascade: it is a template (config/workflow_templates/) adjusted by the settings'
`workflow` choice (supervisor/workflow/templates.py), and the engine and decide() walk it.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from supervisor.core.strict_model import StrictModel

DEGRADE_LEVELS = ["simplified", "minimal"]


class StepDef(StrictModel):
    role: str | None = None
    roles: list[str] | None = None
    """Several reviewer roles run in parallel; the step passes only if every one approves."""
    retry_policy: str | None = None
    gate: str | None = None
    action: Literal["commit"] | None = None
    next: str | None = None
    on_fail: str | None = None
    on_reject: str | None = None
    max_retries: int = Field(2, ge=0)
    human_approval: bool = False
    for_each: Literal["component"] | None = None
    """`component`: one worker per planned component, each on its own branch, in parallel where
    their files do not overlap, merged in dependency order once its gates pass."""
    gates: list[str] = Field(default_factory=list)
    """With `for_each`: the gates each component passes on its own branch before its merge."""
    interfaces: bool = False
    """The files this step writes are interfaces: compiled where a compiler applies, then
    read-only for every later step (a worker that changes one fails)."""
    degrade: list[Literal["simplified", "minimal"]] = Field(default_factory=list)
    """Graceful degradation (supervisor/workflow/degrade.py): once the retries are spent, one run
    at each listed level, in this order, before the step fails."""

    @model_validator(mode="after")
    def _one_kind(self) -> StepDef:
        kinds = [k for k in ("role", "roles", "gate", "action") if getattr(self, k)]
        if len(kinds) != 1:
            raise ValueError("a step needs exactly one of `role`, `roles`, `gate` or `action`")
        if (self.for_each or self.gates) and not self.role:
            raise ValueError("`for_each` and `gates` belong to a step with one `role`")
        if self.interfaces and (not self.role or self.for_each):
            raise ValueError("`interfaces` belongs to a step with one `role` and no `for_each`")
        if self.gates and not self.for_each:
            raise ValueError("`gates` needs `for_each: component` (a plain step uses a gate step)")
        if self.degrade and (not self.role or self.for_each):
            raise ValueError("`degrade` belongs to a step with one `role` and no `for_each`")
        if self.degrade and self.degrade not in (["simplified"], ["minimal"], DEGRADE_LEVELS):
            raise ValueError("`degrade` lists simplified, then minimal, each at most once")
        return self

    @property
    def kind(self) -> str:
        if self.roles:
            return "parallel"
        return "role" if self.role else "gate" if self.gate else "action"


class TemplateDepth(StrictModel):
    """A template's own depth setting: the complexity from which its tasks are researched
    before they are planned (over limits.yaml's `depth.researched_min`)."""

    researched_min: int = Field(ge=1, le=11)


class WorkflowDef(StrictModel):
    initial_step: str
    steps: dict[str, StepDef]
    depth: TemplateDepth | None = None
