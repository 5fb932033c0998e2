"""The one small interface every AI CLI adapter implements.

An adapter knows how to build its CLI's command line and environment, and how to read what the CLI
printed into one `WorkerResult`. Running it (sandbox, time limits, streaming) is not its business.
"""

from __future__ import annotations

import re
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar

from supervisor.workers import ratelimit


@dataclass
class WorkerResult:
    """What a worker run produced, in the same shape for every CLI."""

    ok: bool
    text: str
    error: str | None = None
    error_kind: str | None = None  # api | auth | rate_limit | cli | max_turns
    api_status: int | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    session_id: str | None = None
    num_turns: int | None = None
    permission_denials: list[Any] = field(default_factory=list)
    retry_after: float | None = None
    """Seconds until a rate limit resets, when the CLI passed it on."""


@dataclass(frozen=True)
class Invocation:
    """A command to run inside the sandbox: argv, environment, and the prompt fed on stdin."""

    argv: list[str]
    env: dict[str, str]
    home_files: dict[str, bytes] = field(default_factory=dict)
    """CLI settings files for the run's private home (e.g. ~/.gemini/settings.json)."""


class WorkerAdapter(ABC):
    name: ClassVar[str]
    binary: ClassVar[str]
    supports_json_schema: ClassVar[bool] = False
    budget_flag: ClassVar[str | None] = None
    """The CLI's own spend limit flag, given the dollars a run may still spend (budgets.py)."""

    @abstractmethod
    def build(
        self,
        *,
        model: str,
        base_url: str,
        workdir: str,
        extra_flags: list[str],
        api_key_env: str | None = None,
        schema_path: str | None = None,
    ) -> Invocation:
        """The command and environment; the prompt arrives on stdin, so its size is not capped
        by the kernel's argument limit. `api_key_env` names the variable holding the key (None:
        the CLI's own login files); `schema_path` is the output schema inside the container."""

    @abstractmethod
    def parse_output(self, stdout: str, stderr: str, exit_code: int) -> WorkerResult: ...

    def progress(self, line: str) -> str | None:
        """A one-line account of a streamed output line for the terminal, or None to hide it."""
        return line

    late_prompt_flags: ClassVar[tuple[str, ...]] = ()
    """Flags under which the CLI starts up fully and only then reads its prompt from stdin, so
    that a run can be prepared (started) before its prompt is known (sandbox/warm.py); empty:
    the CLI reads its prompt before it starts up, and cannot be prepared."""

    def late_prompt(self, prompt: str) -> str:
        """The prompt as stdin under `late_prompt_flags`."""
        return prompt


_ADDRESS = re.compile(r"\b[a-z][\w+.-]*://\S+|\b[\w-]+(?:\.[\w-]+)+(?::\d+)?")
"""URLs and host names: the gateway `model-api.supervisor.internal:34015` in a CLI's message
says neither "401" nor "internal" (a port that held 401 once sent a task down the path of
refused credentials instead of the retries of an API that is down)."""

_AUTH = (
    "401",
    "unauthorized",
    "authenticat",
    "invalid_api_key",
    "api key not valid",
    "not logged in",
    "permission_denied",
)
_RATE_LIMIT = ("429", "rate limit", "rate_limit", "resource_exhausted", "quota")
_API = (
    "500",
    "502",
    "503",
    "internal",
    "unable to connect",
    "connection",
    "high demand",
    "overloaded",
    "timed out",
    "stream disconnected",
    "error sending request",
    "econnreset",
    "socket hang up",
    "fetch failed",
)


def _says(text: str, words: tuple[str, ...]) -> bool:
    """A status code only as a number of its own (not inside 34015), a word anywhere."""
    return any(re.search(rf"(?<!\d){w}(?!\d)", text) if w.isdigit() else w in text for w in words)


def classify_message(text: str, status: int | None = None) -> str:
    """An error kind from what a CLI said, for the CLIs that only say it in words."""
    said = _ADDRESS.sub(" ", text.lower())
    if status in (401, 403) or _says(said, _AUTH):
        return "auth"
    if status == 429 or _says(said, _RATE_LIMIT):
        return "rate_limit"
    if (status is not None and status >= 500) or _says(said, _API):
        return "api"
    return "cli"


def retry_after_seconds(text: str, now: float | None = None) -> float | None:
    """A reset time the CLI passed on from the API, if it did, read with its units (see
    ratelimit.py; the proxy's record of the API's own headers comes first, in the worker step)."""
    return ratelimit.from_text(text, time.time() if now is None else now)
