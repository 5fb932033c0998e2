"""`supervisor tui` in a real terminal (tmux) of 80×24: a person approves a waiting task with a key
press, lets the TUI start `supervisor resume`, watches it carry the task to the end with every
step, role and status name whole, and quits with Ctrl-C.

The waiting task comes from the real pipeline (the real `claude` binary in the real sandbox against
the scripted model API), stopped at a `human_approval` step as tests/test_workflow_e2e.py does. The
TUI runs as its own process, as a person would start it in another terminal.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import uuid
from typing import TYPE_CHECKING, Any

import pytest
from e2e_support import (
    GOOD_CALC,
    PLAN_APPROVAL,
    implementer,
    missing,
    new_repo,
    planner,
    require_sandbox,
    reviewer,
    write_workflow,
)
from test_notify import Receiver

from supervisor.core.errors import ApprovalRequired
from supervisor.lifecycle import tasks
from supervisor.state.store import Store

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

pytestmark = pytest.mark.docker


@pytest.fixture(autouse=True)
def real_parts(api_keys: None) -> None:
    require_sandbox()
    if shutil.which("tmux") is None:
        missing("tmux not installed (scripts/setup.sh installs it)")


class Terminal:
    """A tmux session on its own server socket, so nothing of the user's tmux is touched."""

    def __init__(self, command: list[str], cwd: Path, size: tuple[int, int] = (140, 45)) -> None:
        self.socket = f"supervisor-test-{uuid.uuid4().hex[:8]}"
        self.tmux = ["tmux", "-L", self.socket, "-f", "/dev/null"]
        env_args = [f"{k}={v}" for k, v in os.environ.items() if k.startswith("SUPERVISOR_")]
        subprocess.run(
            [
                *self.tmux, "new-session", "-d", "-s", "t", "-x", str(size[0]), "-y", str(size[1]),
                "-c", str(cwd), "env", "TERM=xterm-256color", *env_args, *command,
            ],
            check=True,
        )  # fmt: skip

    def screen(self) -> str:
        done = subprocess.run(
            [*self.tmux, "capture-pane", "-p", "-t", "t"],
            capture_output=True,
            text=True,
            check=False,
        )
        return done.stdout

    def keys(self, *keys: str) -> None:
        for key in keys:
            subprocess.run([*self.tmux, "send-keys", "-t", "t", key], check=True)
            time.sleep(0.3)

    def running(self) -> bool:
        done = subprocess.run([*self.tmux, "has-session", "-t", "t"], capture_output=True)
        return done.returncode == 0

    def close(self) -> None:
        subprocess.run([*self.tmux, "kill-server"], check=False, capture_output=True)


def wait_for(what: Callable[[], Any], timeout: float, describe: Callable[[], str]) -> Any:
    deadline = time.time() + timeout
    while time.time() < deadline:
        found = what()
        if found:
            return found
        time.sleep(0.25)
    raise AssertionError(f"timed out; screen:\n{describe()}")


def test_approving_in_the_tui_and_resuming_from_it_finishes_the_task(
    tmp_path: Path, serve: Any
) -> None:
    """And the user's webhook hears that the task waits, then that it completed."""
    server = serve(planner(), implementer(GOOD_CALC), reviewer())
    repo = new_repo(tmp_path, server.url)
    hook = Receiver()
    user = tmp_path / "user"
    user.mkdir(exist_ok=True)
    (user / "config.yaml").write_text(f"notifications:\n  webhook: {hook.url}\n")
    write_workflow(repo, PLAN_APPROVAL)
    with pytest.raises(ApprovalRequired):
        tasks.start_task("Implement add and multiply", repo)
    wf = tasks.workflows(repo)[0]
    db = repo / ".supervisor" / "state.db"

    term = Terminal(
        [sys.executable, "-m", "supervisor", "tui", "--repo", str(repo)], repo, size=(80, 24)
    )
    try:
        # The step, whole, at 80 columns. Waited for, not read once: tmux may catch a frame
        # half drawn when the machine is busy.
        wait_for(
            lambda: all(s in term.screen() for s in ("awaiting_approval", "plan (approval)")),
            180,
            term.screen,
        )
        term.keys("o")
        wait_for(lambda: "[A]pprove" in term.screen(), 120, term.screen)
        term.keys("a")
        wait_for(lambda: "Resume workflow" in term.screen(), 120, term.screen)
        with Store(db) as store:
            assert store.latest_approval(wf.id).status == "approved"
        term.keys("y")  # the TUI starts `supervisor resume` and follows it in the state

        def finished() -> str | None:
            with Store(db) as store:
                status = store.workflow(wf.id).status
            return status if status in ("completed", "failed") else None

        assert wait_for(finished, 600, term.screen) == "completed"
        wait_for(lambda: " completed " in term.screen().split("\n")[2], 120, term.screen)

        def whole_words() -> bool:  # whole, not folded over two lines
            words = term.screen().replace("│", " ").split()
            return all(name in words for name in ("implementer", "reviewer", "succeeded"))

        wait_for(whole_words, 120, term.screen)
        term.keys("C-c")
        wait_for(lambda: not term.running(), 120, term.screen)
    finally:
        term.close()

    hook.server.shutdown()
    assert [(b["event"], b["workflow"]["id"]) for b in hook.bodies] == [
        ("approval", wf.id),
        ("completed", wf.id),
    ]
