"""Budgets: a task stops spending when it has spent what it was given, and waits for a person.

Limits (config `budgets:`, per task and per step, in dollars and in tokens) are pinned into the
workflow's context when its first step is about to run, like its gates: a later config edit does
not move a running task's limits, `supervisor approve <id> --extend 2.00` does. Spend is what the
CLIs reported (events' tokens and cost); where a CLI reports tokens but no cost, the configured
price table prices them (`priced`). Before every step the engine calls `check`, which decides and
writes nothing: past a limit, the engine stores the workflow as waiting in `budget_exceeded` with
the figures, and `resume` goes on only once the limit is raised. Within a step, a CLI with its own
budget flag (claude `--max-budget-usd`) gets what is left, so one run cannot go far past it, and a
component fan-out asks `reached` before each new component: past a limit it dispatches none, lets
the running ones finish and ends as `HELD` (the engine then pauses the task before the same step,
which a resume after `--extend` continues with the components not yet run). Under the Temporal
runner the components run as activities and come back to their step, which runs again with
them: that run is the same step going on, not a new one, so `check` is not asked before it (the
fan-out asks `reached` once their results are applied, as locally).

This module stays light (no pydantic, SQLAlchemy or YAML at import): `approve` and `status` use
it on the state database directly.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from supervisor.core.errors import ApprovalRequired, StateError

if TYPE_CHECKING:
    from supervisor.core.config import Settings
    from supervisor.state.store import EventSpec, Store, Workflow

KEY = "budget"
EXCEEDED = "budget_exceeded"
KINDS = ("usd", "tokens")
HELD = "budget"
"""A step's result when it stopped dispatching work at a budget (see workflow/decide.py)."""


class BudgetExceeded(ApprovalRequired):
    """A task or step spent its budget; it waits for `approve --extend`."""


def pin(settings: Settings) -> dict[str, Any]:
    """The configured limits as the context keeps them: {"task": {...}, "step": {...}}."""
    budgets = settings.budgets
    return {
        "task": {"usd": budgets.task.usd, "tokens": budgets.task.tokens},
        "step": {"usd": budgets.step.usd, "tokens": budgets.step.tokens},
        "extra": {},
    }


def limits(budget: dict[str, Any], scope: str) -> dict[str, float | None]:
    """The limits of `task` or `step:<name>` including every extension granted to it."""
    base = budget.get("task" if scope == "task" else "step") or {}
    extra = (budget.get("extra") or {}).get(scope) or {}
    found: dict[str, float | None] = {}
    for kind in KINDS:
        limit = base.get(kind)
        found[kind] = None if limit is None else float(limit) + float(extra.get(kind) or 0)
    return found


def over(spent: dict[str, float], limit: dict[str, float | None]) -> list[str]:
    """Which kinds of `limit` the spend has reached."""
    return [k for k in KINDS if limit.get(k) is not None and spent[k] >= float(limit[k] or 0)]


def spent_of(totals: dict[str, float]) -> dict[str, float]:
    return {
        "usd": round(float(totals.get("cost_usd") or 0), 6),
        "tokens": float(
            int(totals.get("input_tokens") or 0) + int(totals.get("output_tokens") or 0)
        ),
    }


@dataclass
class Verdict:
    """What `check` found before a step: the context to store (limits pinned on first sight),
    the events to record with it, and the figures of a budget the spend reached. The engine
    commits it (it alone writes workflow progress), then raises `exceeded_error` if exceeded."""

    context: dict[str, Any]
    events: list[EventSpec] = field(default_factory=list)
    exceeded: dict[str, Any] | None = None


def check(settings: Settings, store: Store, wf: Workflow, name: str) -> Verdict:
    """Before step `name` runs: pin the limits on first sight, then say whether the task or
    this step has spent its budget (the figures go into the context under `budget_exceeded`)."""
    from supervisor.state.store import EventSpec

    ctx = dict(wf.context)
    verdict = Verdict(ctx)
    if KEY not in ctx:
        ctx[KEY] = pin(settings)
        verdict.events.append(EventSpec("budget_pinned", payload=ctx[KEY]))
    figures = reached(ctx[KEY], store, wf.id, name)
    if figures is not None:
        ctx[EXCEEDED] = figures
        verdict.events.append(
            EventSpec(EXCEEDED, step=figures["step"], status=figures["scope"], payload=figures)
        )
        verdict.exceeded = figures
    return verdict


