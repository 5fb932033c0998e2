"""Secret redaction: nothing that looks like a credential reaches a prompt.

Repomix's built-in scan misses bare AWS key ids, short key bodies and many `sk-` keys, and a diff or
a task description never goes through it, so the supervisor redacts every text itself. Each secret
becomes `[REDACTED:<kind>]`; the counts per kind are the only trace (events never hold the value).

Four layers, in this order, so that a later layer never sees what an earlier one removed:

1. Whole-token patterns whose prefix is distinctive enough to need no context: private-key blocks,
   then our own kinds (`PATTERNS`), then the maintained rule set of detect-secrets (Yelp; pinned in
   requirements.txt): its regex plugins, each a vendor's token format (GitLab, SendGrid, Azure
   storage keys, Telegram, Discord, Twilio, Mailchimp, Square, IBM, ...), then the few formats
   neither has (`EXTRA_PATTERNS`: Hugging Face, Stripe webhook secrets, DigitalOcean, kubeconfig
   `client-key-data`, `mysql -p<password>`). Its keyword and entropy plugins are not used: they
   flag too much ordinary code; layers 3 and 4 do that job with tighter rules.
2. Command-line passwords (`mysql -p<password>`, `--password=<password>`).
3. The password of a URL (`scheme://user:PASSWORD@host`): user and host stay, they help the reader.
4. Values assigned to a secret-looking name (`API_TOKEN = "…"`, `password: …`, `"secret": "…"`,
   `ENCRYPTION_KEY=…`).
   Because names alone are weak evidence, the value must also look like a secret: 16+ characters,
   letters and digits, Shannon entropy ≥ 3.5 bits/char; or, for a *password* name only, any literal
   of 8+ characters (a human-chosen password has low entropy but is still a password).
   Placeholders (`changeme`, `${VAR}`, `<your-key>`, `{{ x }}`, `***`), environment look-ups
   (`os.environ[...]`, `process.env.X`), code (`self.token`, `get_key()`, `Optional[str]`), URLs,
   paths and e-mail addresses are left alone. Quoted values with spaces are never taken for a
   secret: they are messages (`auth_error = "Authentication failed"`), not credentials.

Base64 data (e.g. an image in a `data:` URI) is left alone: it is neither a known prefix nor
assigned to a secret-looking name.
"""

from __future__ import annotations

import contextlib
import functools
import math
import re
from collections import Counter
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Any

