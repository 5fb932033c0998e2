"""The Docker sandbox, on the real engine: what a worker or a gate can and cannot do."""

from __future__ import annotations

import http.server
import json
import os
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from e2e_support import IMAGE, missing, recording_api, require_sandbox

from supervisor.core.errors import CommandTimeoutError
from supervisor.sandbox.docker import (
    LABEL_REPO,
    LABEL_STEP,
    LABEL_WORKFLOW,
    RUN_PREFIX,
    DockerSandbox,
    RunSpec,
    run_dir_label,
)
from supervisor.sandbox.egress import HostFirewall, ensure_network

if TYPE_CHECKING:
    from collections.abc import Iterator

# One xdist process for both egress files: they share the workers' test network and its host
# firewall chain, and one spec plants a rule of a dead supervisor for the next to sweep.
pytestmark = [pytest.mark.docker, pytest.mark.xdist_group("egress_network")]
NETWORK = "supervisor-egress-test"

PROBE = """
import socket, sys
for host, port in [(h.split(':')[0], int(h.split(':')[1])) for h in sys.argv[1:]]:
    try:
        socket.create_connection((host, port), timeout=3).close()
        print('OPEN', host, port)
    except OSError as e:
        print('BLOCKED', host, port, type(e).__name__)
"""


@pytest.fixture(params=["network"])
def sandbox(request: pytest.FixtureRequest) -> Iterator[DockerSandbox]:
    """The workers' way to their model: the egress network (gVisor's workers), or, where a spec
    asks for both, their run's socket (every other worker's, sandbox/model_relay.py)."""
    require_sandbox()
    box = DockerSandbox(IMAGE, NETWORK, worker_network=request.param == "network")
    yield box
    box.close()


BOTH_WAYS = pytest.mark.parametrize("sandbox", ["socket", "network"], indirect=True)


@pytest.fixture
def local_api() -> Iterator[str]:
    """A plain HTTP server on the host's loopback, standing for a model API."""
    with recording_api() as (url, _):
        yield f"{url}/v1"  # GET <base>/models: a model path


def test_a_gate_container_has_no_network_at_all(sandbox: DockerSandbox, tmp_path: Path) -> None:
    result = sandbox.run(
        RunSpec(argv=["python3", "-c", PROBE, "1.1.1.1:80", "8.8.8.8:53"], worktree=tmp_path)
    )
    assert result.exit_code == 0, result.stderr
    assert "OPEN" not in result.stdout
    assert result.stdout.count("BLOCKED") == 2


def test_a_gate_container_has_a_network_namespace_of_its_own_with_only_loopback(
    sandbox: DockerSandbox, tmp_path: Path
) -> None:
    # Docker's networking is disabled for it (no network-key hook): the namespace must stay.
    script = "readlink /proc/self/ns/net; tail -n +3 /proc/net/dev | cut -d: -f1"
    result = sandbox.run(RunSpec(argv=["sh", "-c", script], worktree=tmp_path))
    assert result.exit_code == 0, result.stderr
    namespace, *interfaces = result.stdout.split()
    assert namespace.startswith("net:[")
    assert namespace != str(Path("/proc/self/ns/net").readlink())
    assert interfaces == ["lo"]


LOCALHOST_ROUND_TRIP = """
import socket
for family in (socket.AF_INET, socket.AF_INET6):
    server = socket.create_server(("localhost", 0), family=family)
    client = socket.create_connection(("localhost", server.getsockname()[1]), timeout=5)
    server.accept()[0].sendall(b"ok")
    print(family.name, client.recv(2).decode())
"""


def test_a_gate_container_resolves_localhost_and_reaches_itself_on_it(
    sandbox: DockerSandbox, tmp_path: Path
) -> None:
    # A test suite that starts a server on `localhost` (vitest, jest, pytest fixtures) must pass
    # in a gate, over IPv4 and IPv6, although Docker writes no /etc/hosts without networking.
    result = sandbox.run(
        RunSpec(
            argv=["python3", "-c", LOCALHOST_ROUND_TRIP], worktree=tmp_path, writable_layer=True
        )
    )
    assert result.exit_code == 0, result.stderr
    assert result.stdout.split("\n")[:2] == ["AF_INET ok", "AF_INET6 ok"]


@BOTH_WAYS
def test_a_worker_reaches_its_model_api_and_nothing_else(
    sandbox: DockerSandbox, tmp_path: Path, local_api: str
) -> None:
    route = sandbox.route(local_api)
    fetch = (
        "import urllib.request,sys;"
        "print(urllib.request.urlopen(sys.argv[1], timeout=10).read().decode())"
    )
    result = sandbox.run(
        RunSpec(
            argv=[
                "sh",
                "-c",
                'python3 -c "$0" "$1" && python3 -c "$2" 1.1.1.1:443',
                fetch,
                f"{route.url}/models",
                PROBE,
            ],
            worktree=tmp_path,
            network=NETWORK,
            route=route,
        )
    )
    assert result.exit_code == 0, result.stderr
    assert "hello" in result.stdout
    assert "BLOCKED 1.1.1.1 443" in result.stdout


