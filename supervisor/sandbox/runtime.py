"""The Docker engine's OCI runtimes: runc, or gVisor (`runsc`, `runsc-net`) when the user chose it
(`sandbox.runtime`, `sandbox.worker_runtime`; scripts/register-runsc.sh registers them).

A runtime the engine does not know is found before a task starts, not at its first gate after
the model answers were paid for.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from supervisor.core.errors import SandboxError

if TYPE_CHECKING:
    import docker


def missing(explanation: str) -> SandboxError:
    return SandboxError(
        f"The container runtime set in `sandbox.runtime`/`sandbox.worker_runtime` is not "
        f"registered with the Docker engine ({explanation}).",
        "Run scripts/setup.sh (it installs gVisor's runsc and registers `runsc` and `runsc-net` "
        "in /etc/docker/daemon.json), or set the runtime back to `runc` in "
        "~/.supervisor/config.yaml; `supervisor doctor` lists the runtimes the engine knows.",
    )


def known(client: docker.DockerClient) -> list[str]:
    return sorted((client.info().get("Runtimes") or {}).keys())


def require(client: docker.DockerClient, *names: str) -> None:
    registered = known(client)
    for name in names:
        if name not in registered:
            raise missing(f"{name!r} is not among {', '.join(registered)}")
