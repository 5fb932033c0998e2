"""`supervisor metrics`: how each role and each CLI has been doing, from one row per worker run.

The two views follow the plan's "Metrics & Adaptive Role Assignment": per role (success rate,
retries, time, tokens, cost) and CLI by task type (success rate), so that a team can see which CLI
to give which role. A run succeeded when its work stood, as adaptive assignment judges it
(supervisor.routing.history.accepted_runs: nothing sent it back, no gate failed its candidate),
not when its CLI merely exited cleanly.
"""

from __future__ import annotations

import re
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from typing import Any

from supervisor.core.errors import UsageError

PERIOD = re.compile(r"^(\d+)([dhm])$")


def since(last: str | None) -> datetime | None:
    if not last:
        return None
    match = PERIOD.match(last.strip())
    if match is None:
        raise UsageError(
            f"--last {last!r} is not a period.", "Use a number and d, h or m: --last 30d."
        )
    amount, unit = int(match.group(1)), match.group(2)
    delta = {
        "d": timedelta(days=amount),
        "h": timedelta(hours=amount),
        "m": timedelta(minutes=amount),
    }[unit]
    return datetime.now(UTC) - delta


def by_role(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        groups[row["role"]].append(row)
    out = []
    for role, items in sorted(groups.items()):
        n = len(items)
        out.append(
            {
                "role": role,
                "runs": n,
                "success_rate": sum(1 for r in items if succeeded(r)) / n,
                "avg_retries": sum(r["retries"] for r in items) / n,
                "avg_duration_s": sum(r["duration_s"] for r in items) / n,
                "input_tokens": sum(r["input_tokens"] for r in items),
                "output_tokens": sum(r["output_tokens"] for r in items),
                "cost_usd": round(sum(r["cost_usd"] for r in items), 4),
                "errors": dict(
                    sorted(
                        _count(r["error_category"] for r in items if r["error_category"]).items()
                    )
                ),
            }
        )
    return out


def cli_by_task(rows: list[dict[str, Any]]) -> dict[str, dict[str, dict[str, float]]]:
    table: dict[str, dict[str, list[bool]]] = defaultdict(lambda: defaultdict(list))
    for row in rows:
        table[row["cli"]][row["task_type"] or "-"].append(succeeded(row))
    return {
        cli: {task: {"runs": len(v), "success_rate": sum(v) / len(v)} for task, v in tasks.items()}
        for cli, tasks in sorted(table.items())
    }


def succeeded(row: dict[str, Any]) -> bool:
    """`accepted` (history.accepted_runs) when the row was judged, else the CLI's own exit."""
    return bool(row["accepted"] if "accepted" in row else row["success"])


def _count(values: Any) -> dict[str, int]:
    counts: dict[str, int] = defaultdict(int)
    for value in values:
        counts[value] += 1
    return counts
