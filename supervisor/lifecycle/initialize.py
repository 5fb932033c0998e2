"""`supervisor init`: detect the project, suggest role packs, write `.supervisor/`.

Running it again never overwrites a file the user edited: `.supervisor/init.json` records the hash
of everything init wrote, and a file whose content no longer matches is left alone and reported.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import yaml

from supervisor.context.packs.manifest import load_pack
from supervisor.context.roles import PACKS_DIR
from supervisor.core import trustmap
from supervisor.guard.visible import visible
from supervisor.lifecycle.gate_check import GateCheck
from supervisor.project.detect import Detection, detect
from supervisor.project.workspaces import Workspaces, detect_workspaces
from supervisor.workflow.gate_wiring import GateWiring

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

PACK_TITLES = {
    "web_frontend": "Web frontend",
    "backend_api": "Backend API",
    "data_pipeline": "Data pipeline",
    "trading": "Trading / finance",
    "cli_tooling": "CLI tooling",
    "security": "Security auditing",
    "infrastructure": "Infrastructure / DevOps",
    "smart_contracts": "Smart contracts",
    "rust": "Rust",
    "go": "Go",
}


@dataclass
class InitReport:
    detection: Detection
    packs: list[str]
    written: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    left_alone: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    """Role files an earlier init wrote for a pack not chosen now (unedited: edited ones are
    left alone)."""
    gate_checks: dict[str, GateCheck] = field(default_factory=dict)
    """Each detected gate run once on the untouched project (empty when not checked)."""
    wiring: GateWiring | None = None
    """Where each gate written runs in the project's workflow."""
    workspaces: Workspaces = field(default_factory=Workspaces)
    """The monorepo's packages written as `projects:` (none: one project)."""


def pack_roles(pack: str) -> list[str]:
    return sorted(load_pack(PACKS_DIR / pack).manifest.roles)


def with_package_packs(detection: Detection, workspaces: Workspaces) -> Detection:
    """The repository's detection suggesting each package's packs too (a monorepo of a React
    app and a FastAPI service gets both packs, though its root shows neither)."""
    packs = [
        *detection.role_packs,
        *(k for p in workspaces.packages for k in p.detection.role_packs),
    ]
    return dataclasses.replace(detection, role_packs=list(dict.fromkeys(packs)))


def offered_packs(detection: Detection) -> list[tuple[str, bool]]:
    """Every pack with whether it is suggested: detected ones first, then the rest."""
    suggested = list(dict.fromkeys(detection.role_packs))
    rest = [p for p in PACK_TITLES if p not in suggested]
    return [(p, True) for p in suggested] + [(p, False) for p in rest]


LANGUAGE_PACKS = {"rust": "rust", "go": "go"}
"""Packs for one language, offered only where that language was detected."""


def checklist(detection: Detection) -> list[tuple[str, bool]]:
    """The packs interactive init lists, suggested ones first and selected: every pack but
    those for a language this project does not use (Rust and Go for a Python project)."""
    return [
        (pack, suggested)
        for pack, suggested in offered_packs(detection)
        if suggested or LANGUAGE_PACKS.get(pack, "") in ("", *detection.stacks)
    ]


def toggle(selected: list[bool], answer: str) -> list[bool]:
    """The checklist after the user's answer: numbers (1-based, separated by spaces or commas)
    flip those rows, `all` and `none` set every row. A ValueError names what was not understood.
    """
    words = answer.replace(",", " ").lower().split()
    if words in (["all"], ["none"]):
        return [words == ["all"]] * len(selected)
    flipped = list(selected)
    for word in words:
        if not word.isdigit() or not 1 <= int(word) <= len(selected):
            raise ValueError(f"'{word}' is not a number from 1 to {len(selected)}")
        flipped[int(word) - 1] = not flipped[int(word) - 1]
    return flipped


