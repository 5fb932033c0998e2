"""Egress from worker containers on the real engine: no worker reaches another, no name resolves,
and the proxy on the gateway refuses a request aimed at any other host."""

from __future__ import annotations

import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

import pytest
from e2e_support import CONNECT, IMAGE, recording_api, require_sandbox

from supervisor.sandbox.credproxy import Injection
from supervisor.sandbox.docker import DockerSandbox, RunSpec, remove_container
from supervisor.sandbox.egress import NETWORK_OPTIONS, HostFirewall, Route, ensure_network

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

# One xdist process for both egress files: they share the workers' test network and its host
# firewall chain, and one spec plants a rule of a dead supervisor for the next to sweep.
pytestmark = [pytest.mark.docker, pytest.mark.xdist_group("egress_network")]
NETWORK = "supervisor-egress-test"
REAL = "sk-real-key-for-the-egress-spec"

# getaddrinfo through the container's resolver, then raw DNS queries straight at the embedded
# resolver, a public resolver and the host's gateway: any address or any reply is a leak.
DNS = r"""
import random, socket, struct, sys
names, servers = sys.argv[1].split(','), sys.argv[2].split(',')
for name in names:
    try:
        print('RESOLVED', name, socket.getaddrinfo(name, 443)[0][4][0])
    except OSError as e:
        print('NO-ANSWER', name, type(e).__name__)
def query(name):
    header = struct.pack('>HHHHHH', random.randrange(65536), 0x0100, 1, 0, 0, 0)
    labels = b''.join(bytes([len(p)]) + p.encode() for p in name.split('.'))
    return header + labels + b'\0' + struct.pack('>HH', 1, 1)
for server in servers:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.settimeout(3)
    try:
        sock.sendto(query(names[0]), (server, 53))
        reply = sock.recv(4096)
        answers = struct.unpack('>H', reply[6:8])[0]
        rcode = reply[3] & 0x0F
        print('REPLY' if answers else 'EMPTY-REPLY', server, f'answers={answers} rcode={rcode}')
    except OSError as e:
        print('SILENT', server, type(e).__name__)
"""


@pytest.fixture
def sandbox() -> Iterator[DockerSandbox]:
    require_sandbox()
    box = DockerSandbox(IMAGE, NETWORK, worker_network=True)  # gVisor's workers' way out
    yield box
    box.close()


def test_the_workers_network_is_internal_with_inter_container_traffic_off(
    sandbox: DockerSandbox,
) -> None:
    ensure_network(sandbox.client, NETWORK)
    attrs = sandbox.client.networks.get(NETWORK).attrs
    assert attrs["Internal"] is True
    assert all(attrs["Options"].get(k) == v for k, v in NETWORK_OPTIONS.items())


def test_a_network_left_with_other_options_is_recreated(sandbox: DockerSandbox) -> None:
    name = f"supervisor-egress-old-{time.monotonic_ns()}"
    old = sandbox.client.networks.create(name, driver="bridge", internal=True)
    try:
        ensure_network(sandbox.client, name)
        now = sandbox.client.networks.get(name)
        assert now.id != old.id
        assert now.attrs["Options"]["com.docker.network.bridge.enable_icc"] == "false"
    finally:
        for network in sandbox.client.networks.list(names=[name]):
            network.remove()


def test_supervisors_creating_the_network_at_the_same_moment_make_one(
    sandbox: DockerSandbox,
) -> None:
    """Parallel test workers, or two supervisors started together: this engine (before 25)
    would otherwise accept a second network of the same name, and every later lookup fails."""
    name = f"supervisor-egress-race-{time.monotonic_ns()}"
    start = threading.Barrier(4)

    def create() -> str:
        start.wait()
        return ensure_network(sandbox.client, name).gateway

    try:
        with ThreadPoolExecutor(4) as pool:
            gateways = set(pool.map(lambda _: create(), range(4)))
        assert len(sandbox.client.networks.list(names=[name])) == 1
        assert len(gateways) == 1
    finally:
        for network in sandbox.client.networks.list(names=[name]):
            network.remove()