# An unterminated block (a file cut short by a budget) is redacted up to the end of its body.
PRIVATE_KEY = re.compile(
    r"-----BEGIN ((?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?)-----"
    r"(?:.*?-----END \1-----|(?:(?:\r?\n|\\n)(?:[A-Za-z0-9+/=]+|[A-Za-z\-]+: [^\n]*)?)*)",
    re.S,
)
# Ordered: `sk-ant-` before the generic `sk-`, Slack webhooks before Slack tokens.
PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    ("aws_access_key_id", re.compile(r"\b(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b")),
    ("anthropic_key", re.compile(r"\bsk-ant-[A-Za-z0-9_\-]{20,}")),
    # A digit is required: real keys always have one, hyphenated slugs (`sk-learn-…`) rarely do.
    ("openai_key", re.compile(r"\bsk-(?:proj-|svcacct-|admin-)?(?=[A-Za-z_\-]*\d)[\w\-]{20,}")),
    ("github_token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_\w{40,})")),
    (
        "slack_webhook",
        re.compile(r"https://hooks\.slack\.com/(?:services|workflows|triggers)/[\w/\-]+"),
    ),
    ("slack_token", re.compile(r"\b(?:xox[abposr]|xapp)-[A-Za-z0-9\-]{10,}")),
    ("google_api_key", re.compile(r"\bAIza[\w\-]{35}(?![\w\-])")),
    ("stripe_key", re.compile(r"\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}")),
    ("npm_token", re.compile(r"\bnpm_[A-Za-z0-9]{36}\b")),
    ("pypi_token", re.compile(r"\bpypi-AgEIcHlwaS5vcmc[\w\-]{20,}")),
    ("jwt", re.compile(r"\beyJ[\w\-]{8,}\.eyJ[\w\-]{8,}\.[\w\-]*")),
    # `Bearer` is also an English word: the token must be long and hold a digit.
    ("bearer_token", re.compile(r"(?<=\bBearer )(?=[A-Za-z._~+/\-]*\d)[\w.~+/\-]{16,}=*")),
    ("basic_auth", re.compile(r"(?i)(?<=\bAuthorization: Basic )[A-Za-z0-9+/]{8,}={0,2}")),
]
# Formats neither our list nor detect-secrets knows. A `secret` group marks the part to redact
# when the match needs context around it.
EXTRA_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    ("huggingface_token", re.compile(r"\bhf_[A-Za-z0-9]{30,}\b")),
    ("stripe_webhook_secret", re.compile(r"\bwhsec_[A-Za-z0-9+/=]{24,}")),
    ("digitalocean_token", re.compile(r"\bdo[opr]_v1_[a-f0-9]{64}\b")),
    (
        "kubeconfig_client_key",
        re.compile(r"\bclient-key-data:[ \t]*[\"']?(?P<secret>[A-Za-z0-9+/=]{16,})"),
    ),
]
# A password on a command line: `mysql -u root -p<password> db`, `--password=<password>`.
CLI_PASSWORD = re.compile(
    r"""(?x)
    (?:\b(?:mysql|mysqldump|mysqladmin|mysqlimport|mariadb|mariadb-dump)\b[^\n]*?[ \t]-p
      |(?<![\w-])--password[= ])
    (?P<quote>["']?)(?P<secret>[^\s"'`]{3,})(?P=quote)
    """
)
# detect-secrets plugins left out: ours removes a private-key block whole (theirs matches its
# header line only), our URL layer knows placeholders (`://user:<password>@`, `${PASS}`), and a
# public IP address is not a secret.
SKIPPED_PLUGINS = {"PrivateKeyDetector", "BasicAuthDetector", "IPPublicDetector"}
# Their AWS plugin's key ids are caught by ours first; what it still finds is the secret key.
KIND_ALIASES = {"aws_access_key": "aws_secret_access_key"}
URL_PASSWORD = re.compile(r"(\b[a-zA-Z][a-zA-Z0-9+.\-]*://[^\s/:@]+:)([^\s/@]+)(@)")
ASSIGNMENT = re.compile(
    r"""(?x)
    (?P<lead>(?P<start>^[ \t]*(?:export[ \t]+)?)?
      ["']?(?P<name>[A-Za-z_][\w.\-]*)["']?
      (?P<sep>[ \t]*(?::=|=|:)[ \t]*))
    (?:(?P<quote>["'`])(?P<quoted>[^\s"'`]{4,})(?P=quote)  # a quoted value runs to its quote
      |(?P<bare>[^\s"'`,;&]{4,}))                         # a bare one to a separator
    """,
    re.M,
)
# Words of a name (split on `_`, `-`, `.` and camelCase) that make it a secret's name.
SECRET_WORDS = ("password", "passwd", "secret", "token", "apikey", "accesskey", "privatekey")
# `<qualifier>_key` names a secret (`ENCRYPTION_KEY`, `signingKey`); `primary_key`, `cache_key`
# and `public_key` do not.
KEY_QUALIFIERS = {
    "encryption", "encrypt", "decryption", "signing", "sign", "master", "hmac", "cipher", "aes",
    "jwt", "session", "client", "license", "service", "auth", "crypto", "kms", "storage",
    "account", "webhook", "deploy", "fernet", "app", "access", "api", "private", "secret",
}  # fmt: skip
NOT_SECRET_WORDS = re.compile(r"tokeni[sz]|secretary")
PLACEHOLDER = re.compile(
    r"""(?ix)^(?:
      \$\{[^}]*\}.*|\$\(.*|\$[A-Z_][A-Z0-9_]*|%\(?\w+\)?s?|\{\{.*|<[^>]*>?|\[redacted.*
      |\{[A-Za-z_][\w.\[\]'"]*\}  # a field (`{self.password}`, `{PASS}`), not any braced value
      |.*<[\w\-]*>?  # ending in a placeholder (`sk-test-<32 hex>` cut at its space)
      |x{3,}|\*{3,}|\.{3,}|changeme|change_me|replace_?me|password\d*|pass|passwd|pwd|secret
      |example|dummy
      |test|none|null|nil|true|false|todo|fixme|placeholder|redacted|your[_\-].*
      |.*\(.*|(?:os\.environ|os\.getenv|process\.env|env|settings|config|secrets|vars)\b.*
    )$"""
)
# Unquoted code: `self.token`, `get_key(...)`, `os.environ[...]`, `Optional[str]`, `user_password`.
CODE = re.compile(r"[A-Za-z_][A-Za-z_]*(?:\.[A-Za-z_]\w*)*(?:[\[(].*)?")
TYPE_NAME = re.compile(r"[A-Z][A-Za-z]*|str|bytes|int|float|bool|dict|list|tuple|object")
NOT_A_VALUE = re.compile(r".*://.*|[~.]{0,2}/.*|[^@\s]+@[^@\s]+\.[a-z]{2,}")
SECRET_FILE_NAMES = {
    ".npmrc",
    ".pypirc",
    ".netrc",
    ".pgpass",
    ".git-credentials",
    ".envrc",
    "credentials.json",
    "kubeconfig",
}
SECRET_FILE_SUFFIXES = (
    ".pem", ".key", ".p12", ".pfx", ".keystore", ".jks", ".tfvars", ".tfvars.json", ".kubeconfig",
)  # fmt: skip
SSH_KEY_PREFIXES = ("id_rsa", "id_ed25519", "id_ecdsa", "id_dsa")
# `credentials*` files hold credentials, unless they are the code that handles them.
SOURCE_SUFFIXES = (".py", ".js", ".mjs", ".ts", ".go", ".rb", ".java", ".kt", ".rs", ".cs", ".php")
# Files that are secret by where they are: `<dir>/<name>`.
SECRET_FILE_PLACES = {(".docker", "config.json"), (".kube", "config"), (".aws", "credentials")}
ENV_TEMPLATES = (".example", ".sample", ".template", ".dist")

