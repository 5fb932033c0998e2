"""Egress allowlist for worker containers: a proxy on the host, the only thing they can reach.

By default a worker has no network at all: its run's route is a Unix socket bound into its
container, reached through a relay on its loopback (model_relay.py). Workers under gVisor
(`runsc-net`), whose kernel does not reach host sockets, join the network described here.

Such worker containers join a Docker network created with `internal=True` and inter-container
traffic off (`enable_icc=false`): the engine gives it no route out and no path to another worker, so
nothing is reachable but the bridge's own gateway address on the host. For each worker run the
proxy daemon (`proxyd.py`, one per user and host, outliving any supervisor) listens on that gateway
address with a credential-adding reverse proxy (`credproxy.py`): the container speaks plain HTTP
to it under a local alias, with its run's placeholder key, and the proxy opens its own TLS
connection (SNI and certificate checked) to the one configured API host with the real key.
Traffic from the network to the host itself is limited to the proxies' ports by an iptables
chain, so that services on the host are not reachable either; each rule names the process that
owns it by pid and start time, so a rule outlives neither its owner nor a reused pid. DNS: the
network has no upstream resolver (see `doctor` for the engine versions that leaked it anyway).
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import urlsplit, urlunsplit

from supervisor.core import owners, process
from supervisor.core.errors import SandboxError, SupervisorError
from supervisor.sandbox.credproxy import Injection, new_placeholder

if TYPE_CHECKING:
    from collections.abc import Iterator

    import docker

    from supervisor.sandbox.proxy_client import ProxyClient

LOCAL_ALIAS = "model-api.supervisor.internal"
NETWORK_LABEL = "supervisor.egress"


@dataclass(frozen=True)
class Route:
    """How a container reaches one allowed endpoint."""

    url: str  # the base URL to give the CLI inside the container
    alias: str
    gateway: str
    placeholder: str = ""
    """The run's own stand-in credential: the container's key variable gets this."""
    socket_dir: str = ""
    """The folder of the run's Unix socket, bound into a networkless container
    (model_relay.py); empty: the container joins the workers' network and reaches `gateway`."""

    @property
    def port(self) -> int | None:
        tail = self.url.rsplit(":", 1)[-1].split("/", 1)[0]
        return int(tail) if tail.isdigit() else None


@dataclass(frozen=True)
class Network:
    gateway: str
    bridge: str


NETWORK_OPTIONS = {"com.docker.network.bridge.enable_icc": "false"}
"""Worker containers cannot reach one another: one worker's container is another's attacker."""


def ensure_network(client: docker.DockerClient, name: str) -> Network:
    """Create the internal network if needed (recreated when it exists with other options); its
    gateway IP and bridge interface on the host."""
    # One creator at a time among this user's processes: under load, a network created second
    # could be stamped first and be seen only after the first maker had found its own alone and
    # gone on with it, so two of one name stayed (an engine before 25 accepts both).
    # `_one_of_a_name` still settles a race with another user's supervisor, or one run without
    # the lock.
    with _host_lock(f"supervisor-docker-network-{os.getuid()}.lock", wait=30):
        return _ensure_network(client, name)


def _ensure_network(client: docker.DockerClient, name: str) -> Network:
    import docker.errors

    network = _first_of_name(client, name)
    if network is not None and not _as_wanted(network):
        _remove(network, name)
        network = None
    if network is None:
        try:
            network = client.networks.create(
                name,
                driver="bridge",
                internal=True,
                options=NETWORK_OPTIONS,
                labels={NETWORK_LABEL: "1"},
                check_duplicate=True,
            )
            network = _one_of_a_name(client, name, cast(str, network.id))
        except docker.errors.APIError as e:
            if "already exists" not in str(e):
                raise SandboxError(
                    f"Cannot create the sandbox network '{name}': {e}",
                    "Check that the Docker engine is healthy (`docker network ls`).",
                ) from e
            network = _first_of_name(client, name) or client.networks.get(name)
    network.reload()
    if not _as_wanted(network):
        raise SandboxError(
            f"Docker network '{name}' exists but is not internal with inter-container traffic "
            "off, so workers could reach the outside or each other.",
            f"Remove it (`docker network rm {name}`); the supervisor recreates it as it must be.",
        )
    configs = network.attrs.get("IPAM", {}).get("Config") or []
    gateway = next((c.get("Gateway") for c in configs if c.get("Gateway")), None)
    if gateway is None:
        raise SandboxError(
            f"Docker network '{name}' has no gateway address.",
            f"Remove it (`docker network rm {name}`) so that it is recreated.",
        )
    options = network.attrs.get("Options") or {}
    bridge = options.get("com.docker.network.bridge.name") or f"br-{cast(str, network.id)[:12]}"
    return Network(gateway=str(gateway), bridge=bridge)


