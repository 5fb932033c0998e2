"""The sandbox image that scripts/setup.sh builds, on the real engine: its tools run as a worker
runs them (non-root, read-only root file system, tmpfs /tmp, HOME under /tmp) and a container
without a network reaches nothing."""

from __future__ import annotations

import os
import platform
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from e2e_support import missing

if TYPE_CHECKING:
    from collections.abc import Iterator

pytestmark = pytest.mark.docker

IMAGE = os.environ.get("SUPERVISOR_IMAGE", "supervisor-sandbox:latest")
ROOT = Path(__file__).resolve().parent.parent
NOBODY = "65534:65534"


@pytest.fixture(scope="module")
def client() -> Iterator[Any]:
    """A Docker client for an engine that has the sandbox image."""
    try:
        import docker

        engine = docker.from_env(timeout=60)
        engine.ping()
    except Exception as e:  # no SDK, no socket, engine down: all mean "no Docker here"
        missing(f"Docker engine not reachable: {e}")
    try:
        engine.images.get(IMAGE)
    except Exception:
        missing(f"sandbox image {IMAGE} not built (run scripts/setup.sh)")
    yield engine
    engine.close()


def run(client: Any, command: list[str], **options: Any) -> tuple[int, str]:
    """Run a command the way workers run: as nobody, read-only root, tmpfs /tmp, no network."""
    settings: dict[str, Any] = {
        "user": NOBODY,
        "read_only": True,
        "tmpfs": {"/tmp": "rw,exec,nosuid,size=256m"},
        "environment": {"HOME": "/tmp/home"},
        "network_mode": "none",
        "cap_drop": ["ALL"],
        "security_opt": ["no-new-privileges"],
    }
    settings.update(options)
    container = client.containers.create(IMAGE, command=command, **settings)
    try:
        container.start()
        exit_code = container.wait(timeout=120)["StatusCode"]
        output = container.logs(stdout=True, stderr=True).decode("utf-8", "replace")
    finally:
        container.remove(force=True)
    return exit_code, output


TOOLS = [
    (["claude", "--version"], "Claude Code"),
    (["codex", "--version"], "codex-cli"),
    (["gemini", "--version"], "."),
    (["node", "--version"], "v"),
    (["npm", "--version"], "."),
    (["python3", "--version"], "Python 3"),
    (["git", "--version"], "git version"),
    (["make", "--version"], "GNU Make"),
]


@pytest.mark.parametrize(("command", "expected"), TOOLS, ids=[c[0] for c, _ in TOOLS])
def test_each_tool_runs_as_nobody_on_a_read_only_root(
    client: Any, command: list[str], expected: str
) -> None:
    exit_code, output = run(client, command)
    assert exit_code == 0, output
    assert expected in output


def test_node_is_20_or_newer(client: Any) -> None:
    exit_code, output = run(client, ["node", "-p", "process.versions.node"])
    assert exit_code == 0, output
    assert int(output.strip().split(".")[0]) >= 20


@pytest.mark.parametrize("user", [NOBODY, "4242:4242"])
def test_gemini_starts_on_node_24_from_the_compile_cache_built_into_the_image(
    client: Any, user: str
) -> None:
    """Node names its cache folder after the user id, which is the host's: whatever it is, the
    cache built with the image is read (sandbox/gemini.sh), and nothing compiled is refused."""
    if platform.machine() != "x86_64":
        pytest.skip("Node 24 for gemini is installed from npm for linux-x64 only")
    debug = {"HOME": "/tmp/home", "NODE_DEBUG_NATIVE": "COMPILE_CACHE"}
    exit_code, output = run(client, ["gemini", "--version"], user=user, environment=debug)
    assert exit_code == 0, output
    assert output.count("was accepted") >= 10, output[-3000:]
    assert "rejected" not in output and "denied" not in output, output[-3000:]
    uid = user.split(":")[0]
    assert "-> /tmp/.node-compile-cache/v24." in output, output[:2000]  # Node 24
    assert f"-{uid}/" in output, output[:2000]


