"""What a sandbox holds instead of a key, and what the host puts back on the way out.

The placeholder and the injection are the two halves of the credential rule (credentials never
enter a sandbox): guard decides them, the credential proxy in sandbox/ only applies them, so
they live here, below the sandbox that uses them.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

PLACEHOLDER_PREFIX = "sk-supervisor-"


def new_placeholder() -> str:
    """What one run's sandbox gets in place of an API key: it tells a reader of `env` nothing,
    and opens only that run's route while the run lasts."""
    return PLACEHOLDER_PREFIX + secrets.token_hex(16)


@dataclass(frozen=True)
class Injection:
    """How the real credential goes onto each request. `header` None: the CLI authenticates
    with its own login files, and its auth headers pass through untouched."""

    header: str | None = None
    value: str = ""
    query_param: str | None = None
    """Gemini accepts `key=` in the query too: when the CLI put its key there, so does the proxy."""

    def __repr__(self) -> str:  # never print the value
        return f"Injection(header={self.header!r}, query_param={self.query_param!r})"
