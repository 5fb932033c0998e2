"""Secret redaction: nothing that looks like a credential reaches a prompt.

Repomix's built-in scan misses bare AWS key ids, short key bodies and many `sk-` keys, so the
supervisor redacts everything itself. Each secret becomes `[REDACTED:<kind>]`; the counts per kind
are the only trace (events never hold the value). A value assigned to a secret-looking name is
redacted when it is not a placeholder (`changeme`, `${VAR}`, `os.environ[...]`, `<your-key>`) and
either long and high-entropy, or assigned to a password.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from pathlib import PurePosixPath

PRIVATE_KEY = re.compile(
    r"-----BEGIN ((?:[A-Z]+ )*PRIVATE KEY(?: BLOCK)?)-----.*?-----END \1-----", re.S
)
PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    ("aws_access_key_id", re.compile(r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA)[0-9A-Z]{16}\b")),
    ("anthropic_key", re.compile(r"\bsk-ant-[A-Za-z0-9_\-]{20,}")),
    ("openai_key", re.compile(r"\bsk-(?:proj-|svcacct-)?[A-Za-z0-9_\-]{20,}")),
    ("github_token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{40,})")),
    ("slack_webhook", re.compile(r"https://hooks\.slack\.com/services/[A-Za-z0-9/_\-]+")),
    ("slack_token", re.compile(r"\bxox[abposr]-[A-Za-z0-9\-]{10,}")),
    ("google_api_key", re.compile(r"\bAIza[0-9A-Za-z_\-]{35}\b")),
    ("stripe_key", re.compile(r"\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}")),
    ("jwt", re.compile(r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}")),
]
# scheme://user:password@host: only the password goes.
URL_PASSWORD = re.compile(r"(\b[a-zA-Z][a-zA-Z0-9+.\-]*://[^\s/:@]+:)([^\s/@]+)(@)")
SECRET_NAME = (
    r"(?:[A-Za-z0-9_\-]*(?:password|passwd|secret|token|api_?key|access_?key|private_?key"
    r"|client_?secret|auth)[A-Za-z0-9_\-]*)"
)
ASSIGNMENT = re.compile(
    rf"""(?ix)
    (?P<lead>["']?(?P<name>{SECRET_NAME})["']?\s*(?::|=|:=)\s*)
    (?P<quote>["']?)
    (?P<value>[^\s"',;]{{4,}})
    (?P=quote)
    """
)
PLACEHOLDER = re.compile(
    r"(?ix)^(?:\$\{?\w+\}?|<[^>]*>|%\(?\w+\)?s?|\{\{.*\}\}|x+|\*+|changeme|change_me|password"
    r"|secret|example|dummy|test|none|null|true|false|your[_\-].*|.*\(.*|os\.environ.*"
    r"|process\.env.*|env\..*|getenv.*|settings\..*|config\..*|\[redacted.*)$"
)
CODE_REFERENCE = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+|[A-Za-z_]+")
SECRET_FILE_NAMES = {".npmrc", ".pypirc", ".netrc", "credentials.json", ".env"}
SECRET_FILE_SUFFIXES = (".pem", ".key", ".p12", ".pfx", ".keystore", ".jks")
ENV_TEMPLATES = (".example", ".sample", ".template", ".dist")


def entropy(value: str) -> float:
    counts = Counter(value)
    return -sum(n / len(value) * math.log2(n / len(value)) for n in counts.values())


def redact(text: str) -> tuple[str, dict[str, int]]:
    counts: Counter[str] = Counter()

    def replace(kind: str) -> str:
        counts[kind] += 1
        return f"[REDACTED:{kind}]"

    text = PRIVATE_KEY.sub(lambda m: replace("private_key"), text)
    for kind, pattern in PATTERNS:
        text = pattern.sub(lambda m, k=kind: replace(k), text)
    text = URL_PASSWORD.sub(lambda m: m.group(1) + replace("url_password") + m.group(3), text)

    def assignment(m: re.Match[str]) -> str:
        value, name = m.group("value"), m.group("name").lower()
        if value.startswith("[REDACTED") or PLACEHOLDER.match(value):
            return m.group(0)
        if not m.group("quote") and CODE_REFERENCE.fullmatch(value):
            return m.group(0)  # `token = self.token`: code, not a value
        kind = _assigned_kind(name, value)
        if kind is None:
            return m.group(0)
        q = m.group("quote")
        return f"{m.group('lead')}{q}{replace(kind)}{q}"

    text = ASSIGNMENT.sub(assignment, text)
    return text, dict(counts)


def _assigned_kind(name: str, value: str) -> str | None:
    if "aws" in name and "secret" in name and re.fullmatch(r"[A-Za-z0-9/+=]{40}", value):
        return "aws_secret_access_key"
    if len(value) >= 16 and entropy(value) >= 3.5:
        return "high_entropy_secret"
    if ("password" in name or "passwd" in name) and len(value) >= 8:
        return "password"
    return None


def is_secret_file(path: str) -> bool:
    """Files never packed into a prompt, whatever a role's patterns say."""
    name = PurePosixPath(path).name
    lower = name.lower()
    if lower.startswith(".env"):
        return not lower.endswith(ENV_TEMPLATES)
    return (
        lower in SECRET_FILE_NAMES
        or lower.endswith(SECRET_FILE_SUFFIXES)
        or lower.startswith(("id_rsa", "id_ed25519", "id_ecdsa", "id_dsa"))
    )
