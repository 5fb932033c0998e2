"""What the engine needs from a sandbox: DockerSandbox in use, a stand-in in fast specs."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from pathlib import Path

    from supervisor.guard.placeholders import Injection
    from supervisor.sandbox.docker import RunResult, RunSpec
    from supervisor.sandbox.egress import Route


class Sandbox(Protocol):
    image: str
    client: Any
    """The Docker client, for project images; only DockerSandbox has one."""

    def run(self, spec: RunSpec) -> RunResult: ...
    def route(
        self,
        base_url: str,
        injection: Injection | None = None,
        port: int | None = None,
        *,
        placeholder: str | None = None,
        vendor: str | None = None,
        record_dir: Path | None = None,
        task: str | None = None,
    ) -> Route: ...
    def close_route(self, route: Route) -> None: ...
    def base_image_id(self) -> str: ...
    def close(self) -> None: ...