def reached(budget: dict[str, Any], store: Store, wf_id: int, name: str) -> dict[str, Any] | None:
    """The figures of the first budget (the task's, then step `name`'s) the recorded spend has
    reached, or None. Also asked while a step runs: a component fan-out dispatches no new
    component past it (its running ones finish, their work being paid for)."""
    step = name.split("/")[0]
    for scope in ("task", f"step:{step}"):
        limit = limits(budget, scope)
        if all(v is None for v in limit.values()):
            continue  # no limit: no need to add up the spend
        totals = (
            store.usage_totals(wf_id) if scope == "task" else store.usage_totals(wf_id, step=step)
        )
        spent = spent_of(totals)
        crossed = over(spent, limit)
        if crossed:
            return {"scope": scope, "step": step, "spent": spent, "limit": limit, "over": crossed}
    return None


def exceeded_error(wf_id: int, figures: dict[str, Any]) -> BudgetExceeded:
    what = "the task" if figures["scope"] == "task" else f"step '{figures['step']}'"
    spend = describe_spend(figures["spent"], figures["limit"])
    return BudgetExceeded(
        f"Workflow {wf_id} paused: {what} spent {spend}"
        f" (budget reached: {', '.join(figures['over'])}).",
        f"Raise it with `supervisor approve {wf_id} --extend <dollars>` (or --extend-tokens N), "
        f"then `supervisor resume {wf_id}`.",
    )


def dollars(amount: float) -> str:
    """An amount with the digits that matter: cents from a cent up, two significant digits
    below ($0.002 is not "$0.00", $0.00314 is "$0.0031"), at most six decimals."""
    import math

    if amount == 0 or abs(amount) >= 0.01:
        return f"${amount:.2f}"
    places = min(6, 1 - math.floor(math.log10(abs(amount))))
    shown = f"{amount:.{places}f}".rstrip("0")
    return f"${shown}" if len(shown.split(".")[1]) >= 2 else f"${amount:.2f}"


def describe_spend(spent: dict[str, float], limit: dict[str, float | None]) -> str:
    cap = limit.get("usd")
    usd = dollars(spent["usd"]) + (f" of {dollars(cap)}" if cap else "")
    tokens = f"{int(spent['tokens'])}" + (
        f" of {int(limit['tokens'] or 0)}" if limit.get("tokens") else ""
    )
    return f"{usd}, {tokens} tokens"


def resume_check(wf: Workflow) -> dict[str, Any]:
    """Before `resume` continues a paused workflow: the context to run on (the pause cleared);
    raises BudgetExceeded when no extension lifted it."""
    ctx = dict(wf.context)
    figures = ctx.get(EXCEEDED) or {}
    if figures:
        limit = limits(ctx.get(KEY) or {}, figures["scope"])
        crossed = over(figures["spent"], limit)
        if crossed:
            raise exceeded_error(wf.id, {**figures, "limit": limit, "over": crossed})
    ctx.pop(EXCEEDED, None)
    return ctx


def extend(wf: Workflow, usd: float | None, tokens: int | None) -> dict[str, Any]:
    """The context with the paused scope's budget raised; refuses a workflow that is not
    paused on its budget, and an extension that is not positive."""
    if wf.status != EXCEEDED:
        raise StateError(
            f"Workflow {wf.id} is not paused on its budget (status: {wf.status}); --extend "
            "raises the budget of a paused workflow.",
            f"Run `supervisor status {wf.id}` to see where it stands.",
        )
    if not usd and not tokens:
        raise StateError(
            f"Workflow {wf.id} waits on its budget: approving it needs --extend <dollars> or "
            "--extend-tokens <N>.",
            f"Run `supervisor approve {wf.id} --extend 2.00`, for instance.",
        )
    if (usd is not None and usd <= 0) or (tokens is not None and tokens <= 0):
        raise StateError("An extension must be positive.", "Pass --extend 2.00, say.")
    ctx = dict(wf.context)
    budget = {**(ctx.get(KEY) or {})}
    scope = (ctx.get(EXCEEDED) or {}).get("scope", "task")
    extra = {k: dict(v) for k, v in (budget.get("extra") or {}).items()}
    entry = extra.setdefault(scope, {})
    entry["usd"] = float(entry.get("usd") or 0) + float(usd or 0)
    entry["tokens"] = int(entry.get("tokens") or 0) + int(tokens or 0)
    budget["extra"] = extra
    ctx[KEY] = budget
    return ctx


