"""The worker adapters, one per AI CLI, and the registry that picks one by name.

The registry lives here, above the adapters, rather than in base.py below them: each adapter
imports base.py, so a lookup in base.py made base and every adapter import one another. The
adapters are imported when one is asked for, so importing a worker type costs none of them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from supervisor.core.errors import ConfigError

if TYPE_CHECKING:
    from supervisor.workers.base import WorkerAdapter


def known_clis() -> tuple[str, ...]:
    """The CLI names an adapter exists for (what a role's `cli:` may name)."""
    from supervisor.workers.claude import ClaudeAdapter
    from supervisor.workers.codex import CodexAdapter
    from supervisor.workers.gemini import GeminiAdapter

    return tuple(a.name for a in (ClaudeAdapter, CodexAdapter, GeminiAdapter))


def adapter_for(cli: str) -> WorkerAdapter:
    """A fresh adapter for the CLI named `cli` (`claude`, `codex` or `gemini`)."""
    from supervisor.workers.claude import ClaudeAdapter
    from supervisor.workers.codex import CodexAdapter
    from supervisor.workers.gemini import GeminiAdapter

    adapters: dict[str, type[WorkerAdapter]] = {
        a.name: a for a in (ClaudeAdapter, CodexAdapter, GeminiAdapter)
    }
    try:
        return adapters[cli]()
    except KeyError:
        raise ConfigError(
            f"Unknown CLI '{cli}'. Known: {', '.join(adapters)}.",
            "Set `cli:` in the role or .supervisor/config.yaml to one of those.",
        ) from None
