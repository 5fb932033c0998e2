"""Which requests the credential proxy forwards: each vendor's model endpoints, nothing else.

Why: the proxy adds a real key to what it forwards, so every path it forwards is a path the worker
can use that key on. A worker (or a prompt-injected model driving it) that could reach
`GET /admin/keys`, `DELETE /v1/files/...` or, through `..` and `//` tricks, another path or host
behind the API's front end, would hold the key in all but name. So a request target is checked as
raw bytes (no decoding: an encoded slash or dot is refused, never interpreted), then matched
against the short list of endpoints the real CLIs call, verified by running each against the
scripted API (supervisor/fakeapi) through this proxy:

- claude: `HEAD /` first (a connectivity probe, answered here with 404, never forwarded), then
  `POST /v1/messages?beta=true`, and `POST /v1/messages/count_tokens?beta=true`.
- codex: `POST /v1/responses` (its base URL ends in `/v1`); `/v1/chat/completions` and
  `GET /v1/models` for the other wire API and its model list.
- gemini: `POST /v1beta/models/<model>:streamGenerateContent?alt=sse`, `:generateContent`,
  `:countTokens`.

The base URL may carry a path prefix (`https://gateway/api/anthropic`): the list applies after it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import parse_qsl

VENDOR_OF_CLI = {"claude": "anthropic", "codex": "openai", "gemini": "gemini"}

_V1 = r"(?:/v1)?"  # an OpenAI base URL usually ends in /v1 itself; both spellings reach one path
ENDPOINTS: dict[str, tuple[tuple[str, re.Pattern[str]], ...]] = {
    "anthropic": (("POST", re.compile(r"/v1/messages(?:/count_tokens)?")),),
    "openai": (
        ("POST", re.compile(_V1 + r"/(?:responses|chat/completions)")),
        ("GET", re.compile(_V1 + r"/models")),
    ),
    "gemini": (
        (
            "POST",
            re.compile(
                r"/v1(?:beta|alpha)?/models/[A-Za-z0-9._-]+"
                r":(?:streamGenerateContent|generateContent|countTokens)"
            ),
        ),
    ),
}
QUERY_KEYS = {"anthropic": {"beta"}, "openai": set(), "gemini": {"alt", "key"}}

_SAFE = re.compile(r"/[A-Za-z0-9._:/-]*")
"""What a model endpoint's path is made of: no `%` (an encoded slash or dot is refused, never
decoded), no backslash, no `;` parameters, nothing a front end might read differently."""


@dataclass(frozen=True)
class Verdict:
    """`status` None: forward. Else the proxy answers itself with `status` and `reason`."""

    status: int | None
    reason: str = ""
    probe: bool = False
    """A connectivity probe (`HEAD /`), answered with 404 and not recorded as an exchange."""


FORWARD = Verdict(None)


def check(method: str, target: str, prefix: str, vendor: str | None) -> Verdict:
    """Whether `method target` may be forwarded for a route whose base URL path is `prefix`.
    `vendor` None: any vendor's model endpoints (a route opened without naming its CLI)."""
    path, _, query = target.partition("?")
    if not _SAFE.fullmatch(path) or "//" in path:
        return Verdict(400, f"request path {target[:200]!r} is not a plain path")
    segments = path.split("/")
    if any(s in (".", "..") for s in segments):
        return Verdict(400, f"request path {target[:200]!r} has a dot segment")
    prefix = prefix.rstrip("/")
    if prefix and not (path == prefix or path.startswith(prefix + "/")):
        return Verdict(403, f"path {path!r} is outside the API's base path {prefix!r}")
    rest = path[len(prefix) :] or "/"
    if rest == "/" and method in ("HEAD", "GET"):
        return Verdict(404, "not a model endpoint", probe=True)
    vendors = [vendor] if vendor is not None else list(ENDPOINTS)
    for name in vendors:
        for allowed_method, pattern in ENDPOINTS.get(name, ()):
            if method == allowed_method and pattern.fullmatch(rest):
                keys = {k for k, _ in parse_qsl(query, keep_blank_values=True)}
                odd = "%" in query or "#" in query
                if odd or not keys <= QUERY_KEYS[name]:
                    return Verdict(403, f"query {query[:200]!r} is not one the model API takes")
                return FORWARD
    return Verdict(
        403, f"{method} {path[:200]} is not a model endpoint the supervisor's proxy forwards"
    )
