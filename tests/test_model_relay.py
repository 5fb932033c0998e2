"""Networkless workers (sandbox/model_relay.py): a worker's container has no network at all, only
its loopback and its run's Unix socket to the proxy daemon, reached through a relay the
container runs. The attacker is the worker: it owns everything in its container, the relay
included, and must still reach nothing but its own run's model paths, with its own placeholder."""

from __future__ import annotations

import http.server
import socket
import threading
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from e2e_support import CONNECT, IMAGE, recording_api, require_sandbox

from supervisor.sandbox import model_relay
from supervisor.sandbox.credproxy import Injection
from supervisor.sandbox.docker import DockerSandbox, RunSpec

if TYPE_CHECKING:
    from collections.abc import Iterator

pytestmark = pytest.mark.docker
NETWORK = "supervisor-egress-test"  # named, and unused: no worker here joins it
REAL = "sk-real-key-on-the-host"


ASK = r"""
import socket, sys
for line in sys.argv[2:]:
    with socket.create_connection(('127.0.0.1', int(sys.argv[1])), timeout=10) as sock:
        sock.sendall(line.encode().replace(b'|', b'\r\n'))
        print(sock.recv(200).split(b' ')[1].decode())
"""


@pytest.fixture
def sandbox() -> Iterator[DockerSandbox]:
    require_sandbox()
    box = DockerSandbox(IMAGE, NETWORK)
    yield box
    box.close()


@pytest.fixture
def local_api() -> Iterator[tuple[str, list[dict[str, str]]]]:
    with recording_api() as api:
        yield api


def host_addresses() -> list[str]:
    """The host's addresses a container could try: Docker's default bridge and the host's own."""
    found = {"172.17.0.1"}
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))  # no packet is sent: only the route is looked up
            found.add(probe.getsockname()[0])
        except OSError:
            pass
    return sorted(found)


def test_a_worker_has_only_loopback_and_its_runs_socket_and_reaches_its_model_and_no_host_service(
    sandbox: DockerSandbox, tmp_path: Path, local_api: tuple[str, list[dict[str, str]]]
) -> None:
    url, _ = local_api
    route = sandbox.route(url)
    assert route.socket_dir and not route.gateway
    host_service = http.server.ThreadingHTTPServer(
        ("0.0.0.0", 0), http.server.BaseHTTPRequestHandler
    )
    threading.Thread(target=host_service.serve_forever, daemon=True).start()
    seen_network: list[str] = []

    def network_mode(container_id: str) -> None:
        attrs = sandbox.client.api.inspect_container(container_id)
        seen_network.append(attrs["HostConfig"]["NetworkMode"])

    port = host_service.server_address[1]
    targets = [f"{a}:{port}" for a in host_addresses()] + ["1.1.1.1:443", f"{route.alias}:{port}"]
    script = (
        "tail -n +3 /proc/net/dev | cut -d: -f1; ls -A /run/supervisor-model; "
        'f="$0"; u="$1"; p="$2"; shift 2; python3 -c "$f" "$u"; python3 -c "$p" "$@"'
    )
    fetch = (
        "import urllib.request,sys;"
        "print(urllib.request.urlopen(sys.argv[1], timeout=10).read().decode())"
    )
    try:
        result = sandbox.run(
            RunSpec(
                argv=["sh", "-c", script, fetch, f"{route.url}/v1/models", CONNECT, *targets],
                worktree=tmp_path,
                route=route,
                on_start=network_mode,
            )
        )
    finally:
        host_service.shutdown()
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.split()
    assert lines[:3] == ["lo", model_relay.SOCKET_NAME, "hello"], result.stdout
    assert seen_network == ["none"]
    assert "OPEN" not in result.stdout
    assert result.stdout.count("BLOCKED") == len(targets)


PIDS_TAKEN = r"""
import os, sys, time, urllib.request
children = 0
try:
    while children < 5000:
        if os.fork() == 0:
            time.sleep(30)
            os._exit(0)
        children += 1
except OSError:
    print("no process to spare after", children)
for _ in range(3):  # on fresh connections, as a CLI's requests come
    print(urllib.request.urlopen(sys.argv[1], timeout=10).read().decode())
"""  # its sleeping children end with the container


def test_a_worker_whose_processes_used_up_its_pids_still_reaches_its_model(
    sandbox: DockerSandbox, tmp_path: Path, local_api: tuple[str, list[dict[str, str]]]
) -> None:
    """A fork flood, or a build running many jobs, leaves no process to spare in the container:
    the relay serves every connection in its one process (it forked one per connection, and
    the fork flood attack's follow-up request was cut)."""
    url, _ = local_api
    route = sandbox.route(url)
    result = sandbox.run(
        RunSpec(
            argv=["python3", "-c", PIDS_TAKEN, f"{route.url}/models"],
            worktree=tmp_path,
            route=route,
            timeout=120,
        )
    )
    assert "no process to spare after" in result.stdout, result.stdout + result.stderr
    assert result.stdout.count("hello") == 3, result.stdout + result.stderr