def _one_of_a_name(client: docker.DockerClient, name: str, mine: str) -> Any:
    """Engines before 25 create a second network of the same name when two supervisors (or
    parallel test workers) ask at the same moment, and every lookup by name then fails. All
    agree on the one created first (a network seen alone by its maker is never outranked by a
    later one); the others remove their own."""
    import docker.errors

    deadline = time.monotonic() + 10
    while True:
        same = _of_name(client, name)
        kept = min(same, key=_created) if same else None
        if kept is None or kept.id != mine:
            with contextlib.suppress(docker.errors.NotFound):
                client.networks.get(mine).remove()
            return client.networks.get(kept.id if kept is not None else name)
        if len(same) == 1 or time.monotonic() > deadline:
            return kept
        time.sleep(0.2)  # the others see this one and remove theirs


def _of_name(client: docker.DockerClient, name: str) -> list[Any]:
    return [n for n in client.networks.list(names=[name]) if n.name == name]


def _first_of_name(client: docker.DockerClient, name: str) -> Any:
    """The network of that name (the first created, while a duplicate made at the same moment
    is being removed: a lookup by name would fail as ambiguous), or None."""
    same = _of_name(client, name)
    return min(same, key=_created) if same else None


def _created(network: Any) -> tuple[str, str]:
    """Creation time as sortable text (the engine trims the nanoseconds' trailing zeros)."""
    stamp = str(network.attrs.get("Created", "")).rstrip("Z")
    seconds, _, fraction = stamp.partition(".")
    zone = ""
    for sign in ("+", "-"):
        if sign in fraction:
            fraction, _, zone = fraction.partition(sign)
    return f"{seconds}.{fraction.ljust(9, '0')}{zone}", network.id


def _as_wanted(network: Any) -> bool:
    options = network.attrs.get("Options") or {}
    return bool(network.attrs.get("Internal")) and all(
        options.get(k) == v for k, v in NETWORK_OPTIONS.items()
    )


def _remove(network: Any, name: str, wait: float = 60) -> None:
    """Remove a network made by an older version; containers still attached (a worker of
    another supervisor) are waited for a while, then named."""
    import docker.errors

    deadline = time.monotonic() + wait
    while True:
        try:
            network.remove()
            return
        except docker.errors.NotFound:
            return
        except docker.errors.APIError as e:
            if time.monotonic() > deadline:
                raise SandboxError(
                    f"Docker network '{name}' must be recreated with inter-container traffic "
                    f"off, but it is in use: {e.explanation or e}",
                    f"Stop the containers on it (`docker network inspect {name}`), then run again.",
                ) from e
            time.sleep(1)


@contextlib.contextmanager
def _host_lock(name: str, wait: float | None = None) -> Iterator[None]:
    """An exclusive `flock` in the temporary directory, shared by the supervisor processes that
    open it (never follows a symlink planted at its path). With `wait`, taken when it can be: a
    file that cannot be opened (another user's) or a lock held past `wait` leaves the caller to
    go on without it, never waiting forever."""
    import fcntl
    import tempfile

    path = Path(tempfile.gettempdir()) / name
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    except OSError:
        if wait is None:
            raise
        fd = -1
    if fd < 0:
        yield
        return
    try:
        if wait is None:
            fcntl.flock(fd, fcntl.LOCK_EX)
        else:
            deadline = time.monotonic() + wait
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        break
                    time.sleep(0.05)
        yield
    finally:
        os.close(fd)


class HostFirewall:
    """An iptables chain that lets the sandbox network reach the host on the relay ports only.

    Without it, any service listening on all of the host's addresses would be reachable from a
    worker through the gateway address. Needs root; without iptables or root the sandbox still
    has no route out, and `warning` says what remains open.
    """

    def __init__(self, bridge: str) -> None:
        self.bridge = bridge
        self.chain = self.chain_for(bridge)
        self.warning: str | None = None
        try:
            self._setup()
        except SupervisorError as e:
            self.warning = (
                f"Could not restrict host access from the sandbox network ({e.message}); host "
                "services listening on all addresses stay reachable from workers."
            )

    @staticmethod
    def chain_for(bridge: str) -> str:
        return f"SUPERVISOR-{bridge[-12:]}".upper()

    def allow(self, port: int) -> None:
        """Open `port`; rules a dead owner left are swept first (the daemon that sets the chain
        up may live for days, and an older proxy may have died meanwhile)."""
        if self.warning is None:
            self._drop_orphaned_rules()
            self._iptables("-I", self.chain, "1", *self._rule(port))

    def revoke(self, port: int) -> None:
        """Remove this process's rule only: another supervisor may hold a rule for the same
        port number (its own relay, after ours closed), and must keep it."""
        if self.warning is None:
            while self._has(self.chain, self._rule(port)):
                self._iptables("-D", self.chain, *self._rule(port))

    @staticmethod
    def _rule(port: int) -> list[str]:
        owner = owner_tag()
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
        """Check-then-create, so one host-wide lock: supervisors starting at the same time (tasks
        side by side) must neither fail on each other's chain nor add its rules twice."""
        with _host_lock("supervisor-firewall.lock"):
            self._create()

    def _create(self) -> None:
        missing = self._iptables("-n", "-L", self.chain, check=False).returncode != 0
        # A supervisor of an older version (no lock) may create the chain at the same moment;
        # only the one whose -N succeeds fills it.
        if missing and self._iptables("-N", self.chain, check=False).returncode == 0:
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
        elif missing:
            self._iptables("-n", "-L", self.chain)  # neither made nor found: name the error
        jump = ["-i", self.bridge, "-j", self.chain]
        if not self._has("INPUT", jump):
            self._iptables("-I", "INPUT", "1", *jump)
        self._drop_orphaned_rules()

    def _drop_orphaned_rules(self) -> None:
        """A SIGKILLed supervisor cannot revoke its ports; left alone, a later host service on one
        of those numbers would be reachable from workers. Rules whose owner is gone are removed."""
        listing = self._iptables("-S", self.chain, check=False).stdout
        for line in listing.splitlines():
            if not _orphaned(line):
                continue
            rule = shlex.split(line)[2:]  # "-A CHAIN <rule...>"
            self._iptables("-D", self.chain, *rule, check=False)

    def _has(self, chain: str, rule: list[str]) -> bool:
        return self._iptables("-C", chain, *rule, check=False).returncode == 0

    @staticmethod
    def _iptables(*args: str, check: bool = True) -> process.Completed:
        return process.run(["iptables", "-w", "5", *args], check=check, timeout=30)


