"""Orchestrator-enforced gates: the supervisor runs the checks itself, never the worker.

A gate runs its command in a container with no network at all, on a throwaway worktree of the
candidate commit, so a test suite can neither reach out nor change what gets committed. Its root
file system is the container's own writable layer, discarded with it, and its cache homes are on
tmpfs: tools that write caches next to their packages or under $HOME work, and nothing persists.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from supervisor.core.config import Limits
    from supervisor.sandbox.base import Sandbox

FEEDBACK_TAIL = 6000
CACHE_HOMES = {
    "XDG_CACHE_HOME": "/tmp/home/.cache",
    "npm_config_cache": "/tmp/home/.npm",
    "YARN_CACHE_FOLDER": "/tmp/home/.yarn-cache",
    "PIP_CACHE_DIR": "/tmp/home/.cache/pip",
}
"""Cache homes under the container's tmpfs HOME: written freely, gone with the run."""
GATE_IDENTITY = {
    "GIT_AUTHOR_NAME": "supervisor gate",
    "GIT_AUTHOR_EMAIL": "gate@supervisor.invalid",
    "GIT_COMMITTER_NAME": "supervisor gate",
    "GIT_COMMITTER_EMAIL": "gate@supervisor.invalid",
}
"""A neutral git identity: a project's tests that commit in a scratch repository (changesets'
release tests do) need one, as its CI sets one; the user's own never enters a sandbox."""


@dataclass(frozen=True)
class GateResult:
    name: str
    command: str
    passed: bool
    exit_code: int
    output: str
    duration: float

    def feedback(self) -> str:
        tail = self.output[-FEEDBACK_TAIL:]
        return (
            f"The '{self.name}' gate (`{self.command}`) failed with exit code {self.exit_code}. "
            f"Its output (last {len(tail)} characters):\n{tail}"
        )


def run_gate(
    sandbox: Sandbox,
    name: str,
    command: str,
    worktree: Path,
    limits: Limits,
    labels: dict[str, str],
    on_output: Callable[[str], None] | None = None,
    image: str | None = None,
) -> GateResult:
    from supervisor.sandbox.docker import RunSpec

    result = sandbox.run(
        RunSpec(
            argv=["sh", "-c", command],
            worktree=worktree,
            image=image,
            network="none",
            writable_layer=True,
            env={**CACHE_HOMES, **GATE_IDENTITY},
            timeout=limits.gate_timeout_seconds,
            memory=limits.gate_memory,
            cpus=limits.gate_cpus,
            labels=labels,
            on_output=on_output,
        )
    )
    output = result.stdout + (("\n" + result.stderr) if result.stderr else "")
    return GateResult(
        name=name,
        command=command,
        passed=result.exit_code == 0,
        exit_code=result.exit_code,
        output=output,
        duration=result.duration,
    )