# Counts one secret of the given kind and returns its marker.
_Marker = Callable[[str], str]


def entropy(value: str) -> float:
    """Shannon entropy in bits per character: random keys score high, words and `xxxx` low."""
    counts = Counter(value)
    return -sum(n / len(value) * math.log2(n / len(value)) for n in counts.values())


def redact(text: str) -> tuple[str, dict[str, int]]:
    """Return `text` with every secret replaced by `[REDACTED:<kind>]`, and the count per kind."""
    counts: Counter[str] = Counter()

    def marker(kind: str) -> str:
        counts[kind] += 1
        return f"[REDACTED:{kind}]"

    text = PRIVATE_KEY.sub(lambda m: marker("private_key"), text)
    for kind, pattern in rules():
        text = pattern.sub(lambda m, k=kind: _whole_token(m, k, marker), text)  # type: ignore[misc]
    text = CLI_PASSWORD.sub(lambda m: _cli_password(m, marker), text)
    text = URL_PASSWORD.sub(lambda m: _url_password(m, marker), text)
    text = ASSIGNMENT.sub(lambda m: _assignment(m, marker), text)
    return text, dict(counts)


MARKER = re.compile(r"\[REDACTED:([a-z0-9_]+)\]")


def marker_counts(text: str) -> dict[str, int]:
    """How many values of each kind a text had redacted, wherever that happened."""
    return dict(Counter(MARKER.findall(text)))


