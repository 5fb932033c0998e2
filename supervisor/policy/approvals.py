"""What a run will stop for, and what a waiting run asks a person to approve.

`--yes` confirms the start, not the workflow's human approvals: a run still stops at each step
with `human_approval: true`. The start preview lists those stops up front, and a waiting run says
what is on the table (the plan's summary, or the candidate's diff stat) so that `approve` is an
informed decision rather than a blind one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from supervisor.core import process
from supervisor.core.errors import SupervisorError
from supervisor.core.plural import counted

if TYPE_CHECKING:
    from pathlib import Path

    from supervisor.core.config import WorkflowDef
    from supervisor.state.store import Approval, Workflow

REQUEST_KEY = "dependency_request"
"""Where a dependency change waiting for approval is kept in the workflow's context
(supervisor/policy/dependency_review.py); read here so that `status` stays light."""

_WHAT = {"plan": "the plan", "implementation": "its changes", "review": "the review and changes"}


def _output_of(step_role: str | None, repo: Path | None) -> str | None:
    if not step_role:
        return None
    from supervisor.context.roles import load_role

    try:
        return load_role(step_role, repo).output
    except SupervisorError:
        return None


def planned(definition: WorkflowDef, repo: Path | None) -> list[str]:
    """One line per approval the workflow will ask for, in step order."""
    lines = []
    for name, step in definition.steps.items():
        if not step.human_approval:
            continue
        if step.gate:
            what = f"the '{step.gate}' gate's result"
        elif step.roles:
            what = "the reviews and changes"
        elif step.action:
            what = f"the '{step.action}'"
        else:
            what = _WHAT.get(_output_of(step.role, repo) or "", "its result")
        lines.append(f"after '{name}' ({what})")
    return lines


def preview_line(definition: WorkflowDef, repo: Path | None) -> str:
    """The approvals the run asks for, and when the approval policy may stop it before its
    commit step besides (it judges the candidate then, so the preview can only say when). A
    policy that stops every candidate is a planned stop: "none planned; ... when: ...; always"
    once said both at once."""
    stops = planned(definition, repo)
    commit, when = _policy_stops(definition, repo)
    policy = ""
    if "always" in when:  # a level with no condition: the other conditions add nothing
        stops.append(
            f"before '{commit}', every time (the approval policy asks a person about every "
            "candidate)"
        )
    elif when:
        policy = (
            f"the approval policy stops before '{commit}' for a person (exit 10, until "
            f"`supervisor approve`) when: {'; '.join(when)}"
        )
    if not stops:
        if policy:
            return "none planned; " + policy
        return "none: the run goes to the end without stopping"
    line = (
        f"{len(stops)}: " + "; ".join(stops) + ". The run stops there until `supervisor approve` "
        "(--yes does not approve them)"
    )
    return f"{line}; {policy}" if policy else line


def _policy_stops(definition: WorkflowDef, repo: Path | None) -> tuple[str, list[str]]:
    """The commit step the approval policy judges the candidate before, and when it stops
    there for a person (`always`: every time); no commit step, no conditions."""
    from supervisor.policy.approval_policy import load, stop_conditions

    commits = [name for name, step in definition.steps.items() if step.action == "commit"]
    if not commits:
        return "", []
    return commits[0], stop_conditions(load(repo))


def pending(wf: Workflow, repo: Path) -> list[str]:
    """What the waiting step asks a person to approve; empty when nothing waits."""
    if wf.status == "budget_exceeded":
        return budget_lines(wf)
    if wf.status != "awaiting_approval":
        return []
    step = str(wf.context.get("approval_step") or wf.current_step or "")
    from supervisor.core.degradation import lines as degraded_lines

    return (
        degraded_lines(wf.context)
        + risk_lines(wf, step)
        + spec_lines(wf, step)
        + _about(wf, repo, step)
    )


DIFF_LINES = 80
"""Lines of the test diff a waiting approval shows (the whole of it is in `status --json`)."""


def spec_lines(wf: Workflow, step: str) -> list[str]:
    """What a waiting approval says about the base's tests: a worker's report that the task
    contradicts them, or a candidate that changed them and fails them as they were."""
    conflict = wf.context.get("spec_conflict") or {}
    if conflict and wf.context.get("approval_step") == step:
        tests = ", ".join(conflict.get("tests") or []) or "(none named)"
        return [
            f"the worker reports that the task contradicts existing tests: {tests}",
            f"  why: {conflict.get('reason', '')}",
            "  approve: the next attempt may change those tests; reject --reason: they stay",
        ]
    spec = wf.context.get("spec_change") or {}
    risk = wf.context.get("risk") or {}
    if spec.get("base_tests") != "failed" or risk.get("step") != step:
        return []
    lines = [
        f"existing tests changed: {', '.join(spec.get('changed') or [])}",
        f"  the base's tests on this code: {spec.get('failing', '')}",
        *(f"  tamper signal: {s}" for s in spec.get("signals") or []),
    ]
    diff = str(spec.get("diff") or "").splitlines()
    if diff:
        more = len(diff) - DIFF_LINES
        lines += ["  the change to the tests:", *(f"    {line}" for line in diff[:DIFF_LINES])]
        lines += (
            [f"    ... {more} more lines (`supervisor status {wf.id} --json`)"] if more > 0 else []
        )
    return lines


def risk_lines(wf: Workflow, step: str) -> list[str]:
    """The approval policy's level and reasons, when the waiting approval is the one it judged."""
    from supervisor.policy.approval_policy import describe

    risk = wf.context.get("risk") or {}
    return describe(risk) if risk.get("step") == step else []