class EgressRelay:
    """This supervisor's routes in the proxy daemon (`proxyd.py`): one listener per worker run
    on the network's gateway address, the only thing a worker container can reach. The daemon
    holds the keys and the streams, so a SIGKILL of this process breaks neither."""

    def __init__(self, network: Network | None) -> None:
        """`network`: None for networkless workers, whose routes are Unix sockets."""
        self.network = network
        self.gateway = network.gateway if network is not None else ""
        self.warning: str | None = None
        self._client: ProxyClient | None = None
        self._routes: set[str] = set()
        self._lock = threading.Lock()

    def route(
        self,
        base_url: str,
        injection: Injection | None = None,
        port: int | None = None,
        *,
        placeholder: str | None = None,
        vendor: str | None = None,
        record_dir: Path | None = None,
        task: str | None = None,
    ) -> Route:
        """The base URL for the CLI in the container: plain HTTP to the run's listener under the
        local alias, same path as `base_url`. Opening it checks that the API host is reachable,
        so a wrong `base_url` stops here with its host named. `port` and `placeholder`: a
        container adopted from a killed run still sends to the port and with the placeholder it
        was given: the daemon's route is re-attached (or reopened there, if the daemon is new)."""
        from supervisor.sandbox.proxy_client import ProxyClient

        placeholder = placeholder or new_placeholder()
        with self._lock:
            if self._client is None:
                self._client = ProxyClient.connect()
            answer = self._client.open_route(
                base_url=base_url,
                injection=injection or Injection(),
                placeholder=placeholder,
                vendor=vendor,
                record_dir=record_dir,
                gateway=self.gateway,
                bridge=self.network.bridge if self.network is not None else None,
                port=port,
                task=task,
                socket=self.network is None,
            )
            self._routes.add(placeholder)
            self.warning = answer.get("warning") or self.warning
        parts = urlsplit(base_url)
        netloc = f"{LOCAL_ALIAS}:{answer['port']}"
        url = urlunsplit(("http", netloc, parts.path, parts.query, parts.fragment))
        return Route(
            url=url,
            alias=LOCAL_ALIAS,
            gateway=self.gateway,
            placeholder=placeholder,
            socket_dir=str(answer.get("socket_dir") or ""),
        )

    def close_route(self, route: Route) -> None:
        """The run is over: its listener, firewall rule and placeholder go."""
        with self._lock:
            if self._client is not None and route.placeholder in self._routes:
                self._routes.discard(route.placeholder)
                with contextlib.suppress(SupervisorError, OSError):
                    self._client.close_route(route.placeholder)

    def leave_route(self, route: Route) -> None:
        """The run's worker goes on without this process (a stop left it for `resume`): its
        route is no longer this process's to close; the daemon keeps it once this process's
        control connection drops, as after a kill (sandbox/proxyd.py)."""
        with self._lock:
            self._routes.discard(route.placeholder)

    def close(self) -> None:
        with self._lock:
            if self._client is not None:
                for placeholder in sorted(self._routes):
                    with contextlib.suppress(SupervisorError, OSError):
                        self._client.close_route(placeholder)
                self._client.close()
            self._routes.clear()
            self._client = None


_OWNER = re.compile(r"supervisor proxy (\d+) (\d+)")
_LEGACY_OWNER = re.compile(r"supervisor pid (\d+)")


def owner_tag(pid: int | None = None) -> str:
    """What a firewall rule says about the process that owns it."""
    pid = pid or os.getpid()
    return f"supervisor proxy {pid} {owners.start_time(pid) or 0}"


def _orphaned(rule: str) -> bool:
    """A rule whose owner is gone (its pid ended, or now names a later process)."""
    owner = _OWNER.search(rule)
    if owner is not None:
        return owners.start_time(int(owner[1])) != owner[2]
    legacy = _LEGACY_OWNER.search(rule)  # an older version's rule: its pid is all there is
    return legacy is not None and not Path(f"/proc/{legacy[1]}").exists()