def redact_value(value: Any) -> tuple[Any, dict[str, int]]:
    """`redact` applied to every string inside a JSON-like value (dict keys stay as they are)."""
    counts: Counter[str] = Counter()

    def walk(item: Any) -> Any:
        if isinstance(item, str):
            clean, found = _redact_short(item) if len(item) <= SHORT else redact(item)
            counts.update(found)
            return clean
        if isinstance(item, dict):
            return {k: walk(v) for k, v in item.items()}
        if isinstance(item, list | tuple):
            return [walk(v) for v in item]
        return item

    return walk(value), dict(counts)


SHORT = 4096
"""Strings this long or shorter are redacted once per process: a workflow's context is stored
whole at every transition (the plan, each step's result), so the same strings came through
every pattern again at every step."""


@functools.lru_cache(maxsize=4096)
def _redact_short(text: str) -> tuple[str, dict[str, int]]:
    return redact(text)


@functools.cache
def rules() -> list[tuple[str, re.Pattern[str]]]:
    """Every whole-token rule, in the order applied: ours, detect-secrets', the extra formats."""
    return [*PATTERNS, *detect_secrets_rules(), *EXTRA_PATTERNS]


def detect_secrets_rules() -> list[tuple[str, re.Pattern[str]]]:
    """The regexes of detect-secrets' vendor plugins, each with its plugin's kind of secret.

    Importing detect-secrets costs half a second (it imports `requests` for its verifiers, and
    every plugin module), paid by every process that redacts: each submission, each engine run.
    Its 36 patterns compile in milliseconds, so their sources are kept in the user's cache,
    keyed by a hash of the installed package's source (an upgrade or an edit misses the cache)
    and stored with a hash of their own (a damaged file is read from the package again).
    """
    key = _package_hash()
    if key is not None:
        cached = _cached_rules(key)
        if cached is not None:
            return cached
    found = _package_rules()
    if key is not None:
        _keep_rules(key, found)
    return found


def _package_rules() -> list[tuple[str, re.Pattern[str]]]:
    """Read from the installed package's own plugin modules (never a baseline's custom plugin
    paths, which could name any file)."""
    from detect_secrets import plugins
    from detect_secrets.plugins.base import RegexBasedDetector
    from detect_secrets.util.importlib import import_types_from_package

    found = import_types_from_package(
        plugins,
        filter=lambda x: (
            not (
                isinstance(x, type)
                and issubclass(x, RegexBasedDetector)
                and x is not RegexBasedDetector
                and x.__name__ not in SKIPPED_PLUGINS
            )
        ),
    )
    out: list[tuple[str, re.Pattern[str]]] = []
    for plugin in sorted(set(found), key=lambda p: p.__name__):
        kind = re.sub(r"[^a-z0-9]+", "_", plugin.secret_type.lower()).strip("_")
        kind = KIND_ALIASES.get(kind, kind)
        out += [(kind, regex) for regex in plugin.denylist]
    return out


# Bumped when what is cached, or how it is chosen, changes.
_RULES_FORMAT = "1"
_KIND = re.compile(r"[a-z0-9_]+")


def _package_hash() -> str | None:
    """sha256 of every source file of the installed detect-secrets, with our choice of its
    plugins; None when it cannot be read (the package is then imported as before)."""
    import hashlib
    import importlib.util
    import sys
    from pathlib import Path

    spec = importlib.util.find_spec("detect_secrets")  # a top-level name: nothing is imported
    if spec is None or not spec.submodule_search_locations:
        return None
    root = Path(next(iter(spec.submodule_search_locations)))
    digest = hashlib.sha256(
        repr((_RULES_FORMAT, sys.version_info[:2], sorted(SKIPPED_PLUGINS), KIND_ALIASES)).encode()
    )
    try:
        for path in sorted(root.rglob("*.py")):
            digest.update(f"\0{path.relative_to(root).as_posix()}\0".encode())
            digest.update(path.read_bytes())
    except OSError:
        return None
    return digest.hexdigest()


