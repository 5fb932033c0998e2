"""Loading a project's workflow: its own workflow.yaml or its chosen template, checked whole.

It lives here rather than in supervisor/core/config.py because it needs the roles, the retry
policies and the templates, which all read their files through supervisor.core.config: config stays
the bottom layer (files, models, the settings cascade) and nothing it imports comes back to it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from supervisor.context.roles import load_role
from supervisor.core import trustmap
from supervisor.core.config import Settings, WorkflowDef, _mapping, validate
from supervisor.core.errors import ConfigError
from supervisor.policy.recovery import policy
from supervisor.workflow import continuation, templates

if TYPE_CHECKING:
    from pathlib import Path


def _custom(repo: Path | None) -> Path | None:
    return trustmap.repo_path(repo, trustmap.WORKFLOW, trustmap.DATA) if repo else None


def workflow_source(repo: Path | None, settings: Settings) -> str:
    custom = _custom(repo)
    if custom is not None and custom.is_file():
        return str(custom)
    return f"workflow template '{settings.workflow.template}'"


def load_workflow(repo: Path | None, settings: Settings, *, gates: bool = True) -> WorkflowDef:
    """The project's own workflow.yaml, or its chosen template with its adjustments.

    `gates=False` leaves the gate commands unchecked, for `start-task --no-gate`, which removes
    the gate steps (supervisor/lifecycle/preflight.py)."""
    custom = _custom(repo)
    source = workflow_source(repo, settings)
    if custom is not None and custom.is_file():
        definition: WorkflowDef = validate(WorkflowDef, _mapping(custom).get("workflow"), custom)
    else:
        definition = validate(WorkflowDef, templates.build(settings.workflow, repo), source)
    check_workflow(definition, source, repo, settings, gates=gates)
    templates.check_graph(definition, source)
    return definition


def check_workflow(
    definition: WorkflowDef,
    source: Path | str,
    repo: Path | None,
    settings: Settings,
    *,
    gates: bool = True,
) -> None:
    """Reject a definition that would fail mid-task: dangling names, unknown roles and gates."""
    steps = definition.steps
    if definition.initial_step not in steps:
        raise ConfigError(
            f"{source}: initial_step '{definition.initial_step}' is not one of the steps "
            f"({', '.join(steps)}).",
            "Name an existing step as initial_step.",
        )
    for name, step in steps.items():
        for field in ("next", "on_fail", "on_reject"):
            target = getattr(step, field)
            if target is not None and target not in steps:
                raise ConfigError(
                    f"{source}: step '{name}' has {field}: '{target}', which is not a step.",
                    f"Use one of: {', '.join(steps)}.",
                )
        for role_name in [step.role] if step.role else step.roles or []:
            role = load_role(role_name, repo)
            continuation.enabled(settings, role)  # an implementer listed for it: refused here
            if (step.for_each or step.interfaces) and role.output != "implementation":
                raise ConfigError(
                    f"{source}: step '{name}' needs a role that writes files, but '{role_name}' "
                    "does not implement (its output is not `implementation`).",
                    "Use an implementer role for a `for_each` or `interfaces` step.",
                )
            if step.roles and role.output != "review":
                raise ConfigError(
                    f"{source}: step '{name}' runs roles in parallel, but '{role_name}' is not a "
                    "reviewer (its output is not `review`).",
                    "Only review roles can run in parallel within one step.",
                )
        if step.retry_policy is not None:
            policy(step.retry_policy)
        for gate in ([step.gate] if step.gate else step.gates) if gates else []:
            if gate not in settings.gates:
                raise ConfigError(
                    f"{source}: step '{name}' runs gate '{gate}', but no command is configured "
                    "for it.",
                    f'Add `gates: {{{gate}: "<command>"}}` to .supervisor/config.yaml (`supervisor '
                    "init` proposes the commands it detects), or run `start-task --no-gate`.",
                )