BURST = """
const [url, workers, each] = [process.argv[2], 8, 100];
let ok = 0;
const failures = [];
await Promise.all([...Array(workers).keys()].map(async () => {
  for (let i = 0; i < each; i++) {
    try {
      if ((await (await fetch(url)).text()) === "hello") ok++;
    } catch (e) {
      failures.push(`${e.message}: ${e.cause?.code ?? e.cause}`);
    }
  }
}));
console.log(JSON.stringify({ ok, failures: failures.slice(0, 5) }));
"""


@BOTH_WAYS
def test_back_to_back_requests_through_the_relay_all_arrive(
    sandbox: DockerSandbox, tmp_path: Path, local_api: str
) -> None:
    """A CLI's next request follows the last answer at once, on a new connection (the API closes
    each one): the relay must not cut it while tearing down the previous one."""
    route = sandbox.route(local_api)
    (tmp_path / "burst.mjs").write_text(BURST)
    result = sandbox.run(
        RunSpec(
            argv=["node", "/workspace/burst.mjs", f"{route.url}/models"],
            worktree=tmp_path,
            network=NETWORK,
            route=route,
        )
    )
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout.strip().splitlines()[-1]) == {"ok": 800, "failures": []}


def test_ports_left_open_by_a_killed_supervisor_are_closed_by_the_next(
    sandbox: DockerSandbox, local_api: str
) -> None:
    firewall = HostFirewall(ensure_network(sandbox.client, NETWORK).bridge)
    if firewall.warning:
        missing(firewall.warning)
    dead = subprocess.Popen(["true"])  # a pid that no longer runs
    dead.wait()
    # An older version's rule of a dead pid, and one whose pid now names another process (this
    # one, started later than the rule's owner: pids wrapped).
    wrapped = f"supervisor proxy {os.getpid()} 1"
    for owner in (f"supervisor pid {dead.pid}", wrapped):
        orphan = ["-p", "tcp", "--dport", "1", "-m", "comment", "--comment", owner,
                  "-j", "ACCEPT"]  # fmt: skip
        subprocess.run(["iptables", "-w", "5", "-I", firewall.chain, "1", *orphan], check=True)

    route = sandbox.route(local_api)  # the next route the proxy daemon opens

    rules = subprocess.run(
        ["iptables", "-w", "5", "-S", firewall.chain], capture_output=True, text=True, check=True
    ).stdout
    assert f"supervisor pid {dead.pid}" not in rules
    assert wrapped not in rules
    port = route.port
    assert f'--dport {port} -m comment --comment "supervisor proxy ' in rules  # the daemon's


