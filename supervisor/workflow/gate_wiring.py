"""Every gate `supervisor init` writes runs in the project's workflow, or init says where it would.

Why: detection finds `lint` and `types` commands, but `_base` and `mvp` run only `test`, and no
shipped template runs `types`: init used to write (and every task to pin) gates that no step ever
ran. So init reads the chosen template's steps; a detected gate it does not run is added to the
workflow after its last gate step (`workflow: {add: …}` in the project config, the template
mechanism users already have), failing back to the same step as that gate. A project with its own
`.supervisor/workflow.yaml` is not changed: init names the gates it does not run and the shipped
templates that would.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from supervisor.core.errors import ConfigError

if TYPE_CHECKING:
    from pathlib import Path

    from supervisor.core.config import TemplateChoice

SHIPPED = ["_base", "mvp", "open_source", "enterprise", "security_critical"]


@dataclass
class GateWiring:
    workflow: str
    """What runs the gates: `template '_base'`, or the project's workflow.yaml."""
    run: list[str] = field(default_factory=list)
    """Detected gates the workflow runs as it is."""
    added: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Steps init adds (`workflow.add`), by step name."""
    not_run: dict[str, list[str]] = field(default_factory=dict)
    """Gates the workflow does not run (and cannot be given): the shipped templates that would."""
    note: str = ""

    def where(self, gate: str) -> str:
        """One phrase for the report: where this gate runs."""
        if gate in self.run:
            return f"runs in {self.workflow}"
        if gate in self.added:
            anchor = self.added[gate]["position"].removeprefix("after ")
            return f"added to {self.workflow} after its {anchor} step (workflow.add)"
        others = self.not_run.get(gate, [])
        return f"not run by {self.workflow}" + (
            f"; the {', '.join(others)} template(s) run it" if others else ""
        )


def gates_run(steps: dict[str, Any]) -> list[str]:
    names: list[str] = []
    for step in steps.values():
        for gate in [step["gate"]] if step.get("gate") else step.get("gates") or []:
            if gate not in names:
                names.append(gate)
    return names


def templates_running(gate: str) -> list[str]:
    from supervisor.workflow.templates import load_template

    return [name for name in SHIPPED if gate in gates_run(load_template(name, None)["steps"])]


def wire(repo: Path, choice: TemplateChoice, gates: list[str], custom_workflow: bool) -> GateWiring:
    """Where each of `gates` runs in the workflow `choice` gives (steps init added on an earlier
    run are left out of `choice` first, so running init again gives the same answer)."""
    from supervisor.workflow import templates

    if custom_workflow:
        return GateWiring(
            "the project's workflow.yaml",
            not_run={g: templates_running(g) for g in gates},
            note="init does not change a workflow.yaml; add a gate step for each gate yourself",
        )
    ours = {name for name, step in choice.add.items() if step.get("gate") == name}
    choice = choice.model_copy(
        update={"add": {n: s for n, s in choice.add.items() if n not in ours}}
    )
    where = f"the {choice.template} template"
    try:
        data = templates.build(choice, repo)
    except ConfigError as e:
        return GateWiring(where, not_run={g: templates_running(g) for g in gates}, note=e.message)
    steps: dict[str, Any] = data["steps"]
    wiring = GateWiring(where, run=[g for g in gates if g in gates_run(steps)])
    anchor = _last_gate_step(steps, data.get("initial_step") or next(iter(steps), ""))
    for gate in gates:
        if gate in wiring.run:
            continue
        if anchor is None or gate in steps:
            wiring.not_run[gate] = templates_running(gate)
            continue
        fields: dict[str, Any] = {"gate": gate, "position": f"after {anchor}"}
        if steps[anchor].get("on_fail"):
            fields["on_fail"] = steps[anchor]["on_fail"]
        wiring.added[gate] = fields
        steps[gate] = {"gate": gate, "next": steps[anchor].get("next")}
        anchor = gate
    return wiring


def _last_gate_step(steps: dict[str, Any], start: str) -> str | None:
    """The last gate step on the `next` path from the start: after it the code no longer
    changes, so a gate placed there sees the tree that gets committed."""
    last, seen, current = None, set(), start
    while current and current in steps and current not in seen:
        seen.add(current)
        if steps[current].get("gate"):
            last = current
        current = steps[current].get("next")
    return last
