"""What `supervisor status <id>` says about one workflow, as data: drawn with rich for a terminal
(supervisor/views/render.py) and as plain lines for a pipe (supervisor/cli/status_plain.py).

Imports neither rich nor SQLAlchemy, so that the plain form starts as fast as the interpreter.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from supervisor.core.dag import WorkGraph

if TYPE_CHECKING:
    from collections.abc import Mapping

    from supervisor.state.reader import StateReader
    from supervisor.state.records import Approval, Event, Workflow
    from supervisor.state.store import Store

STATUS_STYLE = {
    "completed": "green",
    "running": "cyan",
    "awaiting_approval": "yellow",
    "failed": "red",
    "succeeded": "green",
    "rejected": "yellow",
    "interrupted": "magenta",
    "rate_limited": "yellow",
    "complete": "green",
    "in_progress": "cyan",
    "pending": "dim",
}
STATUS = "status"
"""The style of a row whose value is a status: coloured by STATUS_STYLE."""


@dataclass(frozen=True)
class Row:
    label: str
    value: str
    style: str = ""


@dataclass(frozen=True)
class StepRow:
    id: int
    name: str
    attempt: int
    role: str
    status: str
    started: str
    took: str


@dataclass(frozen=True)
class ProjectGated:
    """One project's latest run of a gate step in a monorepo (supervisor/workflow/steps/
    project_gate.py): which project, why it was gated, and whether it passed."""

    step: str
    gate: str
    project: str
    reason: str
    passed: bool | None
    """None: the project has gates of its own, and not this one."""
    at: float


@dataclass(frozen=True)
class Detail:
    workflow: Workflow
    rows: list[Row]
    steps: list[StepRow]
    work: WorkGraph | None
    projects_gated: list[ProjectGated] = field(default_factory=list)
    """Oldest first."""

    def verdicts(self) -> dict[str, str]:
        return verdicts(self.projects_gated)


def verdicts(gated: list[ProjectGated]) -> dict[str, str]:
    """Project -> its latest gating's verdict, for the tree: `gates passed` or the failed gate."""
    found: dict[str, str] = {}
    for g in gated:  # oldest first: the latest wins
        if g.passed is not None:
            found[g.project] = "gates passed" if g.passed else f"gate {g.gate} failed"
    return found


def projects_gated(context: Mapping[str, Any]) -> list[ProjectGated]:
    """Every gate step's latest per-project runs, as the workflow's context keeps them: the
    task's own gate steps, and each component's gates."""
    stored: list[Mapping[str, Any]] = [context.get("projects_gated") or {}]
    stored += [e.get("projects_gated") or {} for e in (context.get("components") or {}).values()]
    found = [
        ProjectGated(
            step=step,
            gate=str(run.get("gate", "")),
            project=str(row.get("project", "")),
            reason=str(row.get("reason", "")),
            passed=row.get("passed"),
            at=float(run.get("at") or 0.0),
        )
        for steps in stored
        for step, run in steps.items()
        for row in run.get("projects") or []
    ]
    return sorted(found, key=lambda g: g.at)


def _clock(timestamp: float | str) -> str:
    from datetime import datetime

    return f"{datetime.fromtimestamp(float(timestamp)):%H:%M:%S}"


def workflow_detail(
    store: Store | StateReader,
    wf_id: int,
    pending: list[str] | None = None,
    supervisors: Mapping[int, int | None] | None = None,
    runner: str | None = None,
) -> Detail:
    """One workflow; `pending` says what a waiting approval is about
    (supervisor.policy.approvals); `supervisors`, the pid running each running task (None: no
    supervisor runs it); `runner`, who runs it across hosts (supervisor/state/runner_view.py),
    which says more than a local pid."""
    wf = store.workflow(wf_id)
    totals = store.usage_totals(wf_id)
    orphan = supervisors is not None and wf.id in supervisors and supervisors[wf.id] is None
    rows = _what_rows(wf, runner, orphan)
    rows += _pool_rows(store.last_event(wf_id, "step_worker"))
    approval = store.latest_approval(wf_id)
    rows += _where_rows(wf, approval)
    rows += _spent_rows(wf, totals)
    gated = projects_gated(wf.context)
    rows += _trouble_rows(wf, gated)
    rows += _held_rows(wf)
    rows += _asked_rows(wf, approval, pending)
    steps = [_step_row(row) for row in store.steps(wf_id)]
    return Detail(wf, rows, steps, WorkGraph.of_workflow(wf.context), gated)


def _what_rows(wf: Workflow, runner: str | None, orphan: bool) -> list[Row]:
    """What the task is and how it stands: a runner elsewhere says more than the stored status,
    and a running task no supervisor runs is shown as such, not as running."""
    from supervisor.core import depth_view
    from supervisor.state.status_label import shown_status

    rows = [
        Row("workflow", str(wf.id)),
        Row("task", wf.description),
        Row("status", runner or shown_status(wf, supervised=not orphan, degraded=False), STATUS),
    ]
    depth = depth_view.label(wf.context)
    if depth:
        rows.append(Row("depth", depth))
    if wf.context.get("degraded"):
        from supervisor.core.degradation import label

        rows.append(Row("degraded", label(wf.context).removeprefix("degraded: "), "yellow"))
    return rows


def _pool_rows(ran: Event | None) -> list[Row]:
    """Team mode: the pool and worker the last step (or component) ran on (its `step_worker`
    event, supervisor/temporal/routes.py; the event log has one per run)."""
    if ran is None:
        return []
    said = ran.payload
    what = f"step {said.get('step', '?')}" + (
        f", component {said['component']}" if said.get("component") else ""
    )
    pool, worker = said.get("pool", "any"), said.get("worker", "?")
    return [Row("ran on", f"pool {pool}, worker {worker} ({what})")]