def parse_extension(text: str) -> tuple[float | None, int | None]:
    """What a person typed to raise a budget (the TUI's `x`): "2.50" or "$2.50" dollars, or
    "50000 tokens" / "50k tokens"; (dollars, tokens)."""
    import re

    found = re.fullmatch(r"\s*\$?\s*(\d+(?:\.\d+)?)\s*(k?)\s*(tokens?)?\s*", text.lower())
    if found is None or (found[2] and not found[3]):
        raise StateError(
            f"{text.strip()[:40]!r} is not a budget extension.",
            "Type dollars (2.50) or tokens (50000 tokens, 50k tokens).",
        )
    amount = float(found[1])
    if found[3]:
        return None, int(amount * (1000 if found[2] else 1))
    return amount, None


def remaining_usd(store: Store, wf: Workflow, name: str) -> float | None:
    """What the task and this step may still spend, in dollars; None without a dollar budget."""
    budget = wf.context.get(KEY)
    if not budget:
        return None
    step = name.split("/")[0]
    left = []
    for scope, totals in (
        ("task", store.usage_totals(wf.id)),
        (f"step:{step}", store.usage_totals(wf.id, step=step)),
    ):
        limit = limits(budget, scope)["usd"]
        if limit is not None:
            left.append(limit - spent_of(totals)["usd"])
    return max(0.01, min(left)) if left else None


def cli_flags(flag: str | None, remaining: float | None) -> list[str]:
    """The CLI's own budget flag with what is left, where the CLI has one."""
    if flag is None or remaining is None:
        return []
    return [flag, f"{remaining:.2f}"]


def priced(settings: Settings, model: str, usage: dict[str, Any]) -> float:
    """The cost the CLI reported, or, where it reported none, its tokens at the configured price."""
    cost = float(usage.get("cost_usd") or 0.0)
    price = settings.budgets.prices.get(model)
    if cost > 0 or price is None:
        return cost
    return round(
        int(usage.get("input_tokens") or 0) * price.input_per_mtok / 1e6
        + int(usage.get("output_tokens") or 0) * price.output_per_mtok / 1e6,
        6,
    )


def status_line(wf: Workflow, totals: dict[str, float]) -> str | None:
    """`spent $x of $y, n of m tokens` for `status` and `metrics`; None without a budget."""
    budget = wf.context.get(KEY)
    if not budget:
        return None
    limit = limits(budget, "task")
    if limit["usd"] is None and limit["tokens"] is None:
        return None
    line = "task budget: " + describe_spend(spent_of(totals), limit)
    figures = wf.context.get(EXCEEDED)
    if wf.status == EXCEEDED and figures:
        where = "task" if figures["scope"] == "task" else f"step '{figures['step']}'"
        line += f"; paused: {where} reached its {', '.join(figures['over'])} budget"
    return line


def spend_rows(store: Any) -> list[dict[str, Any]]:
    """Spend against budget of every workflow that has one, for `metrics`."""
    rows = []
    for wf in store.workflows():
        totals = store.usage_totals(wf.id)
        line = status_line(wf, totals)
        if line is None:
            continue
        budget = wf.context.get(KEY) or {}
        rows.append(
            {
                "workflow": wf.id,
                "status": wf.status,
                "spent": spent_of(totals),
                "limit": limits(budget, "task"),
                "line": line,
            }
        )
    return rows