def initialize(
    repo: Path,
    choose: Callable[[str, bool], bool] | None = None,
    base_image: str = "supervisor-sandbox:latest",
    check: Callable[[Path, dict[str, str]], dict[str, GateCheck]] | None = None,
    detection: Detection | None = None,
    workspaces: Workspaces | None = None,
) -> InitReport:
    """Write `.supervisor/`; `choose(pack, suggested)` decides each pack (None: suggestions);
    `check(repo, gates)` runs the detected gates on the untouched project first (None: not
    checked), and a gate that fails is written commented out. `detection`, `workspaces`: what
    the caller already showed the user and the packages they kept (None: detected now, all).
    Packages that depend on each other in a cycle, or a path that is not there, stop it before
    anything is written."""
    if workspaces is None:
        workspaces = detect_workspaces(repo)
    if workspaces:
        workspaces.project_map().check_paths(repo)  # a cycle or a missing path: said here
    detection = with_package_packs(detection or detect(repo), workspaces)
    packs = [
        pack
        for pack, suggested in offered_packs(detection)
        if (choose(pack, suggested) if choose is not None else suggested)
    ]
    report = InitReport(detection=detection, packs=packs, workspaces=workspaces)
    state = repo / trustmap.STATE_DIR  # written here, read through the trust map
    manifest_path = state / "init.json"
    manifest: dict[str, str] = (
        json.loads(manifest_path.read_text()) if manifest_path.is_file() else {}
    )
    if set(detection.stacks) & {"python", "node", "rust", "go"}:
        from supervisor.project import project_image

        detection = project_image.resolved_detection(repo, detection, base_image)
        report.detection = detection
        text = project_image.dockerfile_text(detection, base_image)
        if _write(state, DOCKERFILE, text, manifest, report):
            from supervisor.guard import trust

            trust.trust_file(repo, trustmap.DOCKERFILE)  # the user asked for it; the text is ours
    if check is not None:
        report.gate_checks = check(repo, dict(detection.gates))
    report.wiring = _wiring(repo, detection, report.gate_checks)
    files: dict[str, str] = {
        "config.yaml": _config_text(detection, packs, report.gate_checks, report.wiring)
        + projects_text(workspaces, packs)
    }
    for pack in packs:
        for role in pack_roles(pack):
            files[f"roles/{role}.yaml"] = load_pack(PACKS_DIR / pack).role_path(role).read_text()
    for rel, text in files.items():
        _write(state, rel, text, manifest, report)
    _remove_dropped(state, set(files), manifest, report)
    (state / "templates").mkdir(parents=True, exist_ok=True)
    manifest_path.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return report


DOCKERFILE = "sandbox/Dockerfile"


def _write(state: Path, rel: str, text: str, manifest: dict[str, str], report: InitReport) -> bool:
    """Write one file unless the user changed what init wrote there before (its hash in the
    manifest): True if written."""
    target = state / rel
    digest = _digest(text)
    if target.exists() or target.is_symlink():
        current = _digest(target.read_text()) if target.is_file() else ""
        if current == digest:
            report.unchanged.append(rel)
            manifest[rel] = digest
            return False
        if not current or manifest.get(rel) != current or target.is_symlink():
            report.left_alone.append(rel)  # edited by the user, or not ours
            return False
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)
    manifest[rel] = digest
    report.written.append(rel)
    return True


def _remove_dropped(
    state: Path, kept: set[str], manifest: dict[str, str], report: InitReport
) -> None:
    """The role files of packs an earlier init wrote and this one did not choose go, as the
    summary's `Role packs:` line says, unless the user edited them since."""
    for rel in sorted(r for r in manifest if r.startswith("roles/") and r not in kept):
        target = state / rel
        if not target.is_file() or target.is_symlink():
            manifest.pop(rel)
            continue
        if _digest(target.read_text()) != manifest[rel]:
            report.left_alone.append(rel)
            continue
        target.unlink()
        manifest.pop(rel)
        report.removed.append(rel)


def _wiring(repo: Path, detection: Detection, checks: dict[str, GateCheck]) -> GateWiring:
    """Where the gates init writes run in the workflow the project's settings choose."""
    from supervisor.core.config import TemplateChoice, load_settings
    from supervisor.core.errors import ConfigError
    from supervisor.workflow.gate_wiring import wire

    kept = [g for g in detection.gates if g not in checks or checks[g].keep(g)]
    try:
        choice = load_settings(repo).workflow
    except ConfigError:
        choice = TemplateChoice()
    custom = trustmap.repo_path(repo, trustmap.WORKFLOW, trustmap.DATA).is_file()
    return wire(repo, choice, kept, custom)


