"""What each role must answer, as pydantic models.

A worker's answer is only ever read through these models: unknown keys and missing fields are
errors, so a model that drifts from the contract is caught at once and told what to fix. The
schema each vendor receives is derived from these models by `supervisor.workers.structured_output`.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator, model_validator

from supervisor.core.strict_model import StrictModel


class _Strict(StrictModel):
    @model_validator(mode="before")
    @classmethod
    def _null_means_default(cls, data: Any) -> Any:
        """OpenAI strict mode makes every optional field required and nullable, so a model
        answers `"summary": null` where it means "not given": null then takes the default.
        A required field stays required: null there is still an error."""
        if not isinstance(data, dict):
            return data
        fields = cls.model_fields
        return {
            key: value
            for key, value in data.items()
            if not (
                value is None
                and key in fields
                and not fields[key].is_required()
                and fields[key].get_default(call_default_factory=True) is not None
            )
        }


class ComponentDefinition(_Strict):
    id: str = Field(description="Short identifier, unique within the plan.")
    description: str
    files: list[str] = Field(default_factory=list, description="Files this component touches.")
    depends_on: list[str] = Field(default_factory=list)
    estimated_lines: int = Field(0, ge=0, description="Lines it will write or change, roughly.")
    project: str | None = Field(
        None,
        description="In a monorepo: the project (package) this component belongs to, by name; "
        "its files stay inside that project or the shared paths. null in a single-project "
        "repository.",
    )


class PhaseDefinition(_Strict):
    id: str
    description: str
    components: list[ComponentDefinition] = Field(default_factory=list)


class Dependency(_Strict):
    source: str = Field(description="The component that depends on another.")
    target: str = Field(description="The component it depends on.")
    reason: str = ""


class PlanOutput(_Strict):
    """The planner's answer."""

    status: Literal["COMPLETE", "NEEDS_REFINEMENT", "BLOCKED"]
    summary: str = ""
    phases: list[PhaseDefinition]
    dependencies: list[Dependency] = Field(default_factory=list)
    estimated_components: int = Field(ge=0)
    risks: list[str] = Field(default_factory=list)


class ImplementationOutput(_Strict):
    """The implementer's answer. Its file lists are claims: the supervisor checks the worktree."""

    status: Literal["SUCCESS", "PARTIAL", "FAILED", "TOO_LARGE", "SPEC_CONFLICT"]
    summary: str = ""
    reason: str = Field(
        "",
        description="With TOO_LARGE: why the work is too big for one worker. With "
        "SPEC_CONFLICT: why the task cannot be done without changing the existing tests.",
    )
    conflicting_tests: list[str] = Field(
        default_factory=list,
        description="With SPEC_CONFLICT: the existing tests that contradict the task, e.g. "
        "`tests/test_calc.py::test_add`.",
    )
    files_created: list[str] = Field(default_factory=list)
    files_modified: list[str] = Field(default_factory=list)
    tests_written: list[str] = Field(default_factory=list)
    blockers: list[str] = Field(default_factory=list)


class ReviewIssue(_Strict):
    severity: Literal["critical", "major", "minor", "info"]
    description: str
    file: str | None = None
    line: int | None = None


class ReviewOutput(_Strict):
    """The reviewer's answer: the only way a review can approve anything."""

    status: Literal["APPROVED", "CHANGES_REQUESTED", "REJECTED"]
    summary: str = ""
    issues: list[ReviewIssue] = Field(default_factory=list)
    suggestions: list[str] = Field(default_factory=list)
    security_concerns: list[str] = Field(default_factory=list)


def _repository_paths(paths: list[str]) -> list[str]:
    """A worker names files of the repository: relative, inside it. Others are refused, not
    dropped, so the worker is told (the paths steer context packing and the simple path's plan)."""
    bad = [p for p in paths if p.startswith(("/", "\\")) or ".." in p.replace("\\", "/").split("/")]
    if bad:
        raise ValueError(f"paths must be relative to the repository, inside it: {bad[:5]}")
    return paths


class AnalysisOutput(_Strict):
    """The analyzer's verdict on a task, before anything is planned: every field is required, so
    a verdict without a score or a path is refused, never guessed (supervisor/workflow/depth.py
    turns the score into the path the task takes)."""

    complexity: int = Field(ge=1, le=10, description="1 = a one-line fix, 10 = a new subsystem.")
    path: Literal["simple", "planned", "researched"] = Field(
        description="simple: one implementer, no plan; planned: plan then implement; "
        "researched: investigate the code first, then plan."
    )
    reasons: list[str] = Field(min_length=1, description="Why this score and path.")
    expected_files: list[str] = Field(description="The files the task will likely touch.")
    recommended_components: int = Field(ge=1, le=50)

    _inside = field_validator("expected_files")(_repository_paths)


class ResearchOutput(_Strict):
    """The investigator's report: a document for the planner's prompt, never an edit."""

    findings: list[str] = Field(min_length=1)
    files: list[str] = Field(description="The files that matter for the task.")
    risks: list[str]
    open_questions: list[str]

    _inside = field_validator("files")(_repository_paths)


OUTPUT_SCHEMAS: dict[str, type[BaseModel]] = {
    "analysis": AnalysisOutput,
    "research": ResearchOutput,
    "plan": PlanOutput,
    "implementation": ImplementationOutput,
    "review": ReviewOutput,
}