def _rules_file(key: str) -> Path:
    from supervisor.core import resources

    return resources.cache_dir() / "redaction" / f"detect-secrets-{key[:32]}.json"


def _cached_rules(key: str) -> list[tuple[str, re.Pattern[str]]] | None:
    import hashlib
    import json

    try:
        data = json.loads(_rules_file(key).read_text())
        rules = data["rules"]
        if (
            data["key"] != key
            or data["sha256"] != hashlib.sha256(json.dumps(rules).encode()).hexdigest()
            or not rules
        ):
            return None
        out = []
        for kind, pattern, flags in rules:
            if not (isinstance(kind, str) and _KIND.fullmatch(kind) and isinstance(flags, int)):
                return None
            out.append((kind, re.compile(pattern, flags)))
        return out
    except (OSError, ValueError, KeyError, TypeError, re.error):
        return None


def _keep_rules(key: str, rules: list[tuple[str, re.Pattern[str]]]) -> None:
    """Written whole or not at all; a cache that cannot be written is only slower."""
    import hashlib
    import json
    import os

    table = [[kind, p.pattern, p.flags] for kind, p in rules]
    text = json.dumps(
        {
            "key": key,
            "rules": table,
            "sha256": hashlib.sha256(json.dumps(table).encode()).hexdigest(),
        }
    )
    target = _rules_file(key)
    partial = target.with_name(f".{target.name}.{os.getpid()}.partial")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        partial.write_text(text)
        partial.replace(target)
    except OSError:
        with contextlib.suppress(OSError):
            partial.unlink(missing_ok=True)


def _whole_token(m: re.Match[str], kind: str, marker: _Marker) -> str:
    """Replace the secret inside a match: its `secret` group, a capturing group that follows
    some context (`://user:(password)@`), or the match less surrounding quotes and separators."""
    start, end = m.span()
    if "secret" in m.re.groupindex and m.group("secret"):
        start, end = m.span("secret")
    else:
        for i in range(1, m.re.groups + 1):
            if m.group(i) and m.start(i) > m.start() and len(m.group(i)) >= 6:
                start, end = m.span(i)
                break
    text = m.string
    while start < end and text[start] in SEPARATORS:
        start += 1
    while end > start and text[end - 1] in SEPARATORS:
        end -= 1
    if start == end or "REDACTED" in text[start:end]:
        return m.group(0)
    return text[m.start() : start] + marker(kind) + text[end : m.end()]


SEPARATORS = " \t\r\n\"'=:"


def _cli_password(m: re.Match[str], marker: _Marker) -> str:
    secret = m.group("secret")
    if secret.startswith("[REDACTED") or _is_reference(secret) or PLACEHOLDER.match(secret):
        return m.group(0)
    start, end = m.span("secret")
    return m.string[m.start() : start] + marker("password") + m.string[end : m.end()]


def _url_password(m: re.Match[str], marker: _Marker) -> str:
    password = m.group(2)
    if password.startswith("[REDACTED") or _is_reference(password) or PLACEHOLDER.match(password):
        return m.group(0)
    user = m.group(1).rsplit("/", 1)[-1].rstrip(":")
    if password == user:  # `postgres:postgres@`, `guest:guest@`: a default, not a secret
        return m.group(0)
    return m.group(1) + marker("url_password") + m.group(3)


def _assignment(m: re.Match[str], marker: _Marker) -> str:
    quoted = m.group("quote") is not None
    name, value = m.group("name"), m.group("quoted") if quoted else m.group("bare")
    words = name_words(name)
    if not is_secret_name(words):
        return m.group(0)
    # An unquoted value may run into the closing bracket of a call or a literal: keep those.
    core = value if quoted else value.rstrip(")]}")
    if _is_not_a_literal(core, quoted, m):
        return m.group(0)
    kind = _kind(words, core)
    if kind is None:
        return m.group(0)
    q = m.group("quote") or ""
    return f"{m.group('lead')}{q}{marker(kind)}{value[len(core) :]}{q}"