def _where_rows(wf: Workflow, approval: Approval | None) -> list[Row]:
    """The step it stands at and its branch; while an approval waits, the database already points
    at the next step, so the waiting one is named first."""
    if wf.status == "awaiting_approval":
        waiting = str(wf.context.get("approval_step") or (approval.step if approval else "?"))
        then = wf.current_step or "the end"
        step = Row("current step", f"{waiting} (awaiting approval); then: {then}")
    else:
        step = Row("current step", shown_step(wf))
    base = f"{wf.base_branch or 'detached'} {wf.base_sha[:10]}"
    return [step, Row("branch", f"{wf.task_branch} (from {base})")]


def _spent_rows(wf: Workflow, totals: dict[str, float]) -> list[Row]:
    """Tokens and money so far; the budget only when it has something to say, in yellow once it
    paused the task."""
    from supervisor.policy.budgets import status_line

    usage = (
        f"{totals['input_tokens']} in / {totals['output_tokens']} out tokens, "
        f"${totals['cost_usd']:.4f}"
    )
    rows = [Row("usage", usage)]
    budget = status_line(wf, totals)
    if budget:
        rows.append(Row("budget", budget, "yellow" if "paused" in budget else ""))
    return rows


def _trouble_rows(wf: Workflow, gated: list[ProjectGated]) -> list[Row]:
    """What went wrong or is slowed: the error, the projects' gate verdicts, a rate limit, and the
    CLIs passed over whose reset has not come yet (after it, steps use them again)."""
    rows = []
    if wf.error:
        rows.append(Row("error", wf.error, "red"))
    if gated:
        rows.append(Row("projects gated", _gated_lines(gated)))
    if wf.status == "rate_limited" and wf.context.get("waiting_until"):
        until = _clock(wf.context["waiting_until"])
        rows.append(Row("waiting", f"rate limited until {until}; retries then", "yellow"))
    for cli, gone in (wf.context.get("unavailable") or {}).items():
        until = gone.get("until")
        if until is not None and float(until) <= time.time():
            continue  # its reset has passed: steps use it again
        when = f"until {_clock(until)}" if until else "for now"
        rows.append(Row("failover", f"{cli} passed over {when} ({gone.get('cause')})", "yellow"))
    return rows


def _held_rows(wf: Workflow) -> list[Row]:
    """The components that wait to retry, and those a split took as far as it could, which only
    a person can move on."""
    rows = []
    for cid, entry in (wf.context.get("components") or {}).items():
        if entry.get("status") == "waiting":
            until = entry.get("until")
            when = f"until {_clock(until)}" if until else "to retry"
            reason = entry.get("reason", "")[:120]
            rows.append(Row("waiting", f"component {cid} waits {when}: {reason}", "yellow"))
    for cid, node in ((wf.context.get("decomposition") or {}).get("nodes") or {}).items():
        if node.get("status") == "blocked":  # a split that went as far as it could
            said = "; ".join(node.get("failures") or [])[-600:]
            why = f"component {cid} (depth {node.get('depth')}): {node.get('problem')}. {said}"
            rows.append(Row("needs you", why, "yellow"))
    return rows


def _asked_rows(wf: Workflow, approval: Approval | None, pending: list[str] | None) -> list[Row]:
    """What the task waits for a person to decide, and the commands that decide it."""
    rows = []
    if wf.status == "budget_exceeded":
        rows.append(Row("waiting for", "\n".join(pending or ["a budget extension"]), "yellow"))
    if wf.status == "awaiting_approval" and approval is not None:
        rows.append(Row("waiting for", f"approval of '{approval.step}' ({approval.status})"))
        rows.append(Row("to approve", "\n".join(pending or ["-"])))
        decide = f"supervisor approve {wf.id}  |  supervisor reject {wf.id} --reason '...'"
        rows.append(Row("decide", decide))
        from supervisor.policy.approvals import pending_request

        request = pending_request(wf, approval)
        if request:
            changed = f"changed by '{request['producer']}': {request['diff']}"
            rows.append(Row("dependencies", changed))
    return rows


def _step_row(row: Mapping[str, Any]) -> StepRow:
    started, finished = row["started_at"], row["finished_at"]
    return StepRow(
        id=row["id"],
        name=row["name"],
        attempt=row["attempt"],
        role=row["role"] or "(gate)",
        status=row["status"] or "",
        started=started.strftime("%H:%M:%S"),
        took=f"{(finished - started).total_seconds():.1f}s" if finished is not None else "",
    )


def _gated_lines(gated: list[ProjectGated], shown: int = 8) -> str:
    """The latest gate steps' projects, one line per step: `project passed (why)`."""
    by_step: dict[str, list[ProjectGated]] = {}
    for g in gated:
        by_step.setdefault(g.step, []).append(g)
    lines = [
        f"{step}: "
        + "; ".join(
            f"{g.project} "
            + {True: "passed", False: "FAILED", None: "no such gate"}[g.passed]
            + f" ({g.reason})"
            for g in runs
        )
        for step, runs in list(by_step.items())[-shown:]
    ]
    return "\n".join(lines)


def shown_step(wf: Workflow) -> str:
    """The step the workflow stands at: while it waits for an approval, the step whose result
    waits (the database already points at the next one)."""
    if wf.status == "awaiting_approval" and wf.context.get("approval_step"):
        return f"{wf.context['approval_step']} (awaiting approval)"
    return wf.current_step or "-"
