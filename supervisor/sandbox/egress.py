"""Egress allowlist for worker containers: an internal Docker network plus a relay on the host.

Worker containers join a Docker network created with `internal=True`: the engine gives it no route
out, so nothing is reachable but the bridge's own gateway address on the host. For each allowed
model API endpoint the supervisor listens on that gateway address and relays raw TCP to the
endpoint. The container reaches an endpoint under its own host name (mapped to the gateway in the
container's /etc/hosts), so TLS is end-to-end and its certificate check still holds; every other
destination has no route at all. Traffic from the network to the host itself is limited to the
relay's ports by an iptables chain, so that services on the host are not reachable either.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import re
import shlex
import socket
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit, urlunsplit

from supervisor import process
from supervisor.errors import SandboxError, SupervisorError

if TYPE_CHECKING:
    import docker

LOCAL_ALIAS = "model-api.supervisor.internal"
NETWORK_LABEL = "supervisor.egress"


@dataclass(frozen=True)
class Route:
    """How a container reaches one allowed endpoint."""

    url: str  # the base URL to give the CLI inside the container
    alias: str
    gateway: str


@dataclass(frozen=True)
class Network:
    gateway: str
    bridge: str


def ensure_network(client: docker.DockerClient, name: str) -> Network:
    """Create the internal network if needed; its gateway IP and bridge interface on the host."""
    import docker.errors

    try:
        network = client.networks.get(name)
    except docker.errors.NotFound:
        try:
            network = client.networks.create(
                name, driver="bridge", internal=True, labels={NETWORK_LABEL: "1"}
            )
        except docker.errors.APIError as e:
            if "already exists" not in str(e):
                raise SandboxError(
                    f"Cannot create the sandbox network '{name}': {e}",
                    "Check that the Docker engine is healthy (`docker network ls`).",
                ) from e
            network = client.networks.get(name)
    network.reload()
    if not network.attrs.get("Internal"):
        raise SandboxError(
            f"Docker network '{name}' exists but is not internal, so it would allow open egress.",
            f"Remove it (`docker network rm {name}`); the supervisor recreates it as internal.",
        )
    configs = network.attrs.get("IPAM", {}).get("Config") or []
    gateway = next((c.get("Gateway") for c in configs if c.get("Gateway")), None)
    if gateway is None:
        raise SandboxError(
            f"Docker network '{name}' has no gateway address.",
            f"Remove it (`docker network rm {name}`) so that it is recreated.",
        )
    options = network.attrs.get("Options") or {}
    bridge = options.get("com.docker.network.bridge.name") or f"br-{network.id[:12]}"
    return Network(gateway=str(gateway), bridge=bridge)


class HostFirewall:
    """An iptables chain that lets the sandbox network reach the host on the relay ports only.

    Without it, any service listening on all of the host's addresses would be reachable from a
    worker through the gateway address. Needs root; without iptables or root the sandbox still
    has no route out, and `warning` says what remains open.
    """

    def __init__(self, bridge: str) -> None:
        self.bridge = bridge
        self.chain = f"SUPERVISOR-{bridge[-12:]}".upper()
        self.warning: str | None = None
        try:
            self._setup()
        except SupervisorError as e:
            self.warning = (
                f"Could not restrict host access from the sandbox network ({e.message}); host "
                "services listening on all addresses stay reachable from workers."
            )

    def allow(self, port: int) -> None:
        if self.warning is None:
            self._iptables("-I", self.chain, "1", *self._rule(port))

    def revoke(self, port: int) -> None:
        """Remove this process's rule only: another supervisor may hold a rule for the same
        port number (its own relay, after ours closed), and must keep it."""
        if self.warning is None:
            while self._has(self.chain, self._rule(port)):
                self._iptables("-D", self.chain, *self._rule(port))

    @staticmethod
    def _rule(port: int) -> list[str]:
        owner = f"supervisor pid {os.getpid()}"
        return [
            "-p",
            "tcp",
            "--dport",
            str(port),
            "-m",
            "comment",
            "--comment",
            owner,
            "-j",
            "ACCEPT",
        ]

    def _setup(self) -> None:
        if self._iptables("-n", "-L", self.chain, check=False).returncode != 0:
            self._iptables("-N", self.chain)
            self._iptables(
                "-A",
                self.chain,
                "-m",
                "conntrack",
                "--ctstate",
                "ESTABLISHED,RELATED",
                "-j",
                "ACCEPT",
            )
            self._iptables("-A", self.chain, "-j", "DROP")
        jump = ["-i", self.bridge, "-j", self.chain]
        if not self._has("INPUT", jump):
            self._iptables("-I", "INPUT", "1", *jump)
        self._drop_orphaned_rules()

    def _drop_orphaned_rules(self) -> None:
        """A SIGKILLed supervisor cannot revoke its ports; left alone, a later host service on one
        of those numbers would be reachable from workers. Rules whose owner is gone are removed."""
        listing = self._iptables("-S", self.chain, check=False).stdout
        for line in listing.splitlines():
            owner = _OWNER.search(line)
            if owner is None or _alive(int(owner[1])):
                continue
            rule = shlex.split(line)[2:]  # "-A CHAIN <rule...>"
            self._iptables("-D", self.chain, *rule, check=False)

    def _has(self, chain: str, rule: list[str]) -> bool:
        return self._iptables("-C", chain, *rule, check=False).returncode == 0

    @staticmethod
    def _iptables(*args: str, check: bool = True) -> process.Completed:
        return process.run(["iptables", "-w", "5", *args], check=check, timeout=30)


class EgressRelay:
    """TCP relays from the network's gateway address to the allowed endpoints."""

    def __init__(self, network: Network) -> None:
        self.gateway = network.gateway
        self.firewall = HostFirewall(network.bridge)
        self._listeners: dict[tuple[str, int], tuple[socket.socket, int, threading.Thread]] = {}
        self._lock = threading.Lock()

    def route(self, base_url: str) -> Route:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise SandboxError(
                f"Model API URL '{base_url}' is not an http(s) URL.",
                "Set `base_url` for the CLI in .supervisor/config.yaml to a full http(s) URL.",
            )
        host = parts.hostname
        port = parts.port or (443 if parts.scheme == "https" else 80)
        listen_port = self._listen(host, port)
        alias = LOCAL_ALIAS if _is_loopback(host) else host
        netloc = f"{alias}:{listen_port}"
        url = urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
        return Route(url=url, alias=alias, gateway=self.gateway)

    def _listen(self, host: str, port: int) -> int:
        with self._lock:
            if (host, port) in self._listeners:
                return self._listeners[(host, port)][1]
            server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                server.bind((self.gateway, port))
            except OSError:
                try:
                    server.bind((self.gateway, 0))
                except OSError as e:
                    server.close()
                    raise SandboxError(
                        f"Cannot listen on the sandbox gateway {self.gateway}: {e.strerror}.",
                        "Check that the Docker network exists and its bridge is up.",
                    ) from e
            server.listen(64)
            bound = server.getsockname()[1]
            self.firewall.allow(bound)
            accepting = threading.Thread(
                target=self._accept, args=(server, host, port), daemon=True, name="egress"
            )
            accepting.start()
            self._listeners[(host, port)] = (server, bound, accepting)
            return int(bound)

    def _accept(self, server: socket.socket, host: str, port: int) -> None:
        while True:
            try:
                client, _ = server.accept()
            except OSError:
                return
            threading.Thread(target=self._connect, args=(client, host, port), daemon=True).start()

    @staticmethod
    def _connect(client: socket.socket, host: str, port: int) -> None:
        try:
            upstream = socket.create_connection((host, port), timeout=30)
        except OSError:
            client.close()
            return
        upstream.settimeout(None)
        back = threading.Thread(target=_pump, args=(upstream, client), daemon=True)
        back.start()
        _pump(client, upstream)
        back.join()
        # Closed here, once both directions are done, never inside a pump: a socket closed by one
        # thread while the other is about to shut it down frees its descriptor number, the next
        # accepted connection gets that number, and the late shutdown cut that connection instead
        # (CLIs saw "fetch failed" / "stream disconnected" on a fast second request).
        client.close()
        upstream.close()

    def close(self) -> None:
        with self._lock:
            for server, port, accepting in self._listeners.values():
                # Shut down (wakes accept), wait, then close: see _connect on descriptor reuse.
                with contextlib.suppress(OSError):
                    server.shutdown(socket.SHUT_RDWR)
                accepting.join(timeout=5)
                server.close()
                with contextlib.suppress(SupervisorError):
                    self.firewall.revoke(port)
            self._listeners.clear()


def _pump(source: socket.socket, sink: socket.socket) -> None:
    """Copy one direction until it ends, then end both (which wakes the other direction's pump);
    shutdown only, the descriptors stay open until `_connect` closes them."""
    try:
        while chunk := source.recv(65536):
            sink.sendall(chunk)
    except OSError:
        pass
    finally:
        for sock in (source, sink):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


_OWNER = re.compile(r"supervisor pid (\d+)")


def _alive(pid: int) -> bool:
    return Path(f"/proc/{pid}").exists()


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
