"""Gate preflight for `start-task`: every gate the workflow runs has a command, or none runs.

A gate with no command used to fall back to a package default (`make test`) that most projects
do not have; it then failed on every attempt and its "No rule to make target" went to the
implementer as feedback. Now a missing command stops the task before anything is created, with the
command detection would propose; `--no-gate` runs the workflow without its gates, and the task's
first event records which ones were left out, so the branch never looks gated when it is not.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from supervisor.core.errors import ConfigError

if TYPE_CHECKING:
    from pathlib import Path

    from supervisor.core.config import Settings, WorkflowDef


def gates_used(definition: WorkflowDef) -> list[str]:
    """The gate names the workflow's steps run, in step order."""
    names: list[str] = []
    for step in definition.steps.values():
        for gate in [step.gate] if step.gate else step.gates:
            if gate not in names:
                names.append(gate)
    return names


def check_gates(definition: WorkflowDef, settings: Settings, repo: Path) -> None:
    """Raise a ConfigError naming each gate without a command and how to set it."""
    missing = [g for g in gates_used(definition) if g not in settings.gates]
    if not missing:
        return
    from supervisor.project.detect import detect

    detected = detect(repo).gates
    proposals = {g: detected[g] for g in missing if g in detected}
    example = ", ".join(f"{g}: '{proposals.get(g, '<command>')}'" for g in missing)
    found = (
        "; detection finds " + ", ".join(f"{g} = `{c}`" for g, c in proposals.items())
        if proposals
        else "; detection finds no command for it in this repository"
    )
    raise ConfigError(
        f"No command is configured for the {', '.join(repr(g) for g in missing)} gate(s) the "
        f"workflow runs{found}. Nothing was created.",
        f"Set it in .supervisor/config.yaml (gates: {{{example}}}), or run `supervisor init` to "
        "write the detected gates, or pass `--no-gate` to run this task without gates (recorded "
        "in its events).",
    )


def without_gates(definition: WorkflowDef) -> tuple[WorkflowDef, list[str]]:
    """The workflow with its gate steps removed (what pointed at one now points past it) and its
    components' gates cleared; and the gate names left out."""
    dropped = gates_used(definition)
    gate_steps = {name: step for name, step in definition.steps.items() if step.kind == "gate"}

    def past(target: str | None) -> str | None:
        seen: set[str] = set()
        while target in gate_steps and target not in seen:
            seen.add(target)
            target = gate_steps[target].next
        return target

    steps = {}
    for name, step in definition.steps.items():
        if name in gate_steps:
            continue
        steps[name] = step.model_copy(
            update={
                "next": past(step.next),
                "on_fail": past(step.on_fail),
                "on_reject": past(step.on_reject),
                "gates": [],
            }
        )
    initial = past(definition.initial_step)
    if initial is None:
        raise ConfigError(
            "The workflow has nothing but gates, so `--no-gate` leaves nothing to run.",
            "Configure the gate commands instead of passing --no-gate.",
        )
    return definition.model_copy(update={"steps": steps, "initial_step": initial}), dropped
