"""What a person is told when the Docker engine or the sandbox image is missing: where the client
looked (DOCKER_HOST, or the default socket) and the fix that fits how supervisor was installed
(supervisor.core.resources.setup_command), so a pipx user is not sent to a script they do not
have."""

from __future__ import annotations

from supervisor.core.errors import SandboxError
from supervisor.core.resources import setup_command

DEFAULT_SOCKET = "/var/run/docker.sock"
"""Where the Docker client looks when DOCKER_HOST is not set."""


def unreachable(cause: object, docker_host: str | None) -> SandboxError:
    if docker_host:
        return SandboxError(
            f"The Docker engine is not reachable at DOCKER_HOST={docker_host}: {cause}",
            "Start the engine DOCKER_HOST names, or unset DOCKER_HOST to use the local one; "
            "check with `docker info`.",
        )
    return SandboxError(
        f"The Docker engine is not reachable at unix://{DEFAULT_SOCKET} (DOCKER_HOST is not "
        f"set): {cause}",
        f"Start it: `{setup_command()}` installs and starts one (or `sudo systemctl start "
        "docker`); check with `docker info`.",
    )


def build_hint() -> str:
    return f"Run `{setup_command()}`, which builds it (offline too)."
