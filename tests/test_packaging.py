"""A non-editable install works on its own, from any directory.

The wheel must carry what used to live only in the checkout (config/, prompts/, the sandbox build
files, the setup script and the npm lock file); `supervisor setup` must install Repomix and the
CLIs into the user's data directory and leave the sandbox image ready; and `supervisor demo` must
then complete from a directory that is not the checkout. Slow (a wheel build, a fresh venv, an
`npm ci`, a real demo), the wheel spec is marked slow: `-m "not slow"` leaves it out of a fast
run; the full suite runs it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from e2e_support import missing, require_sandbox

pytestmark = pytest.mark.docker

CHECKOUT = Path(__file__).resolve().parents[1]
NOT_SOURCE = shutil.ignore_patterns(
    ".git",
    ".venv",
    "node_modules",
    ".cache",
    ".supervisor",
    "build",
    "*.egg-info",
    "__pycache__",
    ".*_cache",
)


def run(argv: list[str], cwd: Path, env: dict[str, str], timeout: float) -> str:
    done = subprocess.run(
        argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, f"{' '.join(argv)} exited {done.returncode}:\n{output[-4000:]}"
    return output


@pytest.mark.slow
def test_a_wheel_in_a_fresh_venv_sets_up_and_runs_the_demo_outside_the_checkout(
    tmp_path: Path,
) -> None:
    require_sandbox()
    if shutil.which("npm") is None or shutil.which("node") is None:
        missing("node and npm are needed to install Repomix and the CLIs")
    started = time.monotonic()
    phases: dict[str, float] = {}

    def phase(name: str) -> None:
        """Where the spec's minutes go (printed at the end; run with -s to see it)."""
        phases[name] = round(time.monotonic() - started - sum(phases.values()), 1)

    # Built from a copy of the source (no .venv, node_modules or caches to lean on).
    source = tmp_path / "source"
    shutil.copytree(CHECKOUT, source, ignore=NOT_SOURCE)
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env["SUPERVISOR_NPM_KEEP"] = ""  # npm ci itself, not the user's kept copy of its tree
    wheels = tmp_path / "wheels"
    # uv, when setup installed it next to this interpreter (scripts/setup.sh step 3), builds and
    # installs in a few seconds where pip takes a minute on a loaded machine; what lands in the
    # venv is the same wheel and the same pinned dependencies either way.
    uv = Path(sys.executable).with_name("uv")
    if uv.exists():
        run([str(uv), "build", "-q", "--wheel", "-o", str(wheels), str(source)], tmp_path, env, 600)
    else:
        run(
            [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(wheels),
             str(source)],
            tmp_path, env, 600,
        )  # fmt: skip
    (wheel,) = wheels.glob("supervisor-*.whl")
    phase("wheel")
    venv = tmp_path / "venv"
    # A venv without pip of its own (ensurepip: 43 s of a loaded machine's wall time against
    # 0.25 s without), filled from outside (`--python`): an installed supervisor never runs pip
    # (setup's venv step is the checkout's only), so what lands in the venv is the same.
    run([sys.executable, "-m", "venv", "--without-pip", str(venv)], tmp_path, env, 120)
    pins = ["-c", str(CHECKOUT / "requirements.txt")]
    # No byte-compiling (uv's default, pip's --no-compile): the interpreter compiles what it
    # imports; compiling every dependency up front was about a third of pip's install CPU and is
    # not what this spec checks.
    python = ["--python", str(venv / "bin" / "python")]
    if uv.exists():
        pip = [str(uv), "pip", "install", "-q", *python]
    else:
        pip = [sys.executable, "-m", "pip", *python, "install", "-q", "--no-compile"]
    run([*pip, str(wheel), *pins], tmp_path, env, 900)
    phase("venv and install")
    shutil.rmtree(source)  # nothing may come from a checkout from here on

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    home = tmp_path / "supervisor-home"
    env |= {"SUPERVISOR_HOME": str(home), "SUPERVISOR_USER_DIR": str(tmp_path / "user")}
    where = run(
        [
            str(venv / "bin" / "python"),
            "-c",
            "from supervisor.core import resources as r; print(r.data_root()); print(r.NODE_BIN)",
        ],
        elsewhere,
        env,
        300,  # a first import compiles from source (--no-compile); a loaded machine is slow
    ).split()
    assert Path(where[0]).is_relative_to(venv), f"config is read from {where[0]}, not the install"
    assert (Path(where[0]) / "config" / "defaults.yaml").is_file()
    assert Path(where[1]) == home / "node" / "node_modules" / ".bin"

    supervisor = str(venv / "bin" / "supervisor")
    run([supervisor, "setup"], elsewhere, env, 1800)
    phase("setup")
    for tool in ("repomix", "claude", "codex", "gemini"):
        assert (home / "node" / "node_modules" / ".bin" / tool).exists(), f"{tool} not installed"
    again = run([supervisor, "setup", "--quiet"], elsewhere, env, 120)
    assert "installing" not in again and "building" not in again, f"setup redid work:\n{again}"

    phase("setup again")
    kept = tmp_path / "demo"
    demo = run([supervisor, "demo", "--keep", str(kept)], elsewhere, env, 900)
    assert "workflow 1 completed" in demo, demo[-3000:]
    phase("demo")
    board = web_board(supervisor, elsewhere, env)  # the registry found the demo's repository
    assert "Implement add() and multiply()" in board and ">completed<" in board
    phase("web")
    print(f"wheel build, install, setup and demo: {time.monotonic() - started:.0f} s: {phases}")