def test_a_worker_on_its_socket_cannot_spend_another_runs_key_nor_reach_a_path_but_the_models(
    sandbox: DockerSandbox, tmp_path: Path, local_api: tuple[str, list[dict[str, str]]]
) -> None:
    """The worker owns its relay and may speak to its socket as it likes: another run's
    placeholder (whose socket it cannot see), none, or a path that is not a model's, is refused
    there, and nothing reaches the API; its own placeholder on a model path gets the real key."""
    url, seen = local_api
    mine = sandbox.route(url, Injection("x-api-key", REAL), vendor="anthropic")
    theirs = sandbox.route(url, Injection("x-api-key", "sk-task-b-key"), vendor="anthropic")
    assert mine.socket_dir != theirs.socket_dir
    host = f"{mine.alias}:{model_relay.RELAY_PORT}"

    def ask(request: str, key: str) -> str:
        return f"{request}|host: {host}|x-api-key: {key}|content-length: 2|connection: close||{{}}"

    refused = [
        ask("POST /v1/messages HTTP/1.1", theirs.placeholder),
        ask("POST /v1/messages HTTP/1.1", "sk-supervisor-placeholder"),
        ask("GET /admin/keys HTTP/1.1", mine.placeholder),
        ask("POST /v1/../../etc/passwd HTTP/1.1", mine.placeholder),
        "POST /v1/messages HTTP/1.1|host: api.anthropic.com|x-api-key: "
        f"{mine.placeholder}|content-length: 2|connection: close||{{}}",
    ]
    result = sandbox.run(
        RunSpec(
            argv=[
                "python3",
                "-c",
                ASK,
                str(model_relay.RELAY_PORT),
                *refused,
                ask("POST /v1/messages HTTP/1.1", mine.placeholder),
            ],
            worktree=tmp_path,
            route=mine,
        )
    )
    assert result.exit_code == 0, result.stderr
    statuses = result.stdout.split()
    assert len(statuses) == len(refused) + 1, result.stdout
    assert all(s in ("400", "403") for s in statuses[:-1]) and statuses[-1] == "200", statuses
    assert len(seen) == 1 and seen[0]["x-api-key"] == REAL


def test_a_routes_socket_goes_with_it_and_comes_back_at_its_path_for_an_adopted_container(
    sandbox: DockerSandbox, local_api: tuple[str, list[dict[str, str]]]
) -> None:
    """A container adopted after its supervisor died has its run's socket folder bound in: the
    route reopened with its placeholder (a proxy daemon started anew) listens at that path."""
    url, _ = local_api
    first = sandbox.route(url)
    folder = Path(first.socket_dir)
    assert (folder / model_relay.SOCKET_NAME).is_socket()
    sandbox.close_route(first)
    assert not folder.exists()
    again = sandbox.route(url, placeholder=first.placeholder)
    assert again.socket_dir == first.socket_dir
    assert (folder / model_relay.SOCKET_NAME).is_socket()


def test_a_worker_that_ends_its_relay_still_reaches_nothing(
    sandbox: DockerSandbox, tmp_path: Path, local_api: tuple[str, list[dict[str, str]]]
) -> None:
    """The relay is the worker's: ended, the worker's only way out is its socket, its route."""
    url, _ = local_api
    route = sandbox.route(url)
    script = (
        'for p in /proc/[0-9]*; do [ "$(cat $p/comm 2>/dev/null)" = perl ] && kill "${p#/proc/}"; '
        'done; sleep 0.2; python3 -c "$0" "$@"'
    )
    result = sandbox.run(
        RunSpec(
            argv=[
                "sh",
                "-c",
                script,
                CONNECT,
                f"127.0.0.1:{model_relay.RELAY_PORT}",
                "1.1.1.1:443",
            ],
            worktree=tmp_path,
            route=route,
        )
    )
    assert result.exit_code == 0, result.stderr
    assert result.stdout.count("BLOCKED") == 2, result.stdout


def test_an_image_without_perl_names_the_missing_relay_and_its_fix(
    sandbox: DockerSandbox, tmp_path: Path, local_api: tuple[str, list[dict[str, str]]]
) -> None:
    """A custom image that dropped perl cannot start the relay: the worker's stderr says so,
    with the fix, instead of leaving only the CLI's own "connection refused"."""
    import io

    url, seen = local_api
    tag = "supervisor-test-no-perl:latest"
    dockerfile = f"FROM {IMAGE}\nUSER root\nRUN rm -f /usr/bin/perl /usr/bin/perl5*\n"
    sandbox.client.images.build(fileobj=io.BytesIO(dockerfile.encode()), tag=tag, rm=True)
    try:
        route = sandbox.route(url)
        result = sandbox.run(
            RunSpec(
                argv=["python3", "-c", CONNECT, f"127.0.0.1:{model_relay.RELAY_PORT}"],
                worktree=tmp_path,
                image=tag,
                route=route,
            )
        )
    finally:
        sandbox.client.images.remove(tag, force=True)
    assert result.exit_code == 0, result.stderr
    assert model_relay.NOT_STARTED in result.stderr
    assert "perl" in result.stderr and "FROM the supervisor sandbox image" in result.stderr
    assert "BLOCKED" in result.stdout and seen == []
