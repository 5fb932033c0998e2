"""A Docker engine of a spec's own, to restart under a running task (issue 50, item 2).

A second `dockerd` beside the machine's: its own socket, exec root and pid file in a short
temporary folder (a Unix socket's path is capped at 108 bytes), no bridge and no firewall rules
(the sandbox's containers have no network), so crashing it disturbs no other spec and no other
engine. It runs in a network namespace of its own (`unshare --net`): a daemon started without a
bridge deletes the host's `docker0` as it starts, which took the machine's engine's default
network away from every image build beside it. Its data root holds the sandbox image, which
costs ~33 s to load on the 2-core machine (`docker save | docker load` of 1.3 GB): the data
root is kept between runs under /var/tmp, loaded again only when the machine's image changes,
and held under a file lock while a daemon runs on it (two checkouts' runs take turns).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import IO, TYPE_CHECKING

from e2e_support import IMAGE, missing

if TYPE_CHECKING:
    from collections.abc import Iterator

CACHE = Path(os.environ.get("SUPERVISOR_SPEC_ENGINE_CACHE", "/var/tmp/supervisor-spec-engine"))
START_S = 60.0
"""The longest wait for the daemon to answer (a bound: it answers in about a second)."""
LOCK_S = 300.0
"""The longest wait for another run's daemon on the kept data root to end."""


class Engine:
    """One daemon on the kept data root; `crash` kills it with its containers, `start` again."""

    def __init__(self, data_root: Path) -> None:
        self.data_root = data_root
        self.run_dir = Path(tempfile.mkdtemp(prefix="sv-dockerd-", dir="/tmp"))
        self.socket = self.run_dir / "docker.sock"
        self.host = f"unix://{self.socket}"
        self.exec_root = self.run_dir / "exec"
        self.pidfile = self.run_dir / "docker.pid"
        self.log = self.run_dir / "dockerd.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                ["unshare", "--net", "--", "dockerd", "--host", self.host,
                 "--data-root", str(self.data_root), "--exec-root", str(self.exec_root),
                 "--pidfile", str(self.pidfile),
                 "--bridge", "none", "--iptables=false", "--ip-masq=false",
                 "--ip-forward=false", "--shutdown-timeout", "1"],
                stdout=log, stderr=log, start_new_session=True,
            )  # fmt: skip
        deadline = time.monotonic() + START_S
        while not self.answers():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.crash()
                missing(f"a second Docker daemon did not start: {self.log.read_text()[-800:]}")
            time.sleep(0.1)

    def answers(self) -> bool:
        done = subprocess.run(
            ["docker", "-H", self.host, "version", "--format", "{{.Server.Version}}"],
            capture_output=True,
            check=False,
        )
        return done.returncode == 0

    def docker(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["docker", "-H", self.host, *args], capture_output=True, text=True, check=False
        )

    def crash(self) -> None:
        """SIGKILL the daemon, then its containers' shims (what a crash or a host's OOM killer
        leaves: the containers die with it); both by the pids this daemon owns."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        mine = str(self.exec_root)
        for pid in _pids():
            with contextlib.suppress(OSError):
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
                if mine.encode() in cmdline:  # its containerd, its shims
                    os.kill(pid, signal.SIGKILL)
        # Where nothing reaps orphans (this machine's pid 1), the killed containerd stays a
        # zombie that its pid file still names: the next daemon would wait on it.
        (self.exec_root / "containerd" / "containerd.pid").unlink(missing_ok=True)
        self.proc = None

    def remove_containers(self) -> None:
        listed = self.docker("ps", "-aq").stdout.split()
        if listed:
            self.docker("rm", "-f", *listed)

    def close(self) -> None:
        """Its containers removed, then stopped as a service manager would (SIGTERM): a stop
        unmounts what it mounted on the kept data root, a crash leaves it mounted."""
        if self.proc is not None and self.answers():
            self.remove_containers()
            self.proc.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=START_S)
        self.crash()
        subprocess.run(["umount", str(self.data_root)], capture_output=True, check=False)
        subprocess.run(
            ["umount", "-R", "-l", str(self.exec_root)], capture_output=True, check=False
        )
        shutil.rmtree(self.run_dir, ignore_errors=True)


def _pids() -> list[int]:
    return [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()]


def _image_id() -> str:
    done = subprocess.run(
        ["docker", "image", "inspect", IMAGE, "--format", "{{.Id}}"],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        missing(f"sandbox image {IMAGE} not built (run scripts/setup.sh)")
    return done.stdout.strip()


def _locked(path: Path) -> IO[str]:
    handle = path.open("a")
    deadline = time.monotonic() + LOCK_S
    while True:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return handle
        except BlockingIOError:
            if time.monotonic() > deadline:
                handle.close()
                missing(f"another run held {path} for {LOCK_S:.0f} s")
            time.sleep(0.5)


@contextlib.contextmanager
def own_engine() -> Iterator[Engine]:
    """A started daemon of the caller's own, with the sandbox image; ended after."""
    if os.geteuid() != 0 or shutil.which("dockerd") is None:
        missing("a second Docker daemon needs root and dockerd")
    wanted = _image_id()
    CACHE.mkdir(parents=True, exist_ok=True)
    lock = _locked(CACHE / "lock")
    engine = Engine(CACHE / "data")
    try:
        marker = CACHE / "image-id"
        fresh = marker.exists() and marker.read_text().strip() == wanted
        if not fresh:
            shutil.rmtree(CACHE / "data", ignore_errors=True)
            marker.unlink(missing_ok=True)
        engine.start()
        engine.remove_containers()  # a run killed before its clean-up
        if not fresh:
            _load_image(engine)
            marker.write_text(wanted)
        yield engine
    finally:
        engine.close()
        lock.close()


def _load_image(engine: Engine) -> None:
    save = subprocess.Popen(["docker", "save", IMAGE], stdout=subprocess.PIPE)
    load = subprocess.run(
        ["docker", "-H", engine.host, "load"],
        stdin=save.stdout,
        capture_output=True,
        text=True,
        check=False,
    )
    save.wait()
    if save.returncode != 0 or load.returncode != 0:
        missing(f"could not load {IMAGE} into the second daemon: {load.stderr[-500:]}")
