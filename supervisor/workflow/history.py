"""What the task branch may receive, and the records that decide it.

The branch only ever gets commits the supervisor writes itself: one per `commit` action, the
candidate's tree on top of the branch tip (`git commit-tree`), so nothing a worker committed along
the way (a first attempt that failed its gate, a component commit, a merge) is reachable from it.
Those attempts stay inspectable under `refs/supervisor/wf<id>/attempts/...`.

Gate passes are recorded by *tree hash*: a tree that passed `test` passed it whatever commit holds
it, and the commit action refuses a tree that has not passed every gate the workflow defines.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from supervisor.workspace import IDENTITY, _git

if TYPE_CHECKING:
    from pathlib import Path

    from supervisor.config import WorkflowDef


def attempt_ref(wf_id: int, step: str, step_id: int) -> str:
    """Where one implementation attempt is kept for audit (`implement/calc/step7`)."""
    safe = "/".join(re.sub(r"[^A-Za-z0-9._-]+", "-", part) or "x" for part in step.split("/"))
    return f"refs/supervisor/wf{wf_id}/attempts/{safe}/step{step_id}"


def record_gate_pass(ctx: dict[str, Any], gate: str, tree: str) -> dict[str, list[str]]:
    """The workflow's gate record with `gate` added for `tree` (a new dict, for an Outcome)."""
    passed = {t: list(g) for t, g in ctx.get("gates_passed", {}).items()}
    names = passed.setdefault(tree, [])
    if gate not in names:
        names.append(gate)
    return passed


def record_review(ctx: dict[str, Any], tree: str, roles: list[str]) -> dict[str, list[str]]:
    """The workflow's review record with `roles` approving `tree`."""
    reviewed = {t: list(r) for t, r in ctx.get("reviewed", {}).items()}
    names = reviewed.setdefault(tree, [])
    names += [r for r in roles if r not in names]
    return reviewed


def required_gates(definition: WorkflowDef) -> list[str]:
    """Every gate a `gate:` step of the workflow runs: the commit needs each on its exact tree."""
    found: list[str] = []
    for step in definition.steps.values():
        if step.gate and step.gate not in found:
            found.append(step.gate)
    return found


def missing_gates(ctx: dict[str, Any], definition: WorkflowDef, tree: str) -> list[str]:
    passed = set(ctx.get("gates_passed", {}).get(tree, []))
    return [g for g in required_gates(definition) if g not in passed]


def commit_message(description: str, wf_id: int, ctx: dict[str, Any], tree: str) -> str:
    """The plan items, the gates passed on this tree and the reviewers who approved it."""
    lines = [description.strip().splitlines()[0][:72] if description.strip() else "AI task", ""]
    items = [
        f"- {c.get('id')}: {c.get('description', '')}".rstrip(": ")
        for phase in (ctx.get("plan") or {}).get("phases", [])
        for c in phase.get("components", [])
    ]
    if items:
        lines += ["Plan:", *items, ""]
    gates = ctx.get("gates_passed", {}).get(tree, [])
    lines.append(f"Gates passed: {', '.join(gates) if gates else 'none defined'}")
    reviewers = ctx.get("reviewed", {}).get(tree, [])
    lines.append(f"Reviewed by: {', '.join(reviewers) if reviewers else 'no reviewer'}")
    lines.append(f"Supervisor-Workflow: {wf_id}")
    return "\n".join(lines) + "\n"


def commit_tree(repo: Path, tree: str, parent: str, message: str) -> str:
    """A commit of `tree` whose only parent is `parent`; no working tree, no hooks."""
    return _git(repo, *IDENTITY, "commit-tree", tree, "-p", parent, "-m", message).stdout.strip()


def refs_under(repo: Path, prefix: str) -> list[str]:
    out = _git(repo, "for-each-ref", "--format=%(refname)", prefix).stdout
    return [line for line in out.splitlines() if line]