def _config_text(
    detection: Detection,
    packs: list[str],
    checks: dict[str, GateCheck],
    wiring: GateWiring | None = None,
) -> str:
    body: dict[str, object] = {}
    failing = {g: c for g, c in checks.items() if not c.keep(g) and g in detection.gates}
    gates = {g: cmd for g, cmd in detection.gates.items() if g not in failing}
    if gates:
        body["gates"] = gates
    header = [
        "# supervisor project configuration, written by `supervisor init`.",
        f"# Detected: {', '.join(detection.stacks + detection.frameworks) or 'nothing specific'}.",
        f"# Role packs: {', '.join(packs) or 'none'} (their roles are in .supervisor/roles/).",
        "# Overrides package and user settings; see `supervisor config show`.",
    ]
    if checks:
        passed = [g for g, c in checks.items() if c.passed]
        header.append(
            f"# Gates run once on the untouched project: {', '.join(passed) or 'none'} passed."
        )
    for gate, result in checks.items():
        if not result.checked:
            header.append(f"# The {gate} gate is unverified ({result.summary}).")
        elif not result.passed and result.keep(gate):
            header.append(f"# The {gate} gate fails on the untouched project ({result.summary}).")
    for gate, result in failing.items():
        header.append(f"# Left out, failing on the untouched project ({result.summary}):")
        header.append(f"#   gates: {{{gate}: {detection.gates[gate]!r}}}")
    if "test" not in gates:
        found = "was detected" if "test" not in detection.gates else "passes unchanged"
        header += [
            f"# No test command {found}, so `start-task` stops until you set one, e.g.",
            "# gates: {test: 'python3 -m pytest -q'} (or run it with --no-gate: no gates at all).",
        ]
    header += [
        "# The model API each CLI talks to is set here (a gateway or proxy URL goes here too):",
        "# clis:",
        "#   claude: {base_url: 'https://api.anthropic.com'}",
        "#   codex: {base_url: 'https://api.openai.com/v1'}",
    ]
    if wiring is not None and wiring.added:
        body["workflow"] = {"add": wiring.added}
        header.append(
            f"# {wiring.workflow.capitalize()} runs no {' or '.join(wiring.added)} gate, so the "
            "workflow below adds a step for each (remove it when you choose a template that runs "
            "them)."
        )
    for gate, others in (wiring.not_run if wiring is not None else {}).items():
        elsewhere = f"; the {', '.join(others)} template(s) run it" if others else ""
        header.append(
            f"# The {gate} gate is not run by {wiring.workflow if wiring else ''}{elsewhere}."
        )
    text = yaml.safe_dump(body, sort_keys=False) if body else ""
    return "\n".join(header) + "\n" + text


def projects_text(workspaces: Workspaces, packs: list[str]) -> str:
    """`projects:`, `cross_project_dependencies:` and `shared_paths:`, each dependency with the
    manifest line it comes from; each package's roles are those of its packs the user chose."""
    if not workspaces:
        return ""
    roles = {
        p.name: [r for pack in p.detection.role_packs if pack in packs for r in pack_roles(pack)]
        for p in workspaces.packages
    }
    kinds = ", ".join(f"{kind} ({source})" for kind, source in workspaces.kinds.items())
    header = [
        "",
        f"# Projects of this monorepo, detected from {_comment(kinds)}.",
        "# Each runs its own gates in its own directory; a change to one is gated by it and by",
        "# every project depending on it. Their gates are written as detected (init runs only",
        "# the repository's own gates once).",
    ]
    for package in workspaces.packages:
        for name, why in package.depends_on.items():
            header.append(f"# {package.name} depends on {name}: {_comment(why)}")
    header += [f"# Note: {_comment(warning)}" for warning in workspaces.warnings]
    projects = [
        d.model_dump(exclude_defaults=True, exclude={"sandbox"})
        for d in workspaces.project_defs(roles)
    ]
    body: dict[str, object] = {"projects": projects}
    dependencies = {n: d.model_dump() for n, d in workspaces.dependencies().items()}
    if dependencies:
        body["cross_project_dependencies"] = dependencies
    if workspaces.shared_paths:
        body["shared_paths"] = workspaces.shared_paths
    return "\n".join(header) + "\n" + yaml.safe_dump(body, sort_keys=False)


def _comment(text: str) -> str:
    """Manifest text (a dependency's name, a directory's) on one comment line: a line break in
    it would end the comment and write the repository's own keys into the config."""
    return visible(text, lines=False).replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()