def budget_lines(wf: Workflow) -> list[str]:
    from supervisor.policy.budgets import EXCEEDED, describe_spend

    figures = wf.context.get(EXCEEDED) or {}
    if not figures:
        return []
    what = "the task" if figures["scope"] == "task" else f"step '{figures['step']}'"
    return [
        f"budget: {what} spent {describe_spend(figures['spent'], figures['limit'])}",
        f"  `supervisor approve {wf.id} --extend <dollars>` raises it; then resume",
    ]


def _about(wf: Workflow, repo: Path, step: str) -> list[str]:
    # The stored definition as data: `status` must not load pydantic (tests/test_cli_imports.py).
    step_def = (wf.definition.get("steps") or {}).get(step) or {}
    plan = wf.context.get("plan")
    if plan and _output_of(step_def.get("role"), repo) == "plan":
        return plan_lines(plan)
    return _diff_lines(wf, repo)


def plan_lines(plan: dict[str, object]) -> list[str]:
    """A plan waiting for a person: its status, components and phases, a line each."""
    count = plan.get("estimated_components", "?")
    size = counted(count, "component") if isinstance(count, int) else f"{count} components"
    lines = [f"plan: {plan.get('status', '?')}, {size}"]
    if plan.get("summary"):
        lines.append(f"  {str(plan['summary'])[:300]}")
    for phase in plan.get("phases") or []:  # type: ignore[attr-defined]
        components = phase.get("components") or []
        lines.append(f"  phase {phase.get('id')}: {phase.get('description', '')}"[:160])
        for comp in components:
            files = ", ".join(comp.get("files") or [])
            after = f" (after {', '.join(comp['depends_on'])})" if comp.get("depends_on") else ""
            lines.append(f"    {comp.get('id')}: {files or '-'}{after}"[:160])
    for risk in plan.get("risks") or []:  # type: ignore[attr-defined]
        lines.append(f"  risk: {str(risk)[:150]}")
    return lines


def _diff_lines(wf: Workflow, repo: Path) -> list[str]:
    """The candidate (or the task branch) against the task's base, as `git diff --stat`."""
    head = wf.context.get("candidate") or f"refs/heads/{wf.task_branch}"
    from supervisor.workspace.fetch_back import fetch_task_refs

    fetch_task_refs(wf, repo)  # a candidate a worker host made is on the shared remote only
    try:
        stat = process.run(
            [
                "git", "-c", "core.hooksPath=/dev/null", "-C", str(repo), "diff", "--stat",
                "--no-ext-diff", "--no-textconv", wf.base_sha, str(head), "--",
            ]
        ).stdout  # fmt: skip
    except SupervisorError as e:
        return [f"changes: unavailable ({e.message})"]
    lines = [line.rstrip() for line in stat.splitlines() if line.strip()]
    if not lines:
        return [f"changes: none against {wf.base_sha[:10]}"]
    return [f"changes against {wf.base_sha[:10]}:", *(f"  {line.strip()}" for line in lines)]


def pending_request(wf: Workflow, approval: Approval | None) -> dict[str, Any] | None:
    """The dependency change a waiting workflow's pending approval is about, if it is one."""
    request = wf.context.get(REQUEST_KEY)
    if (
        wf.status == "awaiting_approval"
        and request
        and approval is not None
        and approval.status == "pending"
        and approval.step == request.get("producer")
        and wf.current_step == request.get("step")
    ):
        return request  # type: ignore[no-any-return]
    return None
