"""`supervisor init`: detect the project, suggest role packs, write `.supervisor/`.

Running it again never overwrites a file the user edited: `.supervisor/init.json` records the hash
of everything init wrote, and a file whose content no longer matches is left alone and reported.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import yaml

from supervisor.context.packs.manifest import load_pack
from supervisor.context.roles import PACKS_DIR
from supervisor.gate_check import GateCheck
from supervisor.guard import trustmap
from supervisor.project.detect import Detection, detect

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
    gate_checks: dict[str, GateCheck] = field(default_factory=dict)
    """Each detected gate run once on the untouched project (empty when not checked)."""


def pack_roles(pack: str) -> list[str]:
    return sorted(load_pack(PACKS_DIR / pack).manifest.roles)


def offered_packs(detection: Detection) -> list[tuple[str, bool]]:
    """Every pack with whether it is suggested: detected ones first, then the rest."""
    suggested = list(dict.fromkeys(detection.role_packs))
    rest = [p for p in PACK_TITLES if p not in suggested]
    return [(p, True) for p in suggested] + [(p, False) for p in rest]


def initialize(
    repo: Path,
    choose: Callable[[str, bool], bool] | None = None,
    base_image: str = "supervisor-sandbox:latest",
    check: Callable[[Path, dict[str, str]], dict[str, GateCheck]] | None = None,
) -> InitReport:
    """Write `.supervisor/`; `choose(pack, suggested)` decides each pack (None: suggestions);
    `check(repo, gates)` runs the detected gates on the untouched project first (None: not
    checked), and a gate that fails is written commented out."""
    detection = detect(repo)
    packs = [
        pack
        for pack, suggested in offered_packs(detection)
        if (choose(pack, suggested) if choose is not None else suggested)
    ]
    report = InitReport(detection=detection, packs=packs)
    state = repo / trustmap.STATE_DIR  # written here, read through the trust map
    manifest_path = state / "init.json"
    manifest: dict[str, str] = (
        json.loads(manifest_path.read_text()) if manifest_path.is_file() else {}
    )
    dockerfile_written = None
    if set(detection.stacks) & {"python", "node", "rust", "go"}:
        from supervisor.project import project_image

        _, dockerfile_written = project_image.write_dockerfile(repo, detection, base_image)
    if check is not None:
        report.gate_checks = check(repo, dict(detection.gates))
    files: dict[str, str] = {"config.yaml": _config_text(detection, packs, report.gate_checks)}
    for pack in packs:
        for role in pack_roles(pack):
            files[f"roles/{role}.yaml"] = load_pack(PACKS_DIR / pack).role_path(role).read_text()
    for rel, text in files.items():
        target = state / rel
        digest = _digest(text)
        if target.exists():
            current = _digest(target.read_text())
            if current == digest:
                report.unchanged.append(rel)
                manifest[rel] = digest
                continue
            if manifest.get(rel) != current:
                report.left_alone.append(rel)  # edited by the user, or not ours
                continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
        manifest[rel] = digest
        report.written.append(rel)
    (state / "templates").mkdir(parents=True, exist_ok=True)
    if dockerfile_written is not None:
        (report.written if dockerfile_written else report.left_alone).append("sandbox/Dockerfile")
    manifest_path.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return report


def _config_text(detection: Detection, packs: list[str], checks: dict[str, GateCheck]) -> str:
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
    text = yaml.safe_dump(body, sort_keys=False) if body else ""
    return "\n".join(header) + "\n" + text


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()
