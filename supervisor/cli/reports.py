"""How the setup and housekeeping commands report in a terminal: `context` (a pack),
`doctor`, `metrics` and `sandbox status`. Apart from supervisor/cli/render.py, which the reading
commands (`status`, `events`, `approve`) import, so that they load only what they draw.

File names, gate commands, strategy and role names come from the repository: every such cell is a
Text from supervisor.guard.textsafe, never a markup string."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Group
from rich.table import Table
from rich.text import Text

from supervisor.cli.render import _id_column
from supervisor.guard.textsafe import text

if TYPE_CHECKING:
    from rich.console import RenderableType

    from supervisor.context.assemble import Pack
    from supervisor.doctor import Check
    from supervisor.routing.suggest import Suggestion


def pack_report(pack: Pack) -> RenderableType:
    head = Table.grid(padding=(0, 2))
    head.add_row("strategy", text(pack.strategy))
    head.add_row(
        "tokens",
        f"{pack.prompt_tokens} prompt + {pack.tokens} context = "
        f"{pack.prompt_tokens + pack.tokens} of a {pack.budget} budget",
    )
    head.add_row("files packed", str(len(pack.files)))
    redacted = ", ".join(f"{k} x{v}" for k, v in pack.redactions.items())
    head.add_row("redacted", text(redacted or "-"))
    head.add_row("secret files excluded", text(", ".join(pack.excluded_secret_files) or "-"))
    if pack.dropped_by_repomix:
        head.add_row("dropped by Repomix", text(", ".join(pack.dropped_by_repomix)))
    for cut in pack.truncated:
        head.add_row(
            "truncated",
            text(
                f"{cut['section']}: {cut['omitted_lines']} line(s) past the first "
                f"{cut['shown_lines']} left out"
            ),
        )
    head.add_row("took", f"{pack.seconds:.2f} s")
    files = Table(title="Packed", title_justify="left")
    files.add_column("file")
    for path in pack.files:
        files.add_row(text(path, lines=False))
    pruned = Table(title="Pruned to fit the budget (lowest priority first)", title_justify="left")
    for column in ("section", "file", "tokens"):
        pruned.add_column(column)
    for item in pack.pruned:
        pruned.add_row(
            text(item["section"]), text(item["path"] or "-", lines=False), str(item["tokens"])
        )
    return Group(head, files, pruned)


def doctor_table(checks: list[Check]) -> Table:
    table = Table(title="supervisor doctor", title_justify="left")
    for column in ("", "check", "found", "fix"):
        table.add_column(column)
    for check in checks:
        mark = (
            Text("✓", style="green")
            if check.ok
            else Text("✗" if check.required else "-", style="red" if check.required else "yellow")
        )
        name = check.name + ("" if check.required else " (not needed by this workflow)")
        hint = text(check.hint if not check.ok else "")
        table.add_row(mark, text(name), text(check.detail), hint)
    return table


def metrics_tables(
    roles: list[dict[str, object]], clis: dict[str, dict[str, dict[str, float]]]
) -> RenderableType:
    per_role = Table(title="Per role", title_justify="left")
    _id_column(per_role, "role", [str(r["role"]) for r in roles])
    for column in (
        "runs",
        "success",
        "avg retries",
        "avg time",
        "tokens in/out",
        "cost",
        "errors",
    ):
        per_role.add_column(column)
    for r in roles:
        per_role.add_row(
            text(r["role"], lines=False),
            str(r["runs"]),
            f"{float(r['success_rate']):.0%}",  # type: ignore[arg-type]
            f"{float(r['avg_retries']):.1f}",  # type: ignore[arg-type]
            f"{float(r['avg_duration_s']):.1f}s",  # type: ignore[arg-type]
            f"{r['input_tokens']}/{r['output_tokens']}",
            f"${float(r['cost_usd']):.4f}",  # type: ignore[arg-type]
            text(", ".join(f"{k} x{v}" for k, v in r["errors"].items()) or "-"),  # type: ignore[attr-defined]
        )
    tasks = sorted({t for by_task in clis.values() for t in by_task})
    matrix = Table(title="CLI by task type (success rate, runs)", title_justify="left")
    matrix.add_column("cli")
    for task in tasks:
        matrix.add_column(text(task, lines=False))
    for cli, by_task in clis.items():
        cells = [
            f"{by_task[t]['success_rate']:.0%} ({int(by_task[t]['runs'])})" if t in by_task else "-"
            for t in tasks
        ]
        matrix.add_row(text(cli, lines=False), *cells)
    return Group(per_role, matrix)


def suggestions_report(found: list[Suggestion], last: str | None) -> str:
    """`metrics --suggest`: each suggestion with the figures behind it."""
    period = f"the last {last}" if last else "all recorded runs"
    if not found:
        return (
            f"No suggestions from {period}: no role retries much, no context is often pruned, "
            "no CLI often fails a task type."
        )
    lines = [f"Suggestions from {period}:"]
    for s in found:
        figures = ", ".join(f"{k}={v}" for k, v in s.figures.items())
        lines += [f"- {s.subject}: {s.issue}", f"    {s.recommendation}", f"    ({figures})"]
    return "\n".join(lines)


def sandbox_report(info: dict[str, object]) -> RenderableType:
    head = Table.grid(padding=(0, 2))
    head.add_row("base image", str(info["base_image"]))
    head.add_row(
        "project Dockerfile", text(info["dockerfile"] or "none (gates use the base image)")
    )
    head.add_row("dependency files", text(", ".join(info["dependency_files"]) or "-"))  # type: ignore[arg-type]
    head.add_row("image for HEAD", str(info["wanted"] or "-"))
    images = Table(title="Project images", title_justify="left")
    found = info["images"]
    _id_column(images, "tag", [", ".join(i["tags"]) for i in found])  # type: ignore[attr-defined]
    for column in ("built", "size", "from", "current"):
        images.add_column(column)
    for image in info["images"]:  # type: ignore[attr-defined]
        images.add_row(
            ", ".join(image["tags"]),
            image["created"],
            f"{image['size_mb']} MB",
            text(image["files"]),
            "✓" if image["current"] else "",
        )
    return Group(head, images)
