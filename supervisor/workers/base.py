"""The one small interface every AI CLI adapter implements.

An adapter knows how to build its CLI's command line and environment, and how to read what the CLI
printed into one `WorkerResult`. Running it (sandbox, time limits, streaming) is not its business.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar


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


@dataclass(frozen=True)
class Invocation:
    """A command to run inside the sandbox: argv, environment, and the prompt fed on stdin."""

    argv: list[str]
    env: dict[str, str]


class WorkerAdapter(ABC):
    name: ClassVar[str]
    binary: ClassVar[str]
    supports_json_schema: ClassVar[bool] = False

    @abstractmethod
    def build(
        self, *, model: str, base_url: str, workdir: str, extra_flags: list[str]
    ) -> Invocation:
        """The command and environment; the prompt arrives on stdin, so its size is not capped
        by the kernel's argument limit."""

    @abstractmethod
    def parse_output(self, stdout: str, stderr: str, exit_code: int) -> WorkerResult: ...

    def progress(self, line: str) -> str | None:
        """A one-line account of a streamed output line for the terminal, or None to hide it."""
        return line


def adapter_for(cli: str) -> WorkerAdapter:
    from supervisor.errors import ConfigError
    from supervisor.workers.claude import ClaudeAdapter

    adapters: dict[str, type[WorkerAdapter]] = {ClaudeAdapter.name: ClaudeAdapter}
    try:
        return adapters[cli]()
    except KeyError:
        raise ConfigError(
            f"Unknown CLI '{cli}'. Known: {', '.join(adapters)}.",
            "Set `cli:` in the role or .supervisor/config.yaml to one of those.",
        ) from None