def test_the_root_file_system_is_read_only_and_home_is_writable(client: Any) -> None:
    script = (
        'id -u; echo "home=$HOME"; '
        "if touch /opt/supervisor/x 2>/dev/null; then echo root-writable; fi; "
        'echo ok > "$HOME/probe" && cat "$HOME/probe"; '
        "git -C /tmp init -q repo && echo git-ok"
    )
    exit_code, output = run(client, ["sh", "-c", script])
    assert exit_code == 0, output
    lines = output.split()
    assert lines[0] == "65534"
    assert "home=/tmp/home" in lines
    assert "root-writable" not in lines
    assert "ok" in lines
    assert "git-ok" in lines


def test_the_image_never_defaults_to_root(client: Any) -> None:
    image = client.images.get(IMAGE)
    assert image.attrs["Config"]["User"] not in ("", "0", "root", "0:0")
    exit_code, output = run(client, ["id", "-u"], user=None)
    assert exit_code == 0, output
    assert output.strip() != "0"


def test_worker_user_and_build_hash_label(client: Any) -> None:
    image = client.images.get(IMAGE)
    assert image.labels.get("supervisor.build-hash"), "setup.sh labels the image with its inputs"
    exit_code, output = run(client, ["getent", "passwd", "worker"])
    assert exit_code == 0, output
    assert output.split(":")[2] == "1000"
    assert output.split(":")[5] == "/home/worker"


def test_host_only_tools_stay_out_of_the_image(client: Any) -> None:
    exit_code, output = run(
        client,
        ["sh", "-c", "ls /opt/supervisor/node_modules; ls /opt/supervisor/node_modules/.bin"],
    )
    assert exit_code == 0, output
    names = output.split()
    assert {"claude", "codex", "gemini"} <= set(names)
    assert "repomix" not in names


def test_no_network_means_no_connection_anywhere(client: Any) -> None:
    probe = (
        "import socket\n"
        "for host, port in [('1.1.1.1', 80), ('8.8.8.8', 53), ('deb.debian.org', 80)]:\n"
        "    try:\n"
        "        socket.create_connection((host, port), timeout=3).close()\n"
        "        print('OPEN', host)\n"
        "    except OSError as e:\n"
        "        print('BLOCKED', host, type(e).__name__)\n"
    )
    exit_code, output = run(client, ["python3", "-c", probe])
    assert exit_code == 0, output
    assert "OPEN" not in output
    assert output.count("BLOCKED") == 3


@pytest.mark.xdist_group("checkout_setup")  # setup.sh holds the checkout's lock
def test_setup_names_the_step_and_the_fix_for_a_bad_ca_bundle(client: Any, tmp_path: Path) -> None:
    not_pem = tmp_path / "bundle.pem"
    not_pem.write_text("not a certificate\n")
    env = {**os.environ, "SUPERVISOR_EXTRA_CA_BUNDLE": str(not_pem), "SUPERVISOR_IMAGE": IMAGE}
    result = subprocess.run(
        ["bash", str(ROOT / "scripts" / "setup.sh")],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert result.returncode != 0
    assert "FAILED in step 6/6 (sandbox image)" in result.stderr
    assert "SUPERVISOR_EXTRA_CA_BUNDLE" in result.stderr
    assert "fix:" in result.stderr


@pytest.mark.xdist_group("checkout_setup")  # setup.sh holds the checkout's lock
def test_no_process_keeps_holding_the_setup_lock_after_setup(client: Any) -> None:
    """The engine setup starts outlives it; holding the lock, it would hang every later run."""
    lock = ROOT / ".cache" / "setup.lock"
    assert lock.exists(), "scripts/setup.sh has not run in this checkout"
    free = subprocess.run(["flock", "-n", str(lock), "true"], check=False)
    assert free.returncode == 0, "a process still holds .cache/setup.lock (see fuser -v on it)"