def test_one_worker_cannot_reach_another(sandbox: DockerSandbox, tmp_path: Path) -> None:
    """A worker listening on a port (as a compromised one would, to hand out stolen data or to
    attack the next) is unreachable from another worker on the same network."""
    ensure_network(sandbox.client, NETWORK)
    listener = sandbox.client.containers.run(
        IMAGE,
        ["python3", "-m", "http.server", "8000"],
        detach=True,
        network=NETWORK,
        user="65534:65534",
        labels={"supervisor.test": "egress-listener"},
    )
    try:
        deadline = time.monotonic() + 120  # a container start on a loaded machine
        address = ""
        while time.monotonic() < deadline:
            listener.reload()
            address = listener.attrs["NetworkSettings"]["Networks"][NETWORK]["IPAddress"]
            probe = listener.exec_run(["python3", "-c", CONNECT, f"{address}:8000"])
            if b"OPEN" in probe.output:
                break  # the listener is up: it answers on its own address
            time.sleep(0.5)
        else:
            pytest.fail("the listening worker never came up")
        result = sandbox.run(
            RunSpec(
                argv=["python3", "-c", CONNECT, f"{address}:8000"],
                worktree=tmp_path,
                network=NETWORK,
            )
        )
    finally:
        remove_container(listener)
    assert result.exit_code == 0, result.stderr
    assert f"BLOCKED {address}:8000" in result.stdout


def test_no_name_resolves_from_the_workers_network(
    sandbox: DockerSandbox, tmp_path: Path, local_api: tuple[str, list[dict[str, str]]]
) -> None:
    """DNS is a way out (a query for <secret>.attacker.example reaches the attacker's name
    server): from a worker neither an external name the host itself resolves, nor the host's own
    name, nor the Docker host alias gets an answer, and no DNS server replies with one."""
    route = sandbox.route(local_api[0])
    external = "pypi.org"
    names = [external, socket.gethostname(), "host.docker.internal", "example.com"]
    servers = ["127.0.0.11", "8.8.8.8", "1.1.1.1", route.gateway]
    result = sandbox.run(
        RunSpec(
            argv=["python3", "-c", DNS, ",".join(names), ",".join(servers)],
            env={"RES_OPTIONS": "timeout:2 attempts:1"},  # glibc: give up sooner, same answer
            worktree=tmp_path,
            network=NETWORK,
            route=route,
        )
    )
    assert result.exit_code == 0, result.stderr
    print(result.stdout)
    assert "RESOLVED" not in result.stdout, result.stdout
    assert "REPLY " not in result.stdout.replace("EMPTY-REPLY", ""), result.stdout
    assert result.stdout.count("NO-ANSWER") == len(names)


@pytest.fixture
def local_api() -> Iterator[tuple[str, list[dict[str, str]]]]:
    with recording_api() as api:
        yield api


FORGE = r"""
import socket, sys
gateway, port = sys.argv[1], int(sys.argv[2])
for line in sys.argv[3:]:
    with socket.create_connection((gateway, port), timeout=10) as sock:
        sock.sendall(line.encode().replace(b'|', b'\r\n') + b'\r\n')
        print(sock.recv(200).split(b'\r\n')[0].decode())
"""


def test_from_a_worker_the_proxy_reaches_its_one_host_with_the_real_key(
    sandbox: DockerSandbox, tmp_path: Path, local_api: tuple[str, list[dict[str, str]]]
) -> None:
    url, seen = local_api
    route = sandbox.route(url, Injection("x-api-key", REAL))
    port = route.url.rsplit(":", 1)[1]
    good = f"POST /v1/messages HTTP/1.1|host: {route.alias}:{port}|x-api-key: {route.placeholder}|"
    good += "content-length: 0|connection: close|"
    forged = "POST /v1/messages HTTP/1.1|host: api.openai.com|content-length: 0|connection: close|"
    absolute = (
        "GET http://169.254.169.254/latest/meta-data/ HTTP/1.1|host: 169.254.169.254|"
        "connection: close|"
    )
    connect = "CONNECT example.com:443 HTTP/1.1|host: example.com:443|"
    result = sandbox.run(
        RunSpec(
            argv=["python3", "-c", FORGE, route.gateway, port, good, forged, absolute, connect],
            worktree=tmp_path,
            network=NETWORK,
            route=route,
        )
    )
    assert result.exit_code == 0, result.stderr
    assert result.stdout.split("\n")[:4] == [
        "HTTP/1.1 200 OK",
        "HTTP/1.1 403 Forbidden",
        "HTTP/1.1 403 Forbidden",
        "HTTP/1.1 403 Forbidden",
    ]
    assert len(seen) == 1 and seen[0]["x-api-key"] == REAL


