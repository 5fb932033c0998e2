"""What each listing holds: workflows, steps, events, roles, metrics, doctor's checks, images and
settings, as rows (supervisor/views/listing.py prints them for a pipe or a terminal).

Worker and repository text (a task, a component id, an event's payload, a role's description)
is only ever a cell's value here: made visible, never markup, when printed. No rich here, so the
plain (piped) form of `status` and `events` loads none of it.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from supervisor.views import detail
from supervisor.views.listing import Cell, Column, Listing

if TYPE_CHECKING:
    from collections.abc import Mapping

    from supervisor.context.roles import RoleFile
    from supervisor.lifecycle.doctor import Check
    from supervisor.state.records import Event, Workflow
    from supervisor.views.detail import StepRow

STATUS_STYLE = detail.STATUS_STYLE
shown_step = detail.shown_step


def status_cell(value: str | None, shown: str | None = None) -> Cell:
    value = value or ""
    return Cell(shown or value, STATUS_STYLE.get(value, ""))


def shown_status(
    wf: Workflow,
    supervisors: Mapping[int, int | None] | None,
    degraded: bool = True,
    runners: Mapping[int, str] | None = None,
) -> str:
    """A running task that no supervisor runs any more (killed) says so: resume continues it;
    the one label is supervisor/state/status_label.py's. `runners`: who runs a task across hosts and
    runners (supervisor/state/runner_view.py), which says more than a local pid can."""
    from supervisor.state.status_label import shown_status as label

    if runners and wf.id in runners:
        from supervisor.core.degradation import label as degradation

        shown = runners[wf.id]
        return (
            f"{shown} ({degradation(wf.context)})"
            if degraded and wf.context.get("degraded")
            else shown
        )
    orphan = supervisors is not None and wf.id in supervisors and supervisors[wf.id] is None
    return label(wf, supervised=not orphan, degraded=degraded)


def workflows(
    found: list[Workflow],
    supervisors: Mapping[int, int | None] | None,
    runners: Mapping[int, str] | None = None,
) -> Listing:
    listing = Listing(
        "Workflows",
        [
            Column("id", "short"),
            Column("status", "short"),
            Column("step"),
            Column("branch"),
            Column("task", "text"),
            Column("updated", "short", optional=True),
        ],
    )
    for wf in found:
        listing.add(
            str(wf.id),
            status_cell(wf.status, shown_status(wf, supervisors, runners=runners)),
            shown_step(wf),
            wf.task_branch,
            wf.description,
            wf.updated_at.strftime("%Y-%m-%d %H:%M:%S"),
        )
    return listing


def steps(rows: list[StepRow]) -> Listing:
    listing = Listing(
        "Steps",
        [
            Column("#", "short"),
            Column("step"),
            Column("attempt", "short"),
            Column("role"),
            Column("status", "short"),
            Column("started", "short"),
            Column("took", "short"),
        ],
    )
    for row in rows:
        listing.add(
            str(row.id),
            row.name,
            str(row.attempt),
            row.role,
            status_cell(row.status),
            row.started,
            row.took,
        )
    return listing


def tokens(e: Event) -> str:
    if e.input_tokens or e.output_tokens:
        return f"{e.input_tokens or 0}/{e.output_tokens or 0}"
    return ""


def events(log: list[Event]) -> Listing:
    listing = Listing(
        "Events",
        [
            Column("#", "short"),
            Column("time", "short"),
            Column("type"),
            Column("step"),
            Column("role"),
            Column("status", "short"),
            Column("tokens", "short"),
            Column("details", "text"),
        ],
    )
    for e in log:
        listing.add(
            str(e.id),
            e.timestamp.strftime("%H:%M:%S"),
            e.type,
            e.step or "",
            e.role or "",
            status_cell(e.status),
            tokens(e),
            json.dumps(e.payload, default=str) if e.payload else "",
        )
    return listing


def role_rows(files: list[RoleFile]) -> list[dict[str, object]]:
    """Every role file, in lookup order; `shadowed` when an earlier layer has the same name."""
    import yaml

    rows: list[dict[str, object]] = []
    seen: set[str] = set()
    for f in files:
        data = yaml.safe_load(f.path.read_text()) or {}
        data = data if isinstance(data, dict) else {}
        rows.append(
            {
                "role": f.name,
                "layer": "built-in" if f.layer == "package" else f.layer,
                "pack": f.pack or "",
                "version": f.version or "",
                "extends": str(data.get("extends") or ""),
                "description": str(data.get("description") or ""),
                "file": str(f.path),
                "shadowed": f.name in seen,
            }
        )
        seen.add(f.name)
    return rows


def roles(rows: list[dict[str, object]]) -> Listing:
    listing = Listing(
        "Roles (the first of a name wins: project > user > community > built-in)",
        [
            Column("role"),
            Column("layer", "short"),
            Column("pack"),
            Column("version", "short"),
            Column("extends"),
            Column("file"),
            Column("description", "text"),
        ],
    )
    for r in rows:
        listing.add(
            Cell(str(r["role"]), "dim strike" if r["shadowed"] else "bold"),
            f"[{r['layer']}]",
            str(r["pack"]) or "-",
            str(r["version"]) or "-",
            str(r["extends"]),
            short_path(str(r["file"])),
            str(r["description"]),
        )
    return listing


def metrics(
    roles: list[dict[str, Any]], clis: dict[str, dict[str, dict[str, float]]]
) -> list[Listing]:
    per_role = Listing(
        "Per role",
        [
            Column("role"),
            *(
                Column(h, "short")
                for h in ("runs", "success", "avg retries", "avg time", "tokens in/out", "cost")
            ),
            Column("errors", "text"),
        ],
    )
    for r in roles:
        per_role.add(
            str(r["role"]),
            str(r["runs"]),
            f"{float(r['success_rate']):.0%}",
            f"{float(r['avg_retries']):.1f}",
            f"{float(r['avg_duration_s']):.1f}s",
            f"{r['input_tokens']}/{r['output_tokens']}",
            f"${float(r['cost_usd']):.4f}",
            ", ".join(f"{k} x{v}" for k, v in r["errors"].items()) or "-",
        )
    matrix = Listing(
        "CLI by task type (success rate, runs)",
        [Column("cli"), Column("task type"), Column("success", "short"), Column("runs", "short")],
    )
    for cli, by_task in clis.items():
        for task, figures in sorted(by_task.items()):
            matrix.add(cli, task, f"{figures['success_rate']:.0%}", str(int(figures["runs"])))
    return [per_role, matrix]


def doctor(checks: list[Check]) -> Listing:
    """Piped: `ok`, `warning` (it works, but look), `failed`, or `optional` (failed, but the
    configured workflow does not need it), then the check, what it found and the fix."""
    listing = Listing(
        "supervisor doctor",
        [Column("", "short"), Column("check"), Column("found", "wrap"), Column("fix", "wrap")],
    )
    for check in checks:
        listing.add(
            verdict(check),
            check.name,
            check.detail,
            "" if check.ok and not check.warning else check.hint,
        )
    return listing


def verdict(check: Check) -> str:
    if check.ok:
        return "warning" if check.warning else "ok"
    return "failed" if check.required else "optional"


def images(info: Mapping[str, Any]) -> Listing:
    listing = Listing(
        "Project images",
        [
            Column("tag"),
            Column("built", "short"),
            Column("size", "short"),
            Column("current", "short"),
            Column("from", "text"),
        ],
    )
    for image in info["images"]:
        listing.add(
            ", ".join(image["tags"]),
            str(image["created"]),
            f"{image['size_mb']} MB",
            "✓" if image["current"] else "",
            str(image["files"]),
        )
    return listing


def settings(flat: Mapping[str, object], provenance: Mapping[str, str]) -> Listing:
    listing = Listing(
        "Effective configuration", [Column("key"), Column("value", "wrap"), Column("from")]
    )
    for key, value in flat.items():
        listing.add(key, yaml_value(value), short_path(provenance.get(key, "(default)")))
    return listing


def role_fields(title: str, flat: Mapping[str, object], provenance: Mapping[str, str]) -> Listing:
    # Names (models, a template, a strategy) and lists of them: read whole, as config show's.
    listing = Listing(title, [Column("field"), Column("value", "wrap"), Column("from")])
    for key, value in flat.items():
        source = provenance.get(key, "(default)").lstrip(" +")
        listing.add(key, yaml_value(value), short_path(source))
    return listing


def yaml_value(value: object) -> str:
    """A setting as it is written in a config file (`null`, `true`, `[claude, codex]`), not
    as Python shows it (`None`, `True`, `['claude', 'codex']`)."""
    if isinstance(value, str):
        return value
    import yaml

    dumped: str = yaml.safe_dump(value, default_flow_style=True, width=1 << 30)
    return dumped.removesuffix("\n...\n").strip()


def short_path(text: str) -> str:
    """Paths as a person reads them: package files relative, the home directory as ~."""
    from pathlib import Path

    from supervisor.core.config import PACKAGE_ROOT

    return text.replace(f"{PACKAGE_ROOT}/", "").replace(f"{Path.home()}/", "~/")
