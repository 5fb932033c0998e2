"""Ctrl-C during `supervisor demo` (issue 59): the demo's model API is its own scripted server,
which ends with the process, so a `resume` of its task could only fail. The demo says so and
how to run it again, and exits 130 as any interrupted command, through the real CLI, the real
sandbox and claude."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from typing import TYPE_CHECKING

import pytest
from e2e_support import require_sandbox

from supervisor.core.errors import SupervisorError
from supervisor.lifecycle import tasks

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.docker


def test_ctrl_c_during_the_demo_says_its_task_cannot_be_resumed_and_how_to_run_it_again(
    tmp_path: Path, api_keys: None
) -> None:
    require_sandbox()
    repo = tmp_path / "demo"
    demo = subprocess.Popen(
        [sys.executable, "-m", "supervisor", "demo", "--keep", str(repo)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "COLUMNS": "200"},
    )
    deadline = time.monotonic() + 300  # however loaded the machine: the task's start ends it
    started = False
    while not started and demo.poll() is None and time.monotonic() < deadline:
        with contextlib.suppress(SupervisorError):  # no state yet
            started = bool(tasks.workflows(repo))
        time.sleep(0.1)
    assert started, "the demo's task never started"
    demo.send_signal(signal.SIGINT)
    out, err = demo.communicate(timeout=300)

    assert demo.returncode == 130, out[-2000:] + err[-2000:]
    said = " ".join(err.split())
    assert "The demo's scripted model API ended with it, so its task cannot be resumed" in said
    assert f"supervisor demo --keep {repo}" in said
    assert "Traceback" not in err
