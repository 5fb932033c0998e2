"""Workflow templates: named workflows that extend one another, chosen and adjusted per project.

A template (`config/workflow_templates/<name>.yaml`, or the project's
`.supervisor/workflow_templates/`) may `extends` another; its `steps` merge field by field over
the parent's. A project picks one in `.supervisor/config.yaml` and adjusts it:

    workflow:
      template: enterprise
      overrides: {implement: {max_retries: 5}}     # fields of existing steps
      add: {lint: {gate: lint, position: after test, on_fail: implement}}
      disable: [security_review]                   # its predecessors skip to its `next`

The result is validated before anything runs: every name resolves, every step is reachable, and
no loop lacks a retry bound.
"""

from __future__ import annotations

import graphlib
from typing import TYPE_CHECKING, Any

from supervisor.core import trustmap
from supervisor.core.config import (
    TemplateChoice,
    WorkflowDef,
    deep_merge,
    read_yaml,
)
from supervisor.core.errors import ConfigError
from supervisor.core.resources import CONFIG_DIR

if TYPE_CHECKING:
    from pathlib import Path


def template_dirs(repo: Path | None) -> list[Path]:
    dirs = [CONFIG_DIR / "workflow_templates"]
    if repo is not None:
        dirs.insert(0, trustmap.repo_path(repo, trustmap.WORKFLOW_TEMPLATES, trustmap.DATA))
    return dirs


def template_path(name: str, repo: Path | None) -> Path:
    for directory in template_dirs(repo):
        path = directory / f"{name}.yaml"
        if path.is_file():
            return path
    known = sorted({p.stem for d in template_dirs(repo) if d.is_dir() for p in d.glob("*.yaml")})
    raise ConfigError(
        f"Unknown workflow template '{name}'.",
        f"Use one of: {', '.join(known)} (or add .supervisor/workflow_templates/{name}.yaml).",
    )


def load_template(name: str, repo: Path | None) -> dict[str, Any]:
    """The template's merged {initial_step, steps}, following `extends`."""
    chain: list[str] = []
    layers: list[dict[str, Any]] = []
    current: str | None = name
    while current is not None:
        if current in chain:
            raise ConfigError(
                f"Workflow templates extend in a loop: {' → '.join([*chain, current])}.",
                "Remove one of the `extends:` lines.",
            )
        chain.append(current)
        path = template_path(current, repo)
        data = read_yaml(path) or {}
        if not isinstance(data, dict):
            raise ConfigError(f"{path} must hold a mapping.", "See config/workflow_templates/.")
        unknown = set(data) - {"name", "description", "extends", "initial_step", "steps", "depth"}
        if unknown:
            raise ConfigError(
                f"{path} has unknown keys: {', '.join(sorted(unknown))}.",
                "A template has name, description, extends, initial_step, steps and depth.",
            )
        layers.append(data)
        current = data.get("extends")
    merged: dict[str, Any] = {"steps": {}}
    for data in reversed(layers):
        if "initial_step" in data:
            merged["initial_step"] = data["initial_step"]
        if "depth" in data:  # the nearest template's setting wins
            merged["depth"] = data["depth"]
        for step, fields in (data.get("steps") or {}).items():
            if fields is None:  # a child removes a parent's step
                merged["steps"].pop(step, None)
            else:
                merged["steps"][step] = deep_merge(merged["steps"].get(step, {}), fields)
    return merged


def build(choice: TemplateChoice, repo: Path | None) -> dict[str, Any]:
    data = load_template(choice.template, repo)
    data.setdefault("initial_step", next(iter(data["steps"]), ""))
    steps: dict[str, dict[str, Any]] = data["steps"]
    source = f"workflow template '{choice.template}' with the project's changes"
    for name, fields in choice.overrides.items():
        if name not in steps:
            raise ConfigError(
                f"{source}: `overrides` names step '{name}', which the template does not have.",
                f"Steps: {', '.join(steps)}.",
            )
        steps[name] = deep_merge(steps[name], fields)
    for name, fields in choice.add.items():
        fields = dict(fields)
        position = str(fields.pop("position", ""))
        if not position.startswith("after ") or position[6:].strip() not in steps:
            raise ConfigError(
                f"{source}: added step '{name}' needs `position: after <step>` naming an "
                f"existing step (got {position!r}).",
                f"Steps: {', '.join(steps)}.",
            )
        anchor = position[6:].strip()
        fields.setdefault("next", steps[anchor].get("next"))
        steps[anchor]["next"] = name
        steps[name] = fields
    for name in choice.disable:
        if name not in steps:
            raise ConfigError(
                f"{source}: `disable` names unknown step '{name}'.", f"Steps: {', '.join(steps)}."
            )
        following = steps[name].get("next")
        for other in steps.values():
            for edge in ("next", "on_fail", "on_reject"):
                if other.get(edge) == name:
                    other[edge] = following if edge == "next" else None
        if data.get("initial_step") == name:
            data["initial_step"] = following
        del steps[name]
    return data


def check_graph(definition: WorkflowDef, source: str) -> None:
    """Every step reachable from the start; no loop that could run forever. (The standard
    library's graphlib, not networkx: every start-task and submission checks a workflow, and
    networkx costs more to import than all the rest of the check.)"""
    edges = {
        name: [t for t in (step.next, step.on_fail, step.on_reject) if t is not None]
        for name, step in definition.steps.items()
    }
    reachable, todo = {definition.initial_step}, [definition.initial_step]
    while todo:
        for target in edges.get(todo.pop(), []):
            if target not in reachable:
                reachable.add(target)
                todo.append(target)
    unreachable = sorted(set(definition.steps) - reachable)
    if unreachable:
        raise ConfigError(
            f"{source}: step(s) {', '.join(unreachable)} can never run (nothing leads to them).",
            "Point a `next`, `on_fail` or `on_reject` at them, or remove them.",
        )
    forward = {name: [step.next] if step.next else [] for name, step in definition.steps.items()}
    try:
        graphlib.TopologicalSorter(forward).prepare()
    except graphlib.CycleError as e:
        cycle = list(reversed(e.args[1]))  # graphlib lists it against the edges' direction
        raise ConfigError(
            f"{source}: the steps loop through `next` with no retry bound: {' → '.join(cycle)}.",
            "Go back with `on_fail`/`on_reject` (bounded by max_retries) instead of `next`.",
        ) from None
    if not any(step.next is None for step in definition.steps.values()):
        raise ConfigError(
            f"{source}: no step ends the workflow (every step has a `next`).",
            "End it with a step without `next`, e.g. `commit: {action: commit}`.",
        )
