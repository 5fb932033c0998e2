"""Small operations on one container through the Docker SDK: its workspace volume, its removal,
its exit, its logs and its start time. Each tolerates an engine that has gone away (requests'
errors are OSErrors): the caller decides what a lost engine means (engine_loss.py).
"""

from __future__ import annotations

import contextlib
import time
from datetime import datetime
from typing import TYPE_CHECKING, Any

from supervisor.core.parsing import strip_ansi
from supervisor.sandbox import engine_loss

if TYPE_CHECKING:
    from collections.abc import Callable


def workspace_volume(client: Any, container: Any) -> Any:
    """The overlay volume mounted as a container's workspace, if it has one."""
    import docker.errors

    for mount in container.attrs.get("Mounts") or []:
        name = str(mount.get("Name") or "")
        if mount.get("Type") == "volume" and name.startswith("supervisor-ws-"):
            with contextlib.suppress(docker.errors.NotFound, docker.errors.APIError):
                return client.volumes.get(name)
    return None


def _remove_volume(volume: Any) -> None:
    """An overlay volume is only mount options: removing it leaves its directories alone."""
    import docker.errors

    if volume is not None:
        with contextlib.suppress(docker.errors.APIError, OSError):
            volume.remove(force=True)


def remove_container(container: Any) -> None:
    import docker.errors

    # OSError: the engine gone (requests' errors are OSErrors); resume's clean-up finds it.
    # v: its anonymous volumes too (a Node workspace's node_modules, sandbox/node_modules.py).
    with contextlib.suppress(docker.errors.APIError, OSError):
        container.remove(force=True, v=True)


def _wait_exit(container: Any, timeout: float) -> int | None:
    """The container's exit code once it exits, or None if it still runs after `timeout` s."""
    import requests.exceptions

    try:
        status = container.wait(timeout=timeout)
    except (requests.exceptions.Timeout, requests.exceptions.ConnectionError) as e:
        if engine_loss.lost(e):  # reset, refused: not the read timeout a unix socket says so
            raise
        return None
    return int(status.get("StatusCode", -1))


def _kill(container: Any) -> None:
    import docker.errors

    with contextlib.suppress(docker.errors.APIError, OSError):
        container.kill()


def _stream(
    container: Any,
    sink: Callable[[str], None] | None,
    last: list[float],
    since: float | None = None,
) -> None:
    import docker.errors

    try:
        for chunk in container.logs(stream=True, follow=True, since=since):
            last[0] = time.monotonic()
            if sink is not None:
                sink(strip_ansi(chunk.decode("utf-8", "replace")))
    except (docker.errors.APIError, OSError, ValueError):
        return


def started_at(attrs: dict[str, Any]) -> float | None:
    """The container's start as a Unix time (Docker's RFC 3339 with nanoseconds), or None."""
    text = str((attrs.get("State") or {}).get("StartedAt") or "")
    if not text or text.startswith("0001-"):
        return None
    head, _, frac = text.rstrip("Z").partition(".")
    zone = "+00:00"
    for sign in ("+", "-"):
        if sign in frac:
            frac, _, rest = frac.partition(sign)
            zone = sign + rest
    stamp = datetime.fromisoformat(f"{head}.{(frac or '0')[:6].ljust(6, '0')}{zone}")
    return stamp.timestamp()


def remove_labelled(
    client: Any, labels: dict[str, str], kept: set[str], kept_steps: set[str]
) -> list[str]:
    """Remove the containers and overlay volumes matching `labels`, but those kept for adoption
    (`kept` containers, the volumes of `kept_steps`); the ids of the containers removed."""
    import docker.errors

    from supervisor.sandbox.labels import LABEL_STEP_ID

    filters: dict[str, str | list[str] | bool] = {"label": [f"{k}={v}" for k, v in labels.items()]}
    removed: list[str] = []
    for container in client.containers.list(all=True, filters=filters, ignore_removed=True):
        if container.id not in kept:
            remove_container(container)
            removed.append(str(container.id))
    with contextlib.suppress(docker.errors.APIError):
        for volume in client.volumes.list(filters=filters):
            if (volume.attrs.get("Labels") or {}).get(LABEL_STEP_ID) not in kept_steps:
                _remove_volume(volume)
    return removed


class OverlayMountError(Exception):
    """A copy-on-write workspace the engine would not mount: the run falls back to a full one."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def probe_output(client: Any, image: str, script: str, **extra: Any) -> str:
    """What `script` prints in a throw-away container of `image` with no network, as nobody, on
    a read-only root with a tmpfs home: how the supervisor asks an image what it holds (CLI and
    toolchain versions) without trusting anything in it with more. `extra`: run options."""
    output = client.containers.run(
        image,
        ["sh", "-c", script],
        remove=True,
        network_mode="none",
        user="65534:65534",
        environment={"HOME": "/tmp"},
        tmpfs={"/tmp": "rw,exec"},
        read_only=True,
        **extra,
    )
    return bytes(output).decode()
