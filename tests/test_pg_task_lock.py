"""With a shared state database, a task is held across hosts, not only on this one: two
supervisors with separate checkouts (so separate file locks) never run the same task at once,
and a holder that dies, even by SIGKILL, leaves the task free. Real PostgreSQL
(tests/pg_support.py), real processes; no Docker."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from typing import TYPE_CHECKING

import pytest
from sqlalchemy.engine import make_url

from supervisor import task_state as access
from supervisor.cli.render import _shown_status
from supervisor.errors import WorkflowBusyError
from supervisor.state.locks import task_lock
from supervisor.state.shared_lock import is_held
from supervisor.state.store import Store

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.xdist_group("postgres")

HOLD = """
import sys, time
from pathlib import Path
from supervisor.state.locks import task_lock
with task_lock(Path(sys.argv[1]), int(sys.argv[2])):
    print("held", flush=True)
    time.sleep(600)
"""


def test_a_task_held_on_one_host_is_refused_on_another(shared_state: str, tmp_path: Path) -> None:
    host_a, host_b = tmp_path / "a" / ".supervisor", tmp_path / "b" / ".supervisor"
    with task_lock(host_a, 7):
        assert is_held(shared_state, 7)
        with pytest.raises(WorkflowBusyError) as refused, task_lock(host_b, 7):
            pass
        assert "another host" in refused.value.message and "supervisor resume 7" in (
            refused.value.hint or ""
        )
        password = make_url(shared_state).password
        assert password and password not in refused.value.message
        with task_lock(host_b, 8):  # another task of the same database: not affected
            assert is_held(shared_state, 8)
    assert not is_held(shared_state, 7) and not is_held(shared_state, 8)
    with task_lock(host_b, 7):  # released at the end of the run
        pass


def test_a_holder_killed_by_sigkill_leaves_the_task_free(shared_state: str, tmp_path: Path) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(tmp_path / "a" / ".supervisor"), "9"],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "SUPERVISOR_STATE_URL": shared_state},
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(WorkflowBusyError), task_lock(tmp_path / "b" / ".supervisor", 9):
            pass
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    deadline = time.monotonic() + 10  # the server sees the closed connection at once locally
    while is_held(shared_state, 9) and time.monotonic() < deadline:
        time.sleep(0.1)
    with task_lock(tmp_path / "b" / ".supervisor", 9):
        assert is_held(shared_state, 9)


def test_status_tells_a_task_running_on_another_host_from_one_whose_supervisor_died(
    shared_state: str, tmp_path: Path
) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "init"], check=True)
    with Store(repo / ".supervisor" / "state.db", url=shared_state) as store:
        ids = [
            store.create_workflow(
                description="t", cli="claude", base_branch="main", base_sha="a" * 40,
                branch_for_id=lambda i: f"ai/{i}-t", definition={}, first_step="plan",
            ).id
            for _ in range(2)
        ]  # fmt: skip
    found = access.workflows(repo)
    assert {wf.id: wf.status for wf in found} == dict.fromkeys(ids, "running")
    with task_lock(tmp_path / "other-host" / ".supervisor", ids[0]):
        pids = access.supervisors(repo, found)
    assert pids == {ids[0]: access.ELSEWHERE, ids[1]: None}
    assert "no supervisor" not in _shown_status(found[0], pids)
    assert "no supervisor" in _shown_status(found[1], pids)
