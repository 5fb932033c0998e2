"""The credential proxy as its own process: one per user and host, outliving any supervisor.

Why (issue 25): when the proxy lived inside the supervisor, a SIGKILL of the supervisor broke every
model request in flight, so the workers `resume` meant to adopt failed and ran again, paying for
their model answers twice. This daemon holds the keys, the per-run routes (one credential-adding
listener each, credproxy.py) and their streams; a supervisor only registers and closes routes over
a Unix control socket. It is started by the first supervisor that needs it (detached: its own
session), found by the next at the socket (socket_path(), whose name carries the protocol version,
so newer code never talks to an older daemon), and ends itself when it has had no route and no
control connection for SUPERVISOR_PROXYD_IDLE seconds.

A route belongs to the control connection that opened it. When that connection drops (its
supervisor was killed), the route stays for the container that may still be using it, until a
resuming supervisor re-attaches it (the same placeholder: adopt.py keeps it in the container's
labels) or it has carried nothing for its `grace` seconds. Keys travel over the control socket
only (0600, in a 0700 folder of the user's): never in a file, an argument or the environment.

Run: `python -m supervisor.sandbox.proxyd --socket PATH` (proxy_client.py does).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from supervisor.core.errors import SupervisorError
from supervisor.sandbox import model_relay
from supervisor.sandbox.credproxy import CredentialProxy, Injection, Upstream
from supervisor.sandbox.proxy_client import PROTOCOL, start_lock

IDLE_ENV = "SUPERVISOR_PROXYD_IDLE"
DEFAULT_IDLE = 120.0
DEFAULT_GRACE = 3600.0
LOCAL_ALIAS = "model-api.supervisor.internal"


@dataclass
class _Route:
    proxy: CredentialProxy
    bridge: str
    owner: int | None
    """The control connection that holds it; None once that one dropped (orphaned)."""
    grace: float
    task: str | None = None
    """The task whose run it serves (repository and workflow), so that a resume, start or
    abandon of that task closes what its dead supervisor left (`close_orphans`)."""
    folder: Path | None = None
    """The folder of its Unix socket, for a networkless worker (model_relay.py); None: it
    listens on the workers' network."""


