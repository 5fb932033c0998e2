"""Packing a role's view of the repository with the pinned Repomix.

The supervisor, not the worker, decides what a role sees: the role's include/exclude patterns
select files, secret-looking files never leave the host, and secrets inside files are redacted
before the pack reaches a prompt (Repomix's own scan misses several kinds, so it is not relied on).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from supervisor import process
from supervisor.config import NODE_BIN

if TYPE_CHECKING:
    from pathlib import Path

    from supervisor.config import ContextSpec

ALWAYS_EXCLUDED = [
    "**/.env",
    "**/.env.*",
    "**/*.pem",
    "**/*.key",
    "**/id_rsa*",
    "**/.supervisor/**",
    "**/.git/**",
]

SECRET_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    (
        "private_key",
        re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?-----END [A-Z ]*PRIVATE KEY-----", re.S),
    ),
    ("aws_access_key_id", re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")),
    ("anthropic_or_openai_key", re.compile(r"\bsk-(?:ant-)?[A-Za-z0-9_\-]{16,}")),
    ("github_token", re.compile(r"\bgh[pousr]_[A-Za-z0-9]{20,}")),
    ("slack_token", re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}")),
    ("google_api_key", re.compile(r"\bAIza[0-9A-Za-z_\-]{35}\b")),
    ("url_password", re.compile(r"(?<=://)[^/\s:@]+:[^/\s@]+(?=@)")),
    (
        "secret_assignment",
        re.compile(
            r"(?i)((?:aws_secret_access_key|secret|password|passwd|api_key|apikey|token)"
            r"[\"']?\s*[:=]\s*[\"']?)([^\s\"']{8,})"
        ),
    ),
]


@dataclass
class Pack:
    text: str
    files: list[str] = field(default_factory=list)
    redactions: dict[str, int] = field(default_factory=dict)
    truncated: bool = False

    @property
    def approx_tokens(self) -> int:
        return len(self.text) // 4


def redact(text: str) -> tuple[str, dict[str, int]]:
    """Replace secrets by a marker naming their kind; count, never record, what was removed."""
    counts: dict[str, int] = {}
    for kind, pattern in SECRET_PATTERNS:
        if kind == "secret_assignment":
            text, n = pattern.subn(lambda m, k=kind: f"{m.group(1)}[REDACTED:{k}]", text)
        else:
            text, n = pattern.subn(f"[REDACTED:{kind}]", text)
        if n:
            counts[kind] = counts.get(kind, 0) + n
    return text, counts


FILE_PATH = re.compile(r'<file path="([^"]+)">')


def pack(worktree: Path, spec: ContextSpec, max_bytes: int = 200_000) -> Pack:
    """Run Repomix on the worktree with the role's patterns; an empty selection is an empty pack."""
    if not spec.include:
        return Pack("")
    repomix = process.find_program("repomix", [NODE_BIN])
    args = [
        repomix,
        "--stdout",
        "--style",
        "xml",
        "--no-file-summary",
        "--include",
        ",".join(spec.include),
        "--ignore",
        ",".join([*ALWAYS_EXCLUDED, *spec.exclude]),
    ]
    result = process.run(args, cwd=worktree, timeout=300)
    text, counts = redact(result.stdout)
    truncated = len(text) > max_bytes
    if truncated:
        text = text[:max_bytes] + "\n[... context truncated to the size limit ...]\n"
    return Pack(text=text, files=FILE_PATH.findall(text), redactions=counts, truncated=truncated)
