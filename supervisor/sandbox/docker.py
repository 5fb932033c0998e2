"""Running workers and gates in Docker containers (the Docker SDK against a real engine).

Every container: only its worktree mounted read-write, a non-root user, a read-only root file
system, tmpfs /tmp, memory and CPU limits, and labels naming the repository and workflow so that a
container orphaned by a crash is found and removed on the next start or resume. Workers join the
internal egress network (see `egress.py`); gates get no network at all.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from supervisor.errors import CommandTimeoutError, SandboxError
from supervisor.parsing import strip_ansi
from supervisor.sandbox.egress import EgressRelay, Route, ensure_network

if TYPE_CHECKING:
    from collections.abc import Callable

    import docker

WORKSPACE = "/workspace"
RUN_DIR = "/run/supervisor"
HOME = "/tmp/home"
LABEL_REPO = "supervisor.repo"
LABEL_WORKFLOW = "supervisor.workflow"
LABEL_STEP = "supervisor.step"

# Seeds the per-run home from the read-only copy of the login files, then runs the CLI with the
# prompt on stdin: a prompt given as an argument would be capped by the kernel's argument limit.
ENTRYPOINT = (
    'mkdir -p "$HOME" && if [ -d /run/supervisor/home ]; then cp -R /run/supervisor/home/. '
    '"$HOME/"; fi; exec "$@" < /run/supervisor/stdin'
)


@dataclass
class RunResult:
    exit_code: int
    stdout: str
    stderr: str
    duration: float
    container_id: str


@dataclass
class RunSpec:
    """One container run."""

    argv: list[str]
    worktree: Path
    image: str | None = None
    """A project image built on the base image; None: the base sandbox image."""
    env: dict[str, str] = field(default_factory=dict)
    stdin_text: str = ""
    home_files: dict[str, bytes] = field(default_factory=dict)
    run_files: dict[str, str] = field(default_factory=dict)
    """Read-only files for the CLI under /run/supervisor (e.g. an output schema)."""
    network: str = "none"
    extra_hosts: dict[str, str] = field(default_factory=dict)
    timeout: float = 600
    idle_timeout: float | None = None
    memory: str = "2g"
    cpus: float = 1.0
    labels: dict[str, str] = field(default_factory=dict)
    on_output: Callable[[str], None] | None = None
    on_start: Callable[[str], None] | None = None


def repo_label(repo: Path) -> str:
    return hashlib.sha256(str(repo.resolve()).encode()).hexdigest()[:16]


def connect() -> docker.DockerClient:
    """A client for the local engine, or a SandboxError that says how to start one."""
    import docker
    import docker.errors

    try:
        client = docker.from_env(timeout=120)
        client.ping()
    except docker.errors.DockerException as e:
        raise SandboxError(
            f"The Docker engine is not reachable: {e}",
            "Start it (scripts/setup.sh does, or `sudo systemctl start docker`) and check "
            "`docker info`.",
        ) from e
    return client


class DockerSandbox:
    def __init__(self, image: str, egress_network: str, client: docker.DockerClient | None = None):
        self.image = image
        self.egress_network = egress_network
        self.client = client or connect()
        self._relay: EgressRelay | None = None

    def check_image(self) -> None:
        import docker.errors

        try:
            self.client.images.get(self.image)
        except docker.errors.ImageNotFound as e:
            raise SandboxError(
                f"The sandbox image '{self.image}' is not built.",
                "Run scripts/setup.sh, which builds it (offline too).",
            ) from e

    def base_image_id(self) -> str:
        return str(self.client.images.get(self.image).id)

    def route(self, base_url: str) -> Route:
        """Open the allowlisted path to one model API endpoint for worker containers."""
        if self._relay is None:
            self._relay = EgressRelay(ensure_network(self.client, self.egress_network))
        return self._relay.route(base_url)

    def close(self) -> None:
        if self._relay is not None:
            self._relay.close()
            self._relay = None

    def run(self, spec: RunSpec) -> RunResult:
        with tempfile.TemporaryDirectory(prefix="supervisor-run-") as run_dir:
            run_path = Path(run_dir)
            (run_path / "stdin").write_text(spec.stdin_text, encoding="utf-8")
            for name, text in spec.run_files.items():
                (run_path / name).write_text(text, encoding="utf-8")
            if spec.home_files:
                for rel, content in spec.home_files.items():
                    target = run_path / "home" / rel
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_bytes(content)
            _open_for_container(run_path)
            _open_for_container(spec.worktree)
            return self._run(spec, run_path)

    def _run(self, spec: RunSpec, run_path: Path) -> RunResult:
        import docker.errors

        started = time.monotonic()
        try:
            container = self.client.containers.create(
                spec.image or self.image,
                command=["sh", "-c", ENTRYPOINT, "sh", *spec.argv],
                working_dir=WORKSPACE,
                user=_container_user(),
                environment={"HOME": HOME, "PYTHONDONTWRITEBYTECODE": "1", **spec.env},
                volumes={
                    str(spec.worktree): {"bind": WORKSPACE, "mode": "rw"},
                    str(run_path): {"bind": RUN_DIR, "mode": "ro"},
                },
                network_mode="none" if spec.network == "none" else None,
                network=None if spec.network == "none" else spec.network,
                extra_hosts=spec.extra_hosts or None,
                read_only=True,
                tmpfs={"/tmp": "rw,exec,nosuid,size=1g"},
                mem_limit=spec.memory,
                nano_cpus=int(spec.cpus * 1e9),
                pids_limit=512,
                cap_drop=["ALL"],
                security_opt=["no-new-privileges"],
                labels=spec.labels,
                stdin_open=False,
                tty=False,
            )
        except docker.errors.ImageNotFound as e:
            raise SandboxError(
                f"The sandbox image '{self.image}' is not built.",
                "Run scripts/setup.sh, which builds it (offline too).",
            ) from e
        except docker.errors.APIError as e:
            raise SandboxError(
                f"Docker refused to create the container: {e.explanation or e}",
                "Check `docker info` and the sandbox settings in .supervisor/config.yaml.",
            ) from e
        try:
            if spec.on_start is not None:
                spec.on_start(container.id)
            container.start()
            exit_code = self._wait(container, spec, started)
            stdout = container.logs(stdout=True, stderr=False).decode("utf-8", "replace")
            stderr = container.logs(stdout=False, stderr=True).decode("utf-8", "replace")
        finally:
            remove_container(container)
        return RunResult(
            exit_code=exit_code,
            stdout=strip_ansi(stdout),
            stderr=strip_ansi(stderr),
            duration=time.monotonic() - started,
            container_id=container.id,
        )

    def _wait(self, container: Any, spec: RunSpec, started: float) -> int:
        """Stream output while waiting; end the container at the time or idle limit."""
        last_output = [time.monotonic()]
        streamer = threading.Thread(
            target=_stream, args=(container, spec.on_output, last_output), daemon=True
        )
        streamer.start()
        while True:
            container.reload()
            if container.status in ("exited", "dead"):
                state = container.attrs.get("State", {})
                streamer.join(timeout=5)
                if state.get("OOMKilled"):
                    raise SandboxError(
                        f"The container ran out of memory (limit {spec.memory}).",
                        "Raise worker_memory/gate_memory under limits: in the config.",
                    )
                return int(state.get("ExitCode", -1))
            now = time.monotonic()
            if now - started > spec.timeout:
                _kill(container)
                raise CommandTimeoutError(
                    f"The container ran past its time limit of {spec.timeout:.0f} s and was ended.",
                    "Raise step_timeout_seconds/gate_timeout_seconds under limits:, or split "
                    "the step.",
                )
            if spec.idle_timeout is not None and now - last_output[0] > spec.idle_timeout:
                _kill(container)
                raise CommandTimeoutError(
                    f"The worker printed nothing for {spec.idle_timeout:.0f} s and was ended as "
                    "hung.",
                    "Raise idle_timeout_seconds under limits: if the CLI is just slow.",
                )
            time.sleep(0.1)

    def remove_stale(self, labels: dict[str, str]) -> list[str]:
        """Remove containers left by a crashed run (matched by labels)."""
        filters = {"label": [f"{k}={v}" for k, v in labels.items()]}
        removed = []
        for container in self.client.containers.list(all=True, filters=filters):
            remove_container(container)
            removed.append(container.id)
        return removed


def remove_container(container: Any) -> None:
    import docker.errors

    with contextlib.suppress(docker.errors.NotFound, docker.errors.APIError):
        container.remove(force=True)


def _kill(container: Any) -> None:
    import docker.errors

    with contextlib.suppress(docker.errors.NotFound, docker.errors.APIError):
        container.kill()


def _stream(container: Any, sink: Callable[[str], None] | None, last: list[float]) -> None:
    import docker.errors

    try:
        for chunk in container.logs(stream=True, follow=True):
            last[0] = time.monotonic()
            if sink is not None:
                sink(strip_ansi(chunk.decode("utf-8", "replace")))
    except (docker.errors.APIError, OSError, ValueError):
        return


def _container_user() -> str:
    """The host user's ids, or `nobody` when the host user is root (workers never run as root)."""
    uid = os.getuid()
    return f"{uid}:{os.getgid()}" if uid != 0 else "65534:65534"


def _open_for_container(path: Path) -> None:
    """When the container runs as `nobody`, it needs write access to a root-owned worktree."""
    if os.getuid() != 0:
        return
    for root, dirs, files in os.walk(path):
        for name in dirs:
            _add_mode(Path(root, name), 0o777)
        for name in files:
            _add_mode(Path(root, name), 0o666)
    _add_mode(path, 0o777)


def _add_mode(path: Path, bits: int) -> None:
    with contextlib.suppress(OSError):
        if not path.is_symlink():
            path.chmod(path.stat().st_mode | bits)
