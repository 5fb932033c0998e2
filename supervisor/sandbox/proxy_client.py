"""A supervisor's side of the proxy daemon (proxyd.py): find it, or start it, and talk to it.

The control socket lives in the user's state folder (~/.supervisor/proxyd/, 0700; the socket
0600), so only the same user reaches it: the keys cross it and nothing else. A path too long for
a Unix socket (deep test folders) moves to a private folder under the temp directory named after
the state folder's hash. Lookup and start happen under one lock file, so supervisors starting at
the same moment share one daemon.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import json
import os
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from supervisor.core.errors import SandboxError

if TYPE_CHECKING:
    from collections.abc import Iterator

    from supervisor.guard.placeholders import Injection

PROTOCOL = 1
"""The control protocol's version, in the socket's name: newer code never talks to an older
daemon."""
START_TIMEOUT = 20.0
_MAX_SOCKET_PATH = 100  # sun_path holds 108 bytes, with its terminating NUL


def socket_path() -> Path:
    """Where this user's daemon listens; the protocol version is in the name."""
    from supervisor.core.config import user_dir

    folder = user_dir() / "proxyd"
    name = f"v{PROTOCOL}-{code_version()}.sock"
    path = folder / name
    if len(str(path)) > _MAX_SOCKET_PATH:
        digest = hashlib.sha256(str(user_dir().resolve()).encode()).hexdigest()[:16]
        folder = Path(tempfile.gettempdir()) / f"supervisor-proxyd-{os.getuid()}-{digest}"
        path = folder / name
    _private_folder(folder)
    return path


@functools.cache
def code_version() -> str:
    """A digest of the daemon's own code: an upgraded supervisor starts a daemon of its own
    beside one still serving an older version's runs (which ends when they do)."""
    here = Path(__file__).parent
    digest = hashlib.sha256()
    names = (
        "proxyd.py",
        "credproxy.py",
        "proxy_upstream.py",
        "model_paths.py",
        "proxy_record.py",
        "egress.py",
    )
    for name in names:
        digest.update((here / name).read_bytes())
    return digest.hexdigest()[:10]


def _private_folder(folder: Path) -> None:
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = os.lstat(folder)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        raise SandboxError(
            f"The proxy daemon's folder {folder} is not a folder of this user's.",
            f"Remove {folder}; the supervisor recreates it.",
        )
    if stat.S_IMODE(info.st_mode) & 0o077:
        folder.chmod(0o700)


class ProxyClient:
    """One control connection; requests from several threads take turns on it."""

    def __init__(self, sock: socket.socket, path: Path) -> None:
        self.sock = sock
        self.path = path
        self._stream = sock.makefile("rwb")
        self._lock = threading.Lock()

    @classmethod
    def connect(cls, path: Path | None = None) -> ProxyClient:
        path = path or socket_path()
        client = _try(path)
        if client is not None:
            return client
        with start_lock(path):
            client = _try(path)
            if client is None:
                _start(path)
                deadline = time.monotonic() + START_TIMEOUT
                while client is None and time.monotonic() < deadline:
                    time.sleep(0.05)
                    client = _try(path)
        if client is None:
            raise SandboxError(
                f"The credential proxy daemon did not start (socket {path}).",
                f"See {path.parent / 'proxyd.log'} for why.",
            )
        return client

    def request(self, message: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            self._stream.write(json.dumps(message).encode() + b"\n")
            self._stream.flush()
            line = self._stream.readline()
        if not line:
            raise SandboxError(
                "The credential proxy daemon closed the connection.",
                f"See {self.path.parent / 'proxyd.log'}; the next run starts a new one.",
            )
        answer: dict[str, Any] = json.loads(line)
        if not answer.get("ok"):
            raise SandboxError(str(answer.get("error")), str(answer.get("hint") or ""))
        return answer

    def open_route(
        self,
        *,
        base_url: str,
        injection: Injection,
        placeholder: str,
        vendor: str | None,
        record_dir: Path | None,
        gateway: str,
        bridge: str | None,
        port: int | None = None,
        task: str | None = None,
        socket: bool = False,
    ) -> dict[str, Any]:
        """`socket`: the route listens on a Unix socket for a networkless worker
        (model_relay.py), not on `gateway`."""
        return self.request(
            {
                "op": "open",
                "base_url": base_url,
                "injection": {
                    "header": injection.header,
                    "value": injection.value,
                    "query_param": injection.query_param,
                },
                "placeholder": placeholder,
                "vendor": vendor,
                "record_dir": str(record_dir) if record_dir is not None else None,
                "gateway": gateway,
                "bridge": bridge,
                "port": port,
                "task": task,
                "socket": socket,
                "ca_bundle": os.environ.get("SUPERVISOR_EXTRA_CA_BUNDLE"),
            }
        )

    def close_route(self, placeholder: str) -> None:
        self.request({"op": "close", "placeholder": placeholder})

    def close_orphans(self, task: str, keep: set[str]) -> int:
        """Close the task's routes whose supervisor died, but for those of the containers being
        adopted (`keep`): how many were closed."""
        answer = self.request({"op": "close_orphans", "task": task, "keep": sorted(keep)})
        return int(answer.get("closed") or 0)

    @classmethod
    def running(cls, path: Path | None = None) -> ProxyClient | None:
        """A client of the daemon if one runs; never starts one (cleaning up needs none)."""
        return _try(path or socket_path())

    def status(self) -> dict[str, Any]:
        return self.request({"op": "status"})

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._stream.close()
            self.sock.close()


@contextlib.contextmanager
def start_lock(path: Path) -> Iterator[None]:
    """Held while a daemon is looked for and started, and while one ends: never two daemons at
    one socket, and never one removing another's socket."""
    fd = os.open(f"{path}.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _try(path: Path) -> ProxyClient | None:
    """A client of the daemon at `path` if one answers with this protocol."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(str(path))
        client = ProxyClient(sock, path)
        if client.request({"op": "hello"}).get("protocol") == PROTOCOL:
            return client
    except (OSError, ValueError, SandboxError):
        pass
    sock.close()
    return None


def _start(path: Path) -> None:
    """The daemon, detached: its own session (a signal to the supervisor's process group does
    not reach it) and, through the shell that starts it and exits, not this process's child."""
    import supervisor

    root = str(Path(supervisor.__file__).resolve().parent.parent)  # this code, not another copy
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}
    log = path.parent / "proxyd.log"
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600)
    try:
        subprocess.run(
            ["sh", "-c", '"$@" &', "sh", sys.executable, "-m", "supervisor.sandbox.proxyd",
             "--socket", str(path)],
            stdin=subprocess.DEVNULL, stdout=fd, stderr=fd, start_new_session=True,
            check=True, timeout=30, cwd="/", env=env,
        )  # fmt: skip
    finally:
        os.close(fd)