def _is_not_a_literal(value: str, quoted: bool, m: re.Match[str]) -> bool:
    """Placeholders, references and code: what a name is bound to when no secret is in the text."""
    if value.startswith("[REDACTED") or PLACEHOLDER.match(value) or NOT_A_VALUE.fullmatch(value):
        return True
    if quoted or not CODE.fullmatch(value):
        return False
    # A bare word is a literal only in a `.env` line (`DB_PASSWORD=<word>`) or a YAML mapping
    # (`password: <word>`) whose value is not a Python annotation (`password: SecretStr`).
    line_start = m.group("start") is not None
    sep = m.group("sep").strip()
    if line_start and sep == "=" and m.group("sep") == "=":
        return False
    if line_start and sep == ":" and "." not in value and "[" not in value and "(" not in value:
        return bool(TYPE_NAME.fullmatch(value))
    return True


def _kind(words: list[str], value: str) -> str | None:
    joined = "".join(words)
    if ("awssecret" in joined or "secretaccesskey" in joined) and re.fullmatch(
        r"[A-Za-z0-9/+=]{40}", value
    ):
        return "aws_secret_access_key"
    if looks_random(value):
        return "high_entropy_secret"
    if "password" in joined or "passwd" in joined:
        return "password" if len(value) >= 8 else None
    return None


def looks_random(value: str) -> bool:
    """16+ characters mixing letters and digits, at 3.5+ bits/char: a key, not a word or a path."""
    return (
        len(value) >= 16
        and any(c.isdigit() for c in value)
        and any(c.isalpha() for c in value)
        and entropy(value) >= 3.5
    )


def name_words(name: str) -> list[str]:
    """`AWS_SECRET_ACCESS_KEY`, `x-api-key`, `clientSecret`, `db.password` -> lowercase words."""
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name)
    return [w for w in re.split(r"[_.\-]+", spaced.lower()) if w]


def is_secret_name(words: list[str]) -> bool:
    """True for names like `api_key`, `DB_PASSWORD`, `authToken`, `auth`; not `author`, `tokens`."""
    if any(NOT_SECRET_WORDS.match(w) for w in words):
        return False
    if "auth" in words or "authorization" in words:
        return True
    joined = "".join(words)
    if len(words) > 1 and words[-1] == "key" and KEY_QUALIFIERS.intersection(words[:-1]):
        return True
    return any(w in joined for w in SECRET_WORDS) and "tokens" not in words


def _is_reference(value: str) -> bool:
    return bool(re.fullmatch(r"\$\{[^}]*\}|\$[A-Za-z_]\w*|<[^>]*>|\{\{.*\}\}|\*+|x{3,}", value))


def is_secret_file(path: str) -> bool:
    """Files never packed into a prompt, whatever a role's patterns say: their whole point is
    to hold credentials, so redacting them line by line would be a bet we need not make."""
    pure = PurePosixPath(path.replace("\\", "/"))
    name = pure.name.lower()
    if name == ".env" or name.startswith(".env."):
        return not name.endswith(ENV_TEMPLATES)
    if (pure.parent.name.lower(), name) in SECRET_FILE_PLACES:
        return True
    if name.startswith("credentials") and not name.endswith(SOURCE_SUFFIXES):
        return True
    # `id_*` without an extension is an SSH key (`id_rsa`, `id_ed25519_sk`); `id_rsa.pub` is not
    # secret, and `id_utils.py` is code.
    if name.startswith("id_") and "." not in name:
        return True
    return (
        name in SECRET_FILE_NAMES
        or name.endswith(SECRET_FILE_SUFFIXES)
        or (name.startswith(SSH_KEY_PREFIXES) and not name.endswith(".pub"))
    )