class Daemon:
    def __init__(self, path: Path, idle: float) -> None:
        self.path = path
        self.idle = idle
        self.routes: dict[str, _Route] = {}
        self.firewalls: dict[str, Any] = {}
        self.controls = 0
        self.quiet_since = time.monotonic()
        self._lock = threading.RLock()
        self._ids = iter(range(1, 1 << 62))
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)

    def listen(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        old = os.umask(0o177)
        try:
            self.server.bind(str(self.path))
        finally:
            os.umask(old)
        self.server.listen(64)
        self.server.settimeout(1.0)
        self.inode = self.path.stat().st_ino

    def serve(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except TimeoutError:
                self._sweep()
                if self._should_end():
                    return
                continue
            with self._lock:
                self.controls += 1
                owner = next(self._ids)
            threading.Thread(target=self._control, args=(conn, owner), daemon=True).start()

    def _should_end(self) -> bool:
        """Idle long enough: checked again under the start lock, so a supervisor starting a
        daemon at this moment never has its fresh socket removed by this one."""
        with self._lock:
            busy = self.routes or self.controls
            if busy:
                self.quiet_since = time.monotonic()
                return False
            if time.monotonic() - self.quiet_since < self.idle:
                return False
        with start_lock(self.path), self._lock:
            if self.routes or self.controls:
                return False
            self.server.close()
            with contextlib.suppress(OSError):
                if self.path.stat().st_ino == self.inode:
                    self.path.unlink()
        return True

    def _sweep(self) -> None:
        """Orphaned routes that carried nothing for their grace time are closed."""
        now = time.monotonic()
        with self._lock:
            stale = [
                p
                for p, r in self.routes.items()
                if r.owner is None
                and r.proxy.connections == 0
                and now - r.proxy.last_activity > r.grace
            ]
        for placeholder in stale:
            self._close(placeholder)

    def _control(self, conn: socket.socket, owner: int) -> None:
        try:
            with conn, conn.makefile("rwb") as stream:
                for line in stream:
                    try:
                        answer = self._handle(json.loads(line), owner)
                    except SupervisorError as e:
                        answer = {"ok": False, "error": e.message, "hint": e.hint}
                    except (ValueError, KeyError, TypeError) as e:
                        answer = {"ok": False, "error": f"bad request: {e}", "hint": ""}
                    stream.write(json.dumps(answer).encode() + b"\n")
                    stream.flush()
        except OSError:
            pass
        finally:
            with self._lock:
                self.controls -= 1
                for route in self.routes.values():
                    if route.owner == owner:
                        route.owner = None
                        route.proxy.last_activity = time.monotonic()

    def _handle(self, request: dict[str, Any], owner: int) -> dict[str, Any]:
        op = request["op"]
        if op == "hello":
            return {"ok": True, "protocol": PROTOCOL, "pid": os.getpid()}
        if op == "open":
            return self._open(request, owner)
        if op == "close":
            self._close(str(request["placeholder"]))
            return {"ok": True}
        if op == "close_orphans":
            keep = {str(p) for p in request.get("keep") or []}
            with self._lock:
                orphans = [
                    p
                    for p, r in self.routes.items()
                    if r.owner is None and r.task == request["task"] and p not in keep
                ]
            for placeholder in orphans:
                self._close(placeholder)
            return {"ok": True, "closed": len(orphans)}
        if op == "status":
            with self._lock:
                return {
                    "ok": True,
                    "pid": os.getpid(),
                    "routes": {p[-6:]: r.proxy.port for p, r in self.routes.items()},
                    "tasks": {p[-6:]: r.task for p, r in self.routes.items()},
                    "controls": self.controls,
                }
        raise ValueError(f"unknown op {op!r}")

    def _open(self, request: dict[str, Any], owner: int) -> dict[str, Any]:
        placeholder = str(request["placeholder"])
        record_dir = Path(request["record_dir"]) if request.get("record_dir") else None
        attached = self._attach(placeholder, owner, record_dir)
        if attached is not None:
            return attached
        injection = Injection(**request["injection"])
        upstream = Upstream.from_url(request["base_url"], ca_bundle=request.get("ca_bundle"))
        upstream.connect().close()  # a wrong base_url stops here, its host named
        with self._lock:
            attached = self._attach(placeholder, owner, record_dir)
            if attached is not None:
                return attached
            folder = (
                model_relay.route_folder(self.path, placeholder) if request.get("socket") else None
            )
            bridge = "" if folder is not None else str(request.get("bridge") or "")
            firewall = self._firewall(bridge)
            bind = (
                folder / model_relay.SOCKET_NAME
                if folder is not None
                else (str(request["gateway"]), int(request.get("port") or 0))
            )
            proxy = CredentialProxy(
                upstream,
                injection,
                bind,
                [LOCAL_ALIAS],
                placeholder=placeholder,
                vendor=request.get("vendor"),
                prefix=_prefix(request["base_url"]),
                record_dir=record_dir,
            )
            try:
                firewall.allow(proxy.port)
            except SupervisorError:
                proxy.close()
                raise
            grace = float(request.get("grace") or DEFAULT_GRACE)
            task = str(request["task"]) if request.get("task") else None
            self.routes[placeholder] = _Route(proxy, bridge, owner, grace, task, folder)
            return {"ok": True, "port": proxy.port, "warning": firewall.warning, **_where(folder)}

    def _attach(
        self, placeholder: str, owner: int, record_dir: Path | None
    ) -> dict[str, Any] | None:
        """A resuming supervisor takes over its adopted run's route, which kept serving."""
        with self._lock:
            existing = self.routes.get(placeholder)
            if existing is None:
                return None
            existing.owner = owner
            existing.proxy.record_to(record_dir)
            where = _where(existing.folder)
            return {"ok": True, "port": existing.proxy.port, "attached": True, **where}

    def _firewall(self, bridge: str) -> Any:
        """The host firewall of the sandbox network's bridge; none for a route on loopback (the
        proxy's own specs), whose traffic no chain may ever drop."""
        from supervisor.sandbox.egress import HostFirewall

        if bridge not in self.firewalls:
            self.firewalls[bridge] = HostFirewall(bridge) if bridge else _NoFirewall()
        return self.firewalls[bridge]

    def _close(self, placeholder: str) -> None:
        with self._lock:
            route = self.routes.pop(placeholder, None)
        if route is None:
            return
        route.proxy.close()  # waits for the run's last exchange to be recorded
        if route.folder is not None:
            model_relay.remove(route.folder)
        with self._lock, contextlib.suppress(SupervisorError):
            self.firewalls[route.bridge].revoke(route.proxy.port)


def _where(folder: Path | None) -> dict[str, str]:
    return {"socket_dir": str(folder)} if folder is not None else {}


class _NoFirewall:
    warning: str | None = None

    def allow(self, port: int) -> None:
        return None

    def revoke(self, port: int) -> None:
        return None


def _prefix(base_url: str) -> str:
    from urllib.parse import urlsplit

    return urlsplit(base_url).path.rstrip("/")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="The supervisor's credential proxy daemon.")
    parser.add_argument("--socket", required=True, type=Path)
    args = parser.parse_args(argv)
    idle = float(os.environ.get(IDLE_ENV) or DEFAULT_IDLE)
    daemon = Daemon(args.socket, idle)
    daemon.listen()
    print(f"proxyd {os.getpid()} listening on {args.socket}", flush=True)
    daemon.serve()
    with daemon._lock:
        for placeholder in list(daemon.routes):
            daemon._close(placeholder)
    print(f"proxyd {os.getpid()} idle for {idle:.0f} s: ended", flush=True)


if __name__ == "__main__":
    main()
