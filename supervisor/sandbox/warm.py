"""Prepared worker containers: created and started before their step, their prompt given late.

Why: between one step's end and the next CLI's first model request, the user waited for the next
container to be created and started and for the CLI in it to start up (4 to 6 s of a ~5 s gap
on the 2-core benchmark host), none of which depends on the step's outcome. A prepared run is
that container, started while the previous step still runs: the CLI starts up under its
late-prompt flags (workers/base.py `late_prompt_flags`) and blocks on a FIFO in its run folder;
the step writes its prompt into the FIFO once it has one.

A prepared run is used only for the very container its step would have created: `fingerprint`
covers everything a container is made of (image, argv, environment, login and run files,
network, limits, the workspace's base commit); the step compares it with its own RunSpec's and
discards the preparation on any difference. Nothing crosses between runs: the container mounts
its own worktree and its own run folder, like any other. A prepared run carries its task's
labels and LABEL_PREPARED (its token) instead of a step id, which it cannot know: once a step
uses it, the step's row names the container, and a `resume` after a crash adopts it by that
(sandbox/adopt.py); unused, the task's clean-up removes it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import hashlib
import json
import os
import re
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from supervisor.core.errors import Terminated
from supervisor.sandbox import run_files
from supervisor.sandbox.docker import (
    ENTRYPOINT,
    RUN_PREFIX,
    RunResult,
    RunSpec,
    folder_files,
    remove_container,
    run_dir_label,
)
from supervisor.workspace import overlay

if TYPE_CHECKING:
    from supervisor.sandbox.docker import DockerSandbox

LABEL_PREPARED = "supervisor.prepared"
TOKEN = re.compile(r"[0-9a-f]{12}")
BACKGROUND_SHARES = 128
"""A prepared CLI that is likely thrown away starts up at an eighth of the CPU weight of the
running step's containers (Docker's default 1024), so that on a small host it takes the idle
CPU, not the step's; raised to the default once its step uses it. A likely one starts at the
default (workflow/lookahead.py `foreground`)."""
FOREGROUND_SHARES = 1024
# The CLI starts at once, reading a pipe that `cat` fills once the FIFO gets its writer.
LATE_ENTRYPOINT = ENTRYPOINT.replace(
    'exec "$@" < /run/supervisor/stdin', 'cat /run/supervisor/stdin | "$@"'
)
assert LATE_ENTRYPOINT != ENTRYPOINT


def fingerprint(spec: RunSpec, base: str) -> str:
    """What the container is made of, as one digest; two specs with the same one make the same
    container, whatever the role it was made for. Not in it: the prompt and the run's files
    that the command line does not name (both given late, `run`; a file it names, say an
    output schema, may be read at start), the labels, callbacks and the record folder (the
    step's bookkeeping), and the worktree's path (its content is `base`)."""
    named = {n: t for n, t in spec.run_files.items() if any(n in arg for arg in spec.argv)}
    made_of = {
        "base": base,
        "argv": spec.argv,
        "image": spec.image,
        "env": sorted(spec.env.items()),
        "home_files": _digests(spec.home_files),
        "run_files": sorted(named.items()),
        "network": spec.network,
        "writable_layer": spec.writable_layer,
        "route": dataclasses.asdict(spec.route) if spec.route is not None else None,
        "timeout": spec.timeout,
        "idle_timeout": spec.idle_timeout,
        "memory": spec.memory,
        "cpus": spec.cpus,
        "home_dir": str(spec.home_dir) if spec.home_dir is not None else None,
    }
    return hashlib.sha256(json.dumps(made_of, sort_keys=True).encode()).hexdigest()


def _digests(files: dict[str, bytes]) -> list[tuple[str, str]]:
    return sorted((name, hashlib.sha256(content).hexdigest()) for name, content in files.items())


@dataclass
class Warm:
    """A started container waiting for its prompt."""

    container: Any
    volume: Any
    run_dir: Path
    fingerprint: str
    late_flags: tuple[str, ...]
    shares: int = BACKGROUND_SHARES
    spec: RunSpec | None = None
    """What it was made of: its fingerprint again once its workspace was brought to a later
    commit (workflow/steps/advance.py)."""

    @property
    def fifo(self) -> Path:
        return self.run_dir / "stdin"

    def rebased(self, base: str) -> None:
        """Its workspace now shows `base`: it is the container a step starting there makes."""
        if self.spec is not None:
            self.fingerprint = fingerprint(self.spec, base)


def new_token() -> str:
    return os.urandom(6).hex()


def record_dir(labels: dict[str, str], token: str) -> Path:
    """Where the credential proxy records a prepared run: named for its task like every run
    folder (the task's clean-up finds it) and for its token (an adoption finds it)."""
    name = f"{RUN_PREFIX}{run_dir_label(labels)}-recordprep-{token}"
    return Path(tempfile.gettempdir()) / name


def prepare(
    sandbox: DockerSandbox,
    spec: RunSpec,
    base: str,
    late_flags: tuple[str, ...],
    token: str,
    shares: int = BACKGROUND_SHARES,
) -> Warm | None:
    """Create and start `spec`'s container with its CLI under `late_flags`, its prompt to come,
    at CPU weight `shares`; None when the sandbox cannot (then the step runs as before)."""
    if not late_flags or spec.home_dir is not None:
        return None
    view = overlay.view_for(spec.worktree)
    if view is not None and view.mode != "overlay":
        return None  # a view that fell back to a full tree: the plain path handles it
    labels = {**spec.labels, LABEL_PREPARED: token}
    late = dataclasses.replace(spec, argv=[*spec.argv, *late_flags], labels=labels)
    run_dir = Path(tempfile.mkdtemp(prefix=f"{RUN_PREFIX}{run_dir_label(spec.labels)}-"))
    container = volume = None
    try:
        os.mkfifo(run_dir / "stdin", 0o600)
        for name, text in folder_files(spec).items():
            (run_dir / name).write_text(text, encoding="utf-8")
        run_files.private_for_container(run_dir)
        run_files.write_private_home(run_dir / "home", spec.home_files)
        if view is None:
            run_files.own_for_container(spec.worktree)
        container, volume = sandbox.create(
            late, run_dir, view, entrypoint=LATE_ENTRYPOINT, cpu_shares=shares
        )
        container.start()
    except Exception:  # any failure: nothing prepared, nothing left
        _remove(container, volume, run_dir)
        return None
    return Warm(container, volume, run_dir, fingerprint(spec, base), late_flags, shares, spec)


def run(sandbox: DockerSandbox, warm: Warm, spec: RunSpec, prompt: str) -> RunResult | None:
    """Give the prepared container its prompt and run it to the end, as `sandbox.run` would;
    None (the preparation discarded) when its CLI is no longer waiting. The prompt goes first,
    its CPU weight raised after: the Docker call is no part of the wait for the first request.
    A stop (`Terminated`) once its step's row names it leaves it running with its run folder
    (its CLI's home), for `resume` to adopt."""
    left = False
    try:
        for name, text in spec.run_files.items():  # the step's own (its role's output schema)
            run_files.replace_file(warm.run_dir, name, text)
        fd = writer(warm.fifo, lambda: _alive(warm.container))
        if fd is None:  # no reader and none to come: the container is gone
            discard(warm)
            return None
        try:
            with os.fdopen(fd, "wb") as pipe:
                pipe.write(prompt.encode())
        except BrokenPipeError:
            discard(warm)
            return None
        if spec.on_start is not None:  # its step's row names it at once: from here on a kill
            try:  # leaves it for `resume` to adopt
                spec.on_start(str(warm.container.id))
            except BaseException:
                discard(warm)
                raise
        if warm.shares < FOREGROUND_SHARES:
            _foreground(warm.container)
        try:
            return sandbox.finish_prepared(warm.container, spec, warm.volume)
        except Terminated:
            left = spec.keep
            raise
    finally:
        if not left:
            shutil.rmtree(warm.run_dir, ignore_errors=True)


READER_WAIT_S = 10.0
"""How long a prompt waits for its CLI's pipe to be opened, the container running: a container
started just before its step (its preparation finishing as the step before ended) may not have
reached its `cat` yet on a loaded host; that is no reason to throw it away."""
ALIVE_EVERY_S = 0.25


def writer(fifo: Path, alive: Callable[[], bool], wait: float = READER_WAIT_S) -> int | None:
    """The FIFO opened for a blocking write once its reader has opened it; None when it is gone,
    or no reader came within `wait` seconds or while `alive()` (asked every ALIVE_EVERY_S)."""
    deadline = time.monotonic() + wait
    asked = time.monotonic()
    while True:
        try:
            fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError as e:
            if e.errno == errno.ENOENT:
                return None
            if e.errno != errno.ENXIO:  # ENXIO: no reader yet
                raise
        else:
            os.set_blocking(fd, True)
            return fd
        now = time.monotonic()
        if now >= deadline:
            return None
        if now - asked >= ALIVE_EVERY_S:
            if not alive():
                return None
            asked = now
        time.sleep(0.005)


def _alive(container: Any) -> bool:
    """Created or running: its CLI's pipe may still be opened."""
    import docker.errors

    try:
        container.reload()
    except (docker.errors.APIError, OSError):  # OSError: the engine gone (engine_loss.py)
        return False
    return str(container.status) in ("created", "running")


def _foreground(container: Any) -> None:
    import docker.errors

    with contextlib.suppress(docker.errors.APIError, OSError):
        container.update(cpu_shares=FOREGROUND_SHARES)


def discard(warm: Warm) -> None:
    """The container, its workspace volume and its run folder; the worktree is its owner's."""
    _remove(warm.container, warm.volume, warm.run_dir)


def _remove(container: Any, volume: Any, run_dir: Path) -> None:
    import docker.errors

    if container is not None:
        remove_container(container)
    if volume is not None:
        with contextlib.suppress(docker.errors.APIError, OSError):
            volume.remove(force=True)
    shutil.rmtree(run_dir, ignore_errors=True)
