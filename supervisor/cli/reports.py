"""How the setup and housekeeping commands report in a terminal: `context` (a pack),
`doctor`, `metrics` and `sandbox status`. Apart from supervisor/views/render.py, which the reading
commands (`status`, `events`, `approve`) import, so that they load only what they draw.

File names, gate commands, strategy and role names come from the repository: every such cell is a
Text from supervisor.guard.textsafe, never a markup string.

Each report imports rich's tables when it draws one: every command that is not one of these
(`start-task` first) imports this module with the command line, and would load them for nothing."""

from __future__ import annotations

from typing import TYPE_CHECKING

from supervisor.core.plural import counted
from supervisor.guard.textsafe import text

if TYPE_CHECKING:
    from rich.console import RenderableType

    from supervisor.context.assemble import Pack
    from supervisor.context.targets import Targets
    from supervisor.lifecycle.doctor import Check
    from supervisor.routing.suggest import Suggestion


TARGETS_FROM = {"given": "--target", "changes": "the working tree's changes"}


def pack_report(pack: Pack, targets: Targets | None = None) -> RenderableType:
    """What `context` packed, in words where a table would be empty: no targets, no files
    packed, nothing pruned (empty tables once said nothing, and looked like a failure)."""
    from rich.console import Group
    from rich.table import Table

    head = Table.grid(padding=(0, 2))
    if targets is not None:
        head.add_row(
            "targets",
            text(f"{', '.join(targets.files)} ({TARGETS_FROM[targets.source]})")
            if targets.files
            else "none: no --target given, and the working tree has no changes",
        )
    head.add_row("strategy", text(pack.strategy))
    if pack.project:
        surface = ", ".join(pack.surface_of)
        built_on = f"; the public surface of {surface}" if surface else ""
        head.add_row("project", text(f"{pack.project}{built_on}"))
    head.add_row(
        "tokens",
        f"{pack.prompt_tokens} prompt + {pack.tokens} context = "
        f"{pack.prompt_tokens + pack.tokens} of a {pack.budget} budget",
    )
    head.add_row(
        "files packed",
        str(len(pack.files))
        if pack.files
        else "none: the role's prompt and the task only (--target FILE names files)",
    )
    redacted = ", ".join(f"{k} x{v}" for k, v in pack.redactions.items())
    head.add_row("redacted", text(redacted or "-"))
    head.add_row("secret files excluded", text(", ".join(pack.excluded_secret_files) or "-"))
    if pack.dropped_by_repomix:
        head.add_row("dropped by Repomix", text(", ".join(pack.dropped_by_repomix)))
    for cut in pack.truncated:
        head.add_row(
            "truncated",
            text(
                f"{cut['section']}: {counted(cut['omitted_lines'], 'line')} past the first "
                f"{cut['shown_lines']} left out"
            ),
        )
    if not pack.pruned:
        head.add_row("pruned", "nothing: it all fits the budget")
    head.add_row("took", f"{pack.seconds:.2f} s")
    shown: list[RenderableType] = [head]
    if pack.files:
        files = Table(title="Packed", title_justify="left")
        files.add_column("file")
        for path in pack.files:
            files.add_row(text(path, lines=False))
        shown.append(files)
    if pack.pruned:
        pruned = Table(
            title="Pruned to fit the budget (lowest priority first)", title_justify="left"
        )
        for column in ("section", "file", "tokens"):
            pruned.add_column(column)
        for item in pack.pruned:
            pruned.add_row(
                text(item["section"]), text(item["path"] or "-", lines=False), str(item["tokens"])
            )
        shown.append(pruned)
    return Group(*shown)


MARKS = {
    "ok": ("✓", "green"),
    "warning": ("!", "yellow"),
    "failed": ("✗", "red"),
    "optional": ("-", "yellow"),
}


def doctor_table(checks: list[Check]) -> RenderableType:
    """One check a line: its mark, its name, what it found (wrapped, never cut: it may hold a
    path or an image tag), and under a finding or a failure the fix. A finding on a check that
    passed (an engine affected by an advisory) is a warning, never a ✓."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    from supervisor.views.listings import verdict

    table = Table.grid(padding=(0, 1))
    table.add_column(no_wrap=True)
    table.add_column(no_wrap=True)
    table.add_column(overflow="fold")
    for check in checks:
        shown = verdict(check)
        mark, style = MARKS[shown]
        detail = check.detail + (" (not needed by this workflow)" if shown == "optional" else "")
        table.add_row(Text(mark, style=style), text(check.name, lines=False), text(detail))
        if shown != "ok" and check.hint:
            table.add_row("", "", text(f"fix: {check.hint}", "dim"))
    return Group(Text("supervisor doctor", style="italic"), table)


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
    from rich.console import Group
    from rich.table import Table

    from supervisor.views import listings
    from supervisor.views.tables import fitted

    head = Table.grid(padding=(0, 2))
    head.add_row("base image", str(info["base_image"]))
    head.add_row(
        "project Dockerfile", text(info["dockerfile"] or "none (gates use the base image)")
    )
    head.add_row("dependency files", text(", ".join(info["dependency_files"]) or "-"))  # type: ignore[arg-type]
    head.add_row("image for HEAD", str(info["wanted"] or "-"))
    for label in info.get("toolchains") or []:  # type: ignore[attr-defined]
        head.add_row("toolchain", text(str(label)))
    for finding in info.get("toolchain_findings") or []:  # type: ignore[attr-defined]
        head.add_row("toolchain finding", text(str(finding), "yellow"))
    images = fitted(listings.images(info))
    return Group(head, images)
