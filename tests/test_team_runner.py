"""One truth about who runs a task in team mode (issue 29), on real PostgreSQL, real processes
and real git; no Docker, no Temporal server.

A task's hold is a lease row renewed by its holder: a holder paused with SIGSTOP (or cut off)
stops renewing it, `status` says it is stalled and for how long, and once the lease expires
another host takes the task over; the paused holder, woken, may not commit. A task submitted to
Temporal is never shown as "no supervisor": queued (with or without a worker on its queue),
running on a named host, or failed in Temporal with the reason the workflow recorded.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from typing import TYPE_CHECKING

import pytest

from supervisor.core.errors import RemoteNotUpdatedError, StateError, WorkflowBusyError
from supervisor.lifecycle import task_state as access
from supervisor.state import leases
from supervisor.state.locks import task_lock
from supervisor.state.runner_view import FAILED, SUBMITTED
from supervisor.state.store import EventSpec, Store

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


def git_repo(path: Path) -> Path:
    git = ["git", "-C", str(path), "-c", "user.name=t", "-c", "user.email=t@t"]
    path.mkdir(parents=True)
    subprocess.run([*git, "init", "-q", "-b", "main"], check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", f"init {path.name}"], check=True)
    return path


def new_task(store: Store) -> int:
    return store.create_workflow(
        description="t", cli="claude", base_branch="main", base_sha="a" * 40,
        branch_for_id=lambda i: f"ai/{i}-t", definition={}, first_step="implement",
    ).id  # fmt: skip


def shown(repo: Path) -> dict[int, str]:
    found = access.workflows(repo)
    return access.runners(repo, found, access.supervisors(repo, found))


def test_a_paused_holder_is_shown_stalled_loses_the_task_and_may_not_commit(
    shared_state: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Renewed every third of it: 8 s leaves a holder 5 s late before it looks stalled, where
    # 3 s left it 2 s, which a loaded machine can take between two renewals.
    monkeypatch.setenv("SUPERVISOR_LEASE_SECONDS", "8")
    repo = git_repo(tmp_path / "repo")
    with Store(repo / ".supervisor" / "state.db") as store:
        wf_id = new_task(store)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(tmp_path / "host-a" / ".supervisor"), str(wf_id)],
        stdout=subprocess.PIPE, text=True, env=os.environ.copy(),
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        assert shown(repo)[wf_id].startswith("running on ")
        with pytest.raises(WorkflowBusyError) as busy, task_lock(tmp_path / "b", wf_id):
            pass
        assert f"process {holder.pid}" in busy.value.message
        holder.send_signal(signal.SIGSTOP)  # alive, its connection open, silent
        deadline = time.monotonic() + 60
        while "stalled" not in shown(repo)[wf_id] and time.monotonic() < deadline:
            time.sleep(0.5)
        assert shown(repo)[wf_id].startswith(f"stalled: worker {leases.host()} silent for ")
        with task_lock(tmp_path / "host-b" / ".supervisor", wf_id):  # taken over
            assert "running on" in shown(repo)[wf_id]
            with Store(repo / ".supervisor" / "state.db") as store:
                row = leases.read(store.engine, leases.task_name(wf_id))
            assert row is not None and row.pid == os.getpid()
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()


def test_a_holder_that_lost_its_lease_is_refused_at_its_commit(
    shared_state: str, tmp_path: Path
) -> None:
    with Store(tmp_path / "state.db") as store:
        first = leases.acquire(store.engine, "task:41", 41, ttl_s=0.5)
        time.sleep(1.0)  # paused past its time to live
        second = leases.acquire(store.engine, "task:41", 41, ttl_s=30)
        with pytest.raises(RemoteNotUpdatedError) as refused:
            first.check()
        assert "not committed" in refused.value.message
        second.check()  # the new holder commits
        first.release()  # releases nothing of the new holder's
        assert leases.read(store.engine, "task:41") is not None
        second.release()
        assert leases.read(store.engine, "task:41") is None


def test_a_task_submitted_to_temporal_is_queued_running_or_failed_never_without_supervisor(
    state_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if state_url:
        monkeypatch.setenv("SUPERVISOR_STATE_URL", state_url)
    repo = git_repo(tmp_path / "repo")
    where = {"task_queue": "supervisor-abc", "workflow_id": "w", "address": "x", "namespace": "d"}
    with Store(repo / ".supervisor" / "state.db") as store:
        queued, failed, embedded = new_task(store), new_task(store), new_task(store)
        for wf_id in (queued, failed):
            store.add_event(wf_id, EventSpec(SUBMITTED, status="submitted", payload=where))
        store.set_status(
            failed, "failed", error="x",
            event=EventSpec(FAILED, status="failed", payload={"reason": "activity gave up"}),
        )  # fmt: skip
        assert shown(repo) == {
            queued: "queued (no worker on queue supervisor-abc)",
            failed: "failed in Temporal: activity gave up",
            embedded: "running (no supervisor)",  # a task of this host's runner, killed
        }
        worker = leases.worker_name("supervisor-abc", "hostb-1")
        with leases.hold(store.engine, worker, None, doing="repository abc"):
            assert shown(repo)[queued] == "queued on supervisor-abc (1 worker polling)"
            name = leases.component_name(queued, "c2")
            with leases.hold(store.engine, name, queued, doing="component c2"):
                assert shown(repo)[queued] == f"running on {leases.host()} (component c2)"


def test_a_worker_refuses_a_database_holding_another_repositorys_tasks(
    shared_state: str, tmp_path: Path
) -> None:
    from supervisor.lifecycle.opening import open_project
    from supervisor.temporal.identity import queue_for, repository_id
    from supervisor.temporal.worker import preflight

    first, second = git_repo(tmp_path / "first"), git_repo(tmp_path / "second")
    assert repository_id(first) != repository_id(second)
    settings = open_project(first).settings.temporal
    assert queue_for(first, settings) != queue_for(second, settings)  # one queue per repository
    with Store(first / ".supervisor" / "state.db") as store:
        wf_id = new_task(store)
        payload = {"task_queue": "q", "repository": repository_id(first)}
        store.add_event(wf_id, EventSpec(SUBMITTED, status="submitted", payload=payload))
    assert preflight(open_project(first)) == repository_id(first)
    with pytest.raises(StateError) as refused:
        preflight(open_project(second))
    assert "another repository" in refused.value.message
    assert "its own database" in (refused.value.hint or "")
