"""Optional stronger isolation on the real engine: with `sandbox.runtime: runsc` in the user's
config, gates (and with `worker_runtime: runsc-net`, workers) run under gVisor, whose kernel is
seen from inside; a runtime the engine does not know stops the task with the fix named; a
repository cannot choose the runtime. scripts/setup.sh registers `runsc` and `runsc-net`."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from typing import TYPE_CHECKING, Any

import pytest
from e2e_support import IMAGE, missing, new_repo, planner, require_sandbox, reviewer
from test_attacks_host import attacker
from test_sandbox import PROBE, local_api  # noqa: F401  (a fixture)

from supervisor.core.config import user_dir
from supervisor.core.errors import SandboxError
from supervisor.guard.trust import trust
from supervisor.lifecycle import tasks
from supervisor.sandbox.docker import DockerSandbox, RunSpec

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.docker

TASK = "Implement add and multiply"
GVISOR = "Starting gVisor"  # the first line of gVisor's dmesg


@pytest.fixture(autouse=True)
def real_parts(api_keys: None) -> None:
    require_sandbox()


def require_gvisor() -> None:
    import docker

    known = docker.from_env().info().get("Runtimes") or {}
    if "runsc" not in known or "runsc-net" not in known:
        missing(f"gVisor not registered with the engine (runtimes: {sorted(known)}; run setup.sh)")


def user_config(text: str) -> None:
    user_dir().mkdir(parents=True, exist_ok=True)
    (user_dir() / "config.yaml").write_text(text)


def kernel_probe_gate(repo: Path) -> None:
    """The demo's `make test` gate, preceded by the kernel's first boot line."""
    config = repo / ".supervisor" / "config.yaml"
    text = config.read_text().replace("test: make test", 'test: "dmesg | head -n 1; make test"')
    config.write_text(text)
    trust(repo)


def test_a_task_with_gvisor_configured_runs_its_gate_and_workers_under_gvisor(
    tmp_path: Path, serve: Any
) -> None:
    require_gvisor()
    user_config("sandbox:\n  runtime: runsc\n  worker_runtime: runsc-net\n")
    # The implementer looks at its kernel; the tool's output goes back to the scripted API.
    server = serve(planner(), attacker("dmesg | head -n 1; cat /proc/version"), reviewer())
    # claude, not the suite's codex: codex's native binary under runsc-net once printed nothing
    # for the whole 300 s idle timeout (retried, then passed) in a CI-mode run; the
    # spec is about the runtime, and claude never stalled under it.
    repo = new_repo(tmp_path, server.url, cli="claude")
    kernel_probe_gate(repo)

    wf = tasks.start_task(TASK, repo)

    assert wf.status == "completed"
    with tasks.reading(repo) as store:
        gate = [e for e in store.events(wf.id) if e.type == "gate"]
    assert [e.status for e in gate] == ["passed"]
    assert GVISOR in gate[0].payload["output_tail"]
    seen_by_worker = json.dumps([r.body for r in server.requests])
    assert GVISOR in seen_by_worker  # the worker ran under gVisor, and reached the API through it


def test_the_default_runtime_is_runc_and_its_gate_sees_the_host_kernel(
    tmp_path: Path, serve: Any
) -> None:
    server = serve(planner(), attacker("cat /proc/version"), reviewer())
    repo = new_repo(tmp_path, server.url)
    kernel_probe_gate(repo)

    wf = tasks.start_task(TASK, repo)

    assert wf.status == "completed"
    with tasks.reading(repo) as store:
        gate = [e for e in store.events(wf.id) if e.type == "gate"]
    assert GVISOR not in gate[0].payload["output_tail"]
    assert GVISOR not in json.dumps([r.body for r in server.requests])


def test_a_runtime_the_engine_does_not_know_stops_the_task_with_the_fix_named(
    tmp_path: Path, serve: Any
) -> None:
    user_config("sandbox:\n  runtime: runsc-not-registered\n")
    server = serve(planner(), attacker("true"), reviewer())
    repo = new_repo(tmp_path, server.url)

    with pytest.raises(SandboxError) as failed:
        tasks.start_task(TASK, repo)

    assert "runsc-not-registered" in failed.value.message
    assert "not registered with the Docker engine" in failed.value.message
    assert "scripts/setup.sh" in failed.value.hint
    assert server.requests == []  # stopped before any model call was paid for


def test_a_repository_cannot_choose_the_runtime_through_its_config(
    tmp_path: Path, serve: Any
) -> None:
    """The attack: a cloned repository's config puts its gates back on runc (or on a weaker
    runtime the host happens to have) although the user chose gVisor. Through the real CLI."""
    user_config("sandbox:\n  runtime: runsc\n")
    server = serve(planner())
    repo = new_repo(tmp_path, server.url, extra_config="sandbox:\n  runtime: runc\n")
    trust(repo)

    result = subprocess.run(
        [sys.executable, "-m", "supervisor", "start-task", TASK, "--repo", str(repo), "--yes"],
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert result.returncode != 0
    assert "sets `sandbox.runtime`" in result.stderr
    assert "the user's choice, not the repository's" in result.stderr
    assert server.requests == []


def test_doctor_reports_the_configured_runtimes_and_that_a_container_ran(tmp_path: Path) -> None:
    require_gvisor()
    user_config("sandbox:\n  runtime: runsc\n  worker_runtime: runsc-net\n")
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)

    result = subprocess.run(
        [sys.executable, "-m", "supervisor", "doctor", "--repo", str(repo), "--json"],
        capture_output=True,
        text=True,
        timeout=300,
    )

    rows = {row["name"]: row for row in json.loads(result.stdout)}
    assert rows["container runtime (gates)"]["ok"], rows
    assert rows["container runtime (gates)"]["detail"] == "runsc: a container ran (gVisor)"
    assert rows["container runtime (workers)"]["detail"] == "runsc-net: a container ran (gVisor)"


def test_doctor_names_the_fix_for_a_runtime_the_engine_does_not_know(tmp_path: Path) -> None:
    from supervisor.core.config import load_settings
    from supervisor.lifecycle.doctor import runtime_checks
    from supervisor.sandbox.docker import connect

    user_config("sandbox:\n  runtime: runsc-not-registered\n")

    rows = {row.name: row for row in runtime_checks(connect(), load_settings(None))}

    row = rows["container runtime (gates)"]
    assert not row.ok and row.required
    assert "runsc-not-registered is not registered" in row.detail
    assert "scripts/setup.sh" in row.hint
    assert rows["container runtime (workers)"].ok  # runc, still the default for workers


@pytest.mark.xdist_group("egress_network")  # test_sandbox's network and its firewall chain
def test_under_gvisor_a_worker_still_reaches_its_model_api_and_nothing_else(
    tmp_path: Path,
    local_api: str,  # noqa: F811  (test_sandbox's fixture)
) -> None:
    """runsc-net hands a worker's sockets to the host kernel (inside the worker's own network
    namespace): the internal network and the host firewall must still hold. The attack: from a
    gVisor worker, the internet, a service on the host beside the proxy, and anything at all
    from a gate."""
    require_gvisor()
    host_service = socket.create_server(("0.0.0.0", 0))  # what a worker must not reach
    box = DockerSandbox(
        IMAGE, "supervisor-egress-test", runtime="runsc", worker_runtime="runsc-net"
    )
    try:
        route = box.route(local_api)
        fetch = "import urllib.request,sys;print(urllib.request.urlopen(sys.argv[1]).read())"
        side_door = f"{route.gateway}:{host_service.getsockname()[1]}"
        worker = box.run(
            RunSpec(
                argv=[
                    "sh",
                    "-c",
                    'dmesg | head -n 1; python3 -c "$0" "$1"; python3 -c "$2" 1.1.1.1:443 "$3"',
                    fetch,
                    f"{route.url}/models",  # a model path: the proxy forwards nothing else
                    PROBE,
                    side_door,
                ],
                worktree=tmp_path,
                network="supervisor-egress-test",
                route=route,
            )
        )
        gate = box.run(RunSpec(argv=["python3", "-c", PROBE, side_door], worktree=tmp_path))
    finally:
        box.close()
        host_service.close()
    assert GVISOR in worker.stdout, worker.stderr
    assert "hello" in worker.stdout
    assert "BLOCKED 1.1.1.1 443" in worker.stdout
    assert f"BLOCKED {side_door.replace(':', ' ')}" in worker.stdout
    assert f"BLOCKED {side_door.replace(':', ' ')}" in gate.stdout
    assert "OPEN" not in worker.stdout + gate.stdout
