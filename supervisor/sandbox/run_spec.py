"""What one container run is (`RunSpec`) and what it gave back (`RunResult`), with the fixed parts
of every worker container: its entrypoint, its paths, its loopback hosts.

Apart from docker.py, which runs them, so that the modules that only describe a run (the worker
spec, the stand-in sandbox, adoption) do not read the engine's code.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from supervisor.sandbox import model_relay, run_files

if TYPE_CHECKING:
    from collections.abc import Callable

    from supervisor.sandbox.egress import Route

WORKSPACE = run_files.WORKSPACE
RUN_DIR = "/run/supervisor"
HOME = "/tmp/home"
# A container without a network has Docker's networking disabled: no network-key hook (a re-exec
# of dockerd, ~0.07 CPU-s and a tenth of a second before its process starts), its own namespace
# with only loopback; Docker then writes no /etc/hosts, so `localhost` is given here.
LOOPBACK_HOSTS = "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"

# Seeds the per-run home from the image's Go build cache (when it has one) and the read-only copy
# of the login files, then runs the CLI with the prompt on stdin: a prompt given as an argument
# would be capped by the kernel's argument limit.
ENTRYPOINT = (
    model_relay.START + 'mkdir -p "$HOME" && chmod 700 "$HOME" && '
    f'if [ -d {run_files.GO_BUILD_CACHE} ]; then mkdir -p "$HOME/.cache" && '
    f'cp -R {run_files.GO_BUILD_CACHE} "$HOME/.cache/"; fi; '
    "if [ -d /run/supervisor/home ]; then cp -R "
    '/run/supervisor/home/. "$HOME/" && chmod -R u+w,go-rwx "$HOME"; fi; '
    + model_relay.WAIT
    + 'exec "$@" < /run/supervisor/stdin'
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
    """The workers' network for a route that is not a socket; "none": no network at all."""
    route: Route | None = None
    """A worker's route to its model API: a socket route makes the container networkless, its
    socket's folder bound in and the relay started (model_relay.py); a network route joins
    `network`, its alias resolving to the gateway."""
    writable_layer: bool = False
    """A writable root file system on the container's own copy-on-write layer, discarded with the
    container: for gates, whose tools write caches next to their packages (vitest's
    tsbuildinfo in node_modules, jest and babel caches, bytecode in the venv). The image makes
    its dependency folders writable; nothing written there outlives the run."""
    timeout: float = 600
    idle_timeout: float | None = None
    memory: str = "2g"
    cpus: float = 1.0
    labels: dict[str, str] = field(default_factory=dict)
    on_output: Callable[[str], None] | None = None
    on_start: Callable[[str], None] | None = None
    home_dir: Path | None = None
    """A kept private home bound as $HOME (a continued session, workflow/continuation.py);
    None: a fresh home in the container's tmpfs, gone with it."""
    record_dir: Path | None = None
    """Where the credential proxy records this run's model exchanges (the proxy contract): its
    `activity` file tells a CLI waiting on a slow but live model stream from a hung one."""
    keep: bool = False
    """Leave the container (and its overlay volume) once it exited and was read: a worker's,
    removed by `remove_run` once its step's end is recorded (supervisor/state/after_record.py);
    until then a `resume` after a kill adopts it instead of buying its answers again."""


def folder_files(spec: RunSpec) -> dict[str, str]:
    """What a run folder holds besides the prompt and login files: the run's files, and the
    model relay's script for a run with a socket route."""
    if spec.route is not None and spec.route.socket_dir:
        return {**spec.run_files, model_relay.RELAY_FILE: model_relay.RELAY}
    return spec.run_files


def repo_label(repo: Path) -> str:
    return hashlib.sha256(str(repo.resolve()).encode()).hexdigest()[:16]
