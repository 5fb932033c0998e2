"""`supervisor metrics --suggest`: configuration changes the recorded runs argue for.

The plan's `suggest_role_improvements`: roles that retry a lot, roles whose context budget is
often too small (the packer pruned files to fit), and CLIs that often fail a kind of work. Each
suggestion carries the figures behind it, so a person can judge it rather than trust it; nothing
here changes any configuration.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict
from sqlalchemy import select

from supervisor.routing import history
from supervisor.state import schema as t

if TYPE_CHECKING:
    from supervisor.state.store import Store

HIGH_RETRIES = 2.0
"""Extra runs per task above which a role is said to retry a lot (the plan's threshold)."""
OFTEN_PRUNED = 0.5
"""Share of a role's packs that had to prune files to fit its budget."""
LOW_SUCCESS = 0.5
"""First-time-right rate below which a CLI is said to fail a task type."""
MIN_RUNS = 3
"""Fewer runs than this say nothing either way."""


class Suggestion(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: str  # high_retries | context_pruned | cli_fails_task_type
    subject: str
    issue: str
    recommendation: str
    figures: dict[str, Any]


def suggestions(store: Store, since: datetime | None) -> list[Suggestion]:
    runs = history.accepted_runs(store, since)
    return [*high_retries(runs), *context_pruned(_packs(store, since)), *failing_clis(runs)]


def high_retries(runs: list[dict[str, Any]]) -> list[Suggestion]:
    """Roles whose tasks need more than HIGH_RETRIES extra runs on average."""
    per_task: dict[str, dict[Any, int]] = defaultdict(lambda: defaultdict(int))
    for run in runs:
        per_task[run["role"]][(run["workflow_id"], history.step_of(run["step"]))] += 1
    out = []
    for role, tasks in sorted(per_task.items()):
        runs_n = sum(tasks.values())
        rate = (runs_n - len(tasks)) / len(tasks)
        if runs_n >= MIN_RUNS and rate > HIGH_RETRIES:
            out.append(
                Suggestion(
                    kind="high_retries",
                    subject=role,
                    issue=f"high retry rate: {rate:.1f} retries per task (> {HIGH_RETRIES:g})",
                    recommendation="Consider raising the role's context budget, simplifying its "
                    "prompt, or splitting the task into smaller components.",
                    figures={"tasks": len(tasks), "runs": runs_n, "retries_per_task": rate},
                )
            )
    return out


def context_pruned(packs: list[tuple[str, dict[str, Any]]]) -> list[Suggestion]:
    """Roles whose packed context had to drop files to fit in at least OFTEN_PRUNED of runs."""
    by_role: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for role, payload in packs:
        by_role[role].append(payload)
    out = []
    for role, items in sorted(by_role.items()):
        pruned = [p for p in items if p.get("pruned")]
        share = len(pruned) / len(items)
        if len(items) < MIN_RUNS or share < OFTEN_PRUNED:
            continue
        dropped = sum(int(i.get("tokens") or 0) for p in pruned for i in p["pruned"])
        budget = max(int(p.get("budget") or 0) for p in items)
        out.append(
            Suggestion(
                kind="context_pruned",
                subject=role,
                issue=f"context budget often too small: {share:.0%} of {len(items)} packs pruned",
                recommendation=f"Raise `context: {{token_budget: ...}}` for {role} above "
                f"{budget} tokens, or narrow its context strategy.",
                figures={
                    "packs": len(items),
                    "pruned_share": round(share, 3),
                    "avg_tokens_pruned": round(dropped / len(pruned)),
                    "token_budget": budget,
                },
            )
        )
    return out


def failing_clis(runs: list[dict[str, Any]]) -> list[Suggestion]:
    """A CLI whose work of one task type is accepted the first time in under LOW_SUCCESS of
    runs, with the best CLI for that type beside it."""
    table: dict[str, dict[str, list[bool]]] = defaultdict(lambda: defaultdict(list))
    for run in runs:
        table[run["task_type"] or "-"][run["cli"]].append(bool(run["accepted"]))
    out = []
    for task_type, by_cli in sorted(table.items()):
        rates = {c: sum(v) / len(v) for c, v in by_cli.items() if len(v) >= MIN_RUNS}
        best = max(rates, key=lambda c: rates[c], default=None)
        for cli, rate in sorted(rates.items()):
            if rate >= LOW_SUCCESS:
                continue
            better = (
                f" {best} succeeds in {rates[best]:.0%} of {task_type} runs: consider "
                f"`cli: {best}` for those roles, or let adaptive assignment move them."
                if best is not None and best != cli and rates[best] > rate
                else " Check its model and prompts for this kind of work."
            )
            out.append(
                Suggestion(
                    kind="cli_fails_task_type",
                    subject=cli,
                    issue=f"{cli} fails {task_type}: {rate:.0%} accepted the first time",
                    recommendation=better.strip(),
                    figures={
                        "task_type": task_type,
                        "runs": len(by_cli[cli]),
                        "success_rate": round(rate, 3),
                        "best": best,
                        "best_success_rate": round(rates[best], 3) if best else None,
                    },
                )
            )
    return out


def _packs(store: Store, since: datetime | None) -> list[tuple[str, dict[str, Any]]]:
    ev = t.events
    query = select(ev.c.role, ev.c.payload).where(ev.c.type == "context_packed")
    if since is not None:
        query = query.where(ev.c.timestamp >= since)
    with store.engine.connect() as conn:
        return [(role or "-", payload or {}) for role, payload in conn.execute(query).all()]
