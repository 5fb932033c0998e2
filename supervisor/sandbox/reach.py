"""What a person is told when the Docker engine or the sandbox image is missing: where the client
looked (DOCKER_HOST, or the default socket) and the fix that fits how supervisor was installed
(supervisor.core.resources.setup_command), so a pipx user is not sent to a script they do not
have."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from supervisor.core.errors import EngineUnreachableError
from supervisor.core.resources import setup_command

if TYPE_CHECKING:
    import docker

DEFAULT_SOCKET = "/var/run/docker.sock"
"""Where the Docker client looks when DOCKER_HOST is not set."""


def unreachable(cause: object, docker_host: str | None) -> EngineUnreachableError:
    if docker_host:
        return EngineUnreachableError(
            f"The Docker engine is not reachable at DOCKER_HOST={docker_host}: {cause}",
            "Start the engine DOCKER_HOST names, or unset DOCKER_HOST to use the local one; "
            "check with `docker info`.",
        )
    return EngineUnreachableError(
        f"The Docker engine is not reachable at unix://{DEFAULT_SOCKET} (DOCKER_HOST is not "
        f"set): {cause}",
        f"Start it: `{setup_command()}` installs and starts one (or `sudo systemctl start "
        "docker`); check with `docker info`.",
    )


def build_hint() -> str:
    return f"Run `{setup_command()}`, which builds it (offline too)."


UNIX_SOCKET_URL = "http+docker://"
"""How docker-py names a client's base URL when it talks to the engine over its Unix socket."""


def connect() -> docker.DockerClient:
    """A client for the local engine, or a SandboxError that says how to start one."""
    import docker
    import docker.errors

    try:
        client = docker.from_env(timeout=120)
        if client.api.base_url.startswith(UNIX_SOCKET_URL):
            # No proxy applies to a local socket, yet requests reads the whole environment for
            # one on every call: a third of a call's CPU (0.4 of 1.3 ms, measured on `ping`).
            client.api.trust_env = False
        client.ping()
    except docker.errors.DockerException as e:
        raise unreachable(e, os.environ.get("DOCKER_HOST")) from e
    return client