def test_a_worker_cannot_spend_another_runs_key_nor_reach_a_path_but_the_models(
    sandbox: DockerSandbox, tmp_path: Path, local_api: tuple[str, list[dict[str, str]]]
) -> None:
    """Task A's worker finds task B's listener on the shared network: with its own placeholder
    (or none) it is refused there; on its own route only the model endpoints pass."""
    url, seen = local_api
    mine = sandbox.route(url, Injection("x-api-key", REAL), vendor="anthropic")
    theirs = sandbox.route(url, Injection("x-api-key", "sk-task-b-key"), vendor="anthropic")
    head = "|host: {alias}:{port}|x-api-key: {key}|content-length: 2|connection: close||{{}}"

    def line(route: Route, request: str, key: str) -> str:
        return request + head.format(alias=route.alias, port=route.port, key=key)

    attempts = [
        (theirs, line(theirs, "POST /v1/messages HTTP/1.1", mine.placeholder)),
        (theirs, line(theirs, "POST /v1/messages HTTP/1.1", "sk-supervisor-placeholder")),
        *(
            (mine, line(mine, f"{verb} {path} HTTP/1.1", mine.placeholder))
            for verb, path in [
                ("GET", "/admin/keys"),
                ("DELETE", "/v1/files/x"),
                ("POST", "/v1/../../etc/passwd"),
                ("POST", "//evil.example/x"),
                ("POST", "/v1/messages%2f.."),
            ]
        ),
        (
            mine,
            f"POST /v1/messages HTTP/1.1|host: {mine.alias}:{mine.port}|x-api-key: "
            f"{mine.placeholder}|content-length: 5|transfer-encoding: chunked||0||",
        ),
    ]
    argv = ["python3", "-c", ATTACK, mine.gateway]
    for route, request in attempts:
        argv += [str(route.port), request]
    result = sandbox.run(
        RunSpec(
            argv=argv,
            worktree=tmp_path,
            network=NETWORK,
            route=mine,
        )
    )
    assert result.exit_code == 0, result.stderr
    statuses = result.stdout.split()
    assert len(statuses) == len(attempts), result.stdout
    assert statuses[:2] == ["403", "403"]
    assert all(s in ("400", "403") for s in statuses), result.stdout
    assert seen == []  # nothing reached the API


ATTACK = r"""
import socket, sys
gateway, pairs = sys.argv[1], sys.argv[2:]
for port, line in zip(pairs[::2], pairs[1::2]):
    with socket.create_connection((gateway, int(port)), timeout=10) as sock:
        sock.sendall(line.encode().replace(b'|', b'\r\n'))
        print(sock.recv(200).split(b' ')[1].decode())
"""


def test_routes_opened_from_eight_threads_at_once_leave_their_rules_and_none_after_close(
    sandbox: DockerSandbox, local_api: tuple[str, list[dict[str, str]]]
) -> None:
    """Parallel components open their routes at the same moment (issue 25: each thread built its
    own relay and rules, and close revoked only the last)."""
    import subprocess

    url, _ = local_api
    with ThreadPoolExecutor(8) as pool:
        routes = list(pool.map(lambda _: sandbox.route(url), range(8)))
    relay = sandbox._relay
    assert relay is not None
    if relay.warning:
        pytest.skip(relay.warning)
    chain = HostFirewall.chain_for(ensure_network(sandbox.client, NETWORK).bridge)

    def rules_for(ports: set[int]) -> list[str]:
        listing = subprocess.run(
            ["iptables", "-w", "5", "-S", chain], capture_output=True, text=True, check=True
        ).stdout
        return [r for r in listing.splitlines() if any(f"--dport {p} " in r for p in ports)]

    ports = {route.port for route in routes if route.port is not None}
    assert len(ports) == 8
    rules = rules_for(ports)
    assert len(rules) == 8 and all("supervisor proxy " in r for r in rules), rules
    sandbox.close()
    assert rules_for(ports) == []