@pytest.mark.xdist_group("checkout_setup")  # setup.sh holds the checkout's lock
def test_setup_from_a_checkout_runs_the_checkouts_script_and_redoes_nothing() -> None:
    """`supervisor setup` in a checkout (editable install) is scripts/setup.sh minus the venv
    step: with everything in place it does no work."""
    require_sandbox()
    supervisor = Path(sys.executable).with_name("supervisor")
    stamp = CHECKOUT / ".venv" / ".setup-stamp"
    before = stamp.stat().st_mtime if stamp.exists() else None
    output = run([str(supervisor), "setup"], CHECKOUT, dict(os.environ), 300)
    assert "Python environment: supervisor is installed (step skipped)" in output
    assert "npm tools ready" in output and "all set" in output
    assert "installing" not in output and "building" not in output, output
    assert (stamp.stat().st_mtime if stamp.exists() else None) == before


def test_a_failing_setup_step_is_named_and_the_command_fails(tmp_path: Path) -> None:
    require_sandbox()
    supervisor = Path(sys.executable).with_name("supervisor")
    env = {**os.environ, "SUPERVISOR_EXTRA_CA_BUNDLE": str(tmp_path / "absent.pem")}
    done = subprocess.run(
        [str(supervisor), "setup", "--quiet"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "FAILED in step 6/6 (sandbox image)" in done.stderr
    assert "error: Setup failed" in done.stderr and "re-run `supervisor setup`" in done.stderr


def test_a_checkout_of_a_lock_file_installed_before_copies_that_tree_instead_of_npm_ci(
    tmp_path: Path,
) -> None:
    """npm ci's tree depends on the lock file alone: the last one is kept per user, and a new
    checkout of the same lock copies it. The kept tree here is this checkout's own (linked)."""
    require_sandbox()
    lock_hash = subprocess.run(
        ["sha256sum"], input=(CHECKOUT / "package-lock.json").read_bytes(), capture_output=True
    ).stdout.decode()[:16]
    keep = tmp_path / "keep"
    keep.mkdir()
    subprocess.run(["cp", "-al", str(CHECKOUT / "node_modules"), str(keep / lock_hash)], check=True)
    assert (keep / lock_hash / ".setup-stamp").read_text().strip() == lock_hash
    source = tmp_path / "source"
    shutil.copytree(CHECKOUT, source, ignore=NOT_SOURCE)
    env = {**os.environ, "SUPERVISOR_SETUP_SKIP_VENV": "1", "SUPERVISOR_NPM_KEEP": str(keep)}

    output = run(["bash", "scripts/setup.sh"], source, env, 300)

    assert "copying Repomix and the AI CLIs as npm ci installed them" in output
    assert "installing Repomix" not in output
    assert "all set" in output
    for binary in ("claude", "codex", "gemini", "repomix"):
        assert (source / "node_modules" / ".bin" / binary).exists()
    assert not (source / ".node_modules.partial").exists()
    again = run(["bash", "scripts/setup.sh"], source, env, 300)
    assert "copying" not in again and "installing Repomix" not in again  # stamped: no work


def web_board(supervisor: str, cwd: Path, env: dict[str, str]) -> str:
    """`supervisor web` of the installed package, signed in with its printed token: the board's
    page, once its script and stylesheet (package data) were served too."""
    import http.client
    import re
    import signal

    web = subprocess.Popen(
        [supervisor, "web", "--port", "0", "--no-open"], cwd=cwd, env=env, text=True,
        stdout=subprocess.PIPE,
    )  # fmt: skip
    try:
        assert web.stdout is not None
        url = web.stdout.readline().strip()
        found = re.fullmatch(r"http://127\.0\.0\.1:(\d+)/\?token=([\w-]+)", url)
        assert found, url

        def get(path: str, cookie: str = "") -> http.client.HTTPResponse:
            conn = http.client.HTTPConnection("127.0.0.1", int(found[1]), timeout=60)
            conn.request("GET", path, headers={"cookie": cookie} if cookie else {})
            return conn.getresponse()

        signed = get(f"/?token={found[2]}")
        cookie = signed.getheader("set-cookie", "").split(";")[0]
        for asset in ("/static/app.js", "/static/app.css"):
            assert get(asset, cookie).status == 200, asset
        return get("/", cookie).read().decode()
    finally:
        web.send_signal(signal.SIGTERM)
        web.wait(timeout=30)