def test_the_engine_client_on_the_local_socket_reads_no_proxy_setting(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No proxy applies to a Unix socket, and looking for one read the whole environment on
    every engine call (a third of a call's CPU, thousands of calls a task): the client skips it,
    and talks to the engine whatever proxy the environment names."""
    from supervisor.sandbox.docker import connect

    require_sandbox()
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")
    monkeypatch.setenv("ALL_PROXY", "http://127.0.0.1:9")
    client = connect()
    assert client.api.trust_env is False
    assert client.ping()


def test_the_worker_runs_unprivileged_on_a_read_only_root(
    sandbox: DockerSandbox, tmp_path: Path
) -> None:
    script = "id -u; touch /etc/x 2>/dev/null && echo root-writable; echo ok > /workspace/out.txt"
    result = sandbox.run(RunSpec(argv=["sh", "-c", script], worktree=tmp_path))
    assert result.stdout.split()[0] != "0"
    assert "root-writable" not in result.stdout
    assert (tmp_path / "out.txt").read_text() == "ok\n"  # only the worktree is writable


def test_the_prompt_arrives_on_stdin_whatever_its_size(
    sandbox: DockerSandbox, tmp_path: Path
) -> None:
    prompt = "x" * 300_000  # more than the kernel allows for one argument
    result = sandbox.run(RunSpec(argv=["wc", "-c"], worktree=tmp_path, stdin_text=prompt))
    assert result.stdout.strip() == "300000"


def test_login_files_are_copied_into_a_private_home(sandbox: DockerSandbox, tmp_path: Path) -> None:
    result = sandbox.run(
        RunSpec(
            argv=[
                "sh",
                "-c",
                'cat "$HOME/.claude/.credentials.json"; echo more >> '
                '"$HOME/.claude/.credentials.json" && echo writable-copy',
            ],
            worktree=tmp_path,
            home_files={".claude/.credentials.json": b'{"token": "t"}'},
        )
    )
    assert '{"token": "t"}' in result.stdout
    assert "writable-copy" in result.stdout


def test_a_container_past_its_time_limit_is_ended_and_removed(
    sandbox: DockerSandbox, tmp_path: Path
) -> None:
    started: list[str] = []
    with pytest.raises(CommandTimeoutError, match="time limit"):
        sandbox.run(
            RunSpec(argv=["sleep", "60"], worktree=tmp_path, timeout=2, on_start=started.append)
        )
    import docker.errors

    with pytest.raises(docker.errors.NotFound):
        sandbox.client.containers.get(started[0])


def test_the_idle_limit_ends_a_silent_container_and_spares_one_that_keeps_talking(
    sandbox: DockerSandbox, tmp_path: Path
) -> None:
    # The wait on the engine is bounded by the nearer limit, then re-armed while output flows:
    # a line every 0.5 s for 5 s, past an idle limit of 4 s (a margin a loaded machine keeps).
    talking = sandbox.run(
        RunSpec(
            argv=["sh", "-c", "for i in $(seq 10); do echo $i; sleep 0.5; done"],
            worktree=tmp_path,
            idle_timeout=4,
            timeout=120,
        )
    )
    assert talking.exit_code == 0
    assert talking.stdout.split() == [str(i) for i in range(1, 11)]
    with pytest.raises(CommandTimeoutError, match="printed nothing for 2 s"):
        sandbox.run(RunSpec(argv=["sleep", "60"], worktree=tmp_path, idle_timeout=2, timeout=60))


def test_output_streams_while_the_container_runs(sandbox: DockerSandbox, tmp_path: Path) -> None:
    chunks: list[str] = []
    result = sandbox.run(
        RunSpec(
            argv=["sh", "-c", "echo one; sleep 1; echo two >&2"],
            worktree=tmp_path,
            on_output=chunks.append,
        )
    )
    assert "one" in "".join(chunks) and "two" in "".join(chunks)
    assert result.stdout.strip() == "one"
    assert result.stderr.strip() == "two"


def test_containers_orphaned_by_a_crash_are_found_by_label(
    sandbox: DockerSandbox, tmp_path: Path
) -> None:
    orphan = sandbox.client.containers.create(
        IMAGE, command=["sleep", "30"], labels={"supervisor.test-orphan": str(tmp_path)}
    )
    assert sandbox.remove_stale({"supervisor.test-orphan": str(tmp_path)}) == [orphan.id]


def test_one_steps_orphan_goes_and_the_tasks_other_steps_and_run_folders_stay(
    sandbox: DockerSandbox, tmp_path: Path
) -> None:
    # A component activity tried again on the same host removes its earlier attempt's container
    # (supervisor/temporal/components.py) while the task's other components run on.
    repo = {LABEL_REPO: f"test-{tmp_path.name}", LABEL_WORKFLOW: "7"}
    mine = sandbox.client.containers.create(
        IMAGE, command=["sleep", "30"], labels={**repo, LABEL_STEP: "implement/c1"}
    )
    other = sandbox.client.containers.create(
        IMAGE, command=["sleep", "30"], labels={**repo, LABEL_STEP: "implement/c2"}
    )
    folder = Path(tempfile.gettempdir(), f"{RUN_PREFIX}{run_dir_label(repo)}-c2run")
    folder.mkdir()
    try:
        removed = sandbox.remove_stale({**repo, LABEL_STEP: "implement/c1"}, run_dirs=False)
        assert removed == [mine.id]
        other.reload()  # still there
        assert folder.is_dir()  # the running component's prompt and login files
    finally:
        other.remove(force=True)
        shutil.rmtree(folder, ignore_errors=True)


def test_host_services_outside_the_allowlist_are_not_reachable(
    sandbox: DockerSandbox, tmp_path: Path, local_api: str
) -> None:
    route = sandbox.route(local_api)
    assert sandbox._relay is not None and sandbox._relay.warning is None
    # A service on all of the host's addresses, which the gateway address would otherwise reach.
    other = http.server.ThreadingHTTPServer(("0.0.0.0", 0), http.server.BaseHTTPRequestHandler)
    threading.Thread(target=other.serve_forever, daemon=True).start()
    try:
        port = other.server_address[1]
        relay_port = route.port
        result = sandbox.run(
            RunSpec(
                argv=[
                    "python3",
                    "-c",
                    PROBE,
                    f"{route.gateway}:{port}",
                    f"{route.gateway}:{relay_port}",
                ],
                worktree=tmp_path,
                network=NETWORK,
            )
        )
    finally:
        other.shutdown()
    assert f"BLOCKED {route.gateway} {port}" in result.stdout
    assert f"OPEN {route.gateway} {relay_port}" in result.stdout
