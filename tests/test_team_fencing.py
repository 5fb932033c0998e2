"""Team mode, round two (issue 58, items 1-3), on real PostgreSQL, the Temporal dev server, real
git and real `supervisor worker` processes over the stand-in sandbox (tests/standin_cli.py);
the second worker is the real workflow and activities in this process (tests/temporal_standin.py).

1. A worker paused (SIGSTOP) while it holds a step: the step's retry on a live worker finds the
   task's lease still valid and waits for it (a busy refusal is a wait, never a failure), takes
   the task over once it expires and completes it; the workflow ends as the state says.
2. The paused worker, woken (SIGCONT), writes nothing into the task and pushes nothing to the
   shared remote (its lease, the fence, was taken over), and says so in one line, no traceback;
   a component's push is fenced the same way: by its lease, and by the remote's branch as it was
   at the component's start.
3. `status <id> --watch --exit-status` of a Temporal task follows its workers and queue, not a
   local pid: it keeps watching a queued task while a worker polls, and exits 0 when it is done.

Round two: a component's fence holds on SQLite too (workers of one host sharing the state
file); a local task's holder, paused, is never taken over (its file lock), so there is nothing
to fence.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import standin_cli
from temporal_standin import Sandbox, submit, use_sandbox, work_until_done
from temporal_support import DevServer
from test_engine_fast import TASK, Project, project, reviews, warm_packer, writes

from supervisor.core.errors import RemoteNotUpdatedError
from supervisor.lifecycle.opening import reading
from supervisor.state import leases
from supervisor.state.store import EventSpec, Store
from supervisor.workspace import remote

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Iterator

pytestmark = pytest.mark.xdist_group("postgres")
__all__ = ["project", "warm_packer"]

WAIT_S = 120.0  # the longest a spec waits for a moment to come (a bound, never a measure)
WORKFLOW = """implement
  steps:
    implement: {role: implementer, next: review}
    review: {role: reviewer, next: commit}
    commit: {action: commit}
"""
STANDIN = str(Path(standin_cli.__file__))


@pytest.fixture(scope="module")
def temporal_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    """One dev server for this file's specs (each on a task queue of its own)."""
    server = DevServer(tmp_path_factory.mktemp("temporal"))
    yield server
    server.stop()


def on_temporal(repo: Path, server: DevServer, shared: Path | None = None) -> str:
    """The repository's config pointed at `server` on a queue of the spec's own, a silent
    worker's step given to another after 2 s, `shared` as the team's remote; the queue."""
    from supervisor.guard.trust import trust

    queue = f"spec-{uuid.uuid4().hex[:8]}"
    extra = f", remote: '{shared}'" if shared else ""
    with (repo / ".supervisor" / "config.yaml").open("a") as config:
        config.write(
            f"temporal: {{address: '{server.address}', task_queue: {queue}, "
            f"heartbeat_timeout_seconds: 2{extra}}}\n"
        )
    trust(repo)
    return queue


def a_worker(repo: Path, log: Path, tmp_path: Path) -> subprocess.Popen[bytes]:
    """`supervisor worker` as a process of its own, its implementer waiting for the spec
    (STANDIN_IMPLEMENTER=waits: `tmp_path/working` once it works, `tmp_path/release` lets it
    answer)."""
    env = {
        **os.environ,
        "STANDIN_IMPLEMENTER": "waits",
        "STANDIN_MARK": str(tmp_path / "working"),
        "STANDIN_RELEASE": str(tmp_path / "release"),
    }
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, STANDIN, "worker", "--repo", str(repo), "--max-parallel", "1"],
            stdout=out, stderr=subprocess.STDOUT, env=env,
        )  # fmt: skip


def a_clone(shared: Path, checkout: Path, path: Path) -> Path:
    """A worker host's own clone of the team's remote, with the project's config, trusted."""
    from supervisor.guard.trust import trust

    subprocess.run(["git", "clone", "-q", str(shared), str(path)], check=True)
    (path / ".supervisor").mkdir(exist_ok=True)
    for name in ("config.yaml", "workflow.yaml"):
        shutil.copy(checkout / ".supervisor" / name, path / ".supervisor" / name)
    trust(path)
    return path


def lease_at_retry(
    repo: Path, wf_id: int, met: list[leases.Lease | None]
) -> Callable[[Any], Awaitable[None]]:
    """A watch of the workflow: the task's lease as it is when the step's retry has started
    (its second attempt), while still valid (None: none was)."""

    async def watch(handle: Any) -> None:
        while not met:
            described = await handle.describe()
            pending = described.raw_description.pending_activities
            if any(a.attempt >= 2 and a.last_started_time.seconds for a in pending):
                with reading(repo) as store:
                    found = leases.read(store.engine, leases.task_name(wf_id))
                met.append(found if found is not None and not found.expired() else None)
            await asyncio.sleep(0.1)

    return watch


def until(moment: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not moment():
        assert time.monotonic() < deadline, f"never came: {what}"
        time.sleep(0.1)


def stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGCONT)
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def remote_tip(shared: Path, ref: str) -> str:
    return subprocess.run(
        ["git", "--git-dir", str(shared), "rev-parse", ref],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip


def test_a_worker_paused_holding_a_step_is_waited_for_and_woken_writes_and_pushes_nothing(
    project: Callable[..., Project],
    shared_state: str,
    temporal_server: DevServer,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    # Longer than the heartbeat timeout (2 s) and the retry's backoff: the retry meets the paused
    # worker's lease still valid, and waits for it.
    monkeypatch.setenv("SUPERVISOR_LEASE_SECONDS", "8")
    p = project(
        WORKFLOW,
        None,
        ("ROLE: implementer", writes({"answer.txt": "42\n"})),
        ("ROLE: reviewer", reviews("APPROVED")),
    )
    shared = tmp_path / "team.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(p.root), str(shared)], check=True)
    queue = on_temporal(p.root, temporal_server, shared)
    wf_id, wid = submit(p.root, TASK)
    log = tmp_path / "paused-worker.log"
    paused = a_worker(p.root, log, tmp_path)
    try:
        until(lambda: (tmp_path / "working").exists() or paused.poll() is not None, "its step")
        assert paused.poll() is None, log.read_text()
        paused.send_signal(signal.SIGSTOP)  # alive, holding the step's lease, silent

        # Another host: its own clone (the paused worker's clone keeps the task's file lock).
        use_sandbox(monkeypatch, Sandbox(p.script))
        host_b = a_clone(shared, p.root, tmp_path / "host-b")
        met: list[leases.Lease | None] = []
        wf = work_until_done(
            host_b, temporal_server, queue, wf_id, wid, lease_at_retry(host_b, wf_id, met)
        )
        assert met and met[0] is not None and met[0].pid == paused.pid  # it met a live lease
        assert wf.status == "completed", wf.error  # waited for the lease, then took it over
        branch = f"refs/heads/{wf.task_branch}"
        done_at = remote_tip(shared, branch)

        paused.send_signal(signal.SIGCONT)
        (tmp_path / "release").touch()  # its implementer answers now
        until(lambda: "given to another worker" in log.read_text(), "the woken worker's line")
    finally:
        stop(paused)
    said = log.read_text()
    assert "Traceback" not in said, said
    woken = [line for line in said.splitlines() if "given to another worker" in line]
    assert len(woken) == 1 and "was not committed" in woken[0], said
    assert remote_tip(shared, branch) == done_at  # its attempt pushed nothing
    answer = subprocess.run(
        ["git", "--git-dir", str(shared), "show", f"{branch}:answer.txt"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert answer == "42\n"  # the live worker's answer
    with reading(p.root) as store:
        assert store.workflow(wf_id).status == "completed"
        kinds = [e.type for e in store.events(wf_id)]
    assert kinds.count("implementation") == 1 and "temporal_failed" not in kinds, kinds
    assert kinds[-1] == "workflow_completed", kinds  # nothing of the woken worker after it


def test_a_component_run_whose_lease_was_taken_over_pushes_and_writes_nothing(
    shared_state: str, tmp_path: Path
) -> None:
    """Real git and a real lease on PostgreSQL: the woken run's lease check refuses its push and
    its state writes; and
    its push, had the check passed a moment before the take-over, lands nothing over the branch
    another worker pushed since the component's start (the remote's own compare-and-swap)."""
    from datetime import UTC, datetime

    from supervisor.state.records import Workflow

    shared, a, b = tmp_path / "team.git", tmp_path / "a", tmp_path / "b"
    subprocess.run(["git", "init", "-q", "--bare", str(shared)], check=True)
    for host in (a, b):
        git = ["git", "-C", str(host), "-c", "user.name=t", "-c", "user.email=t@t"]
        host.mkdir()
        subprocess.run([*git, "init", "-q", "-b", "main"], check=True)
        subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", host.name], check=True)
        subprocess.run([*git, "branch", "ai/1-t--c1"], check=True)
    now = datetime.now(UTC)
    wf = Workflow(
        1, "t", "running", "implement", "claude", "main", "0" * 40, "ai/1-t", {}, {}, None,
        now, now,
    )  # fmt: skip
    attempts = "refs/supervisor/wf1/attempts/implement/c1"
    url = str(shared)
    at_a_start = remote.component_branches(a, url, wf)  # before it was paused
    with Store(tmp_path / "state.db", url=shared_state) as store:
        wf_id = store.create_workflow(
            description="t", cli="claude", base_branch="main", base_sha="a" * 40,
            branch_for_id=lambda i: f"ai/{i}-t", definition={}, first_step="implement",
        ).id  # fmt: skip
        first = leases.acquire(store.engine, leases.component_name(wf_id, "c1"), wf_id, ttl_s=0.5)
        time.sleep(1.0)  # paused past its time to live; another worker takes the component
        with leases.hold(store.engine, leases.component_name(wf_id, "c1"), wf_id, ttl_s=30):
            remote.push_component(
                b, url, "ai/1-t--c1", attempts, remote.component_branches(b, url, wf)
            )
            merged = remote_tip(shared, "refs/heads/ai/1-t--c1")
            with pytest.raises(RemoteNotUpdatedError), leases.held_here(wf_id, first):
                store.add_event(wf_id, EventSpec("component_ran", status="started"))
            with pytest.raises(RemoteNotUpdatedError) as fenced:
                remote.push_component(a, url, "ai/1-t--c1", attempts, at_a_start, first.check)
            assert "not committed" in fenced.value.message  # refused before any push
            with pytest.raises(RemoteNotUpdatedError) as moved:
                remote.push_component(a, url, "ai/1-t--c1", attempts, at_a_start)
            assert "was not pushed" in moved.value.message
        assert [e.type for e in store.events(wf_id)].count("component_ran") == 0
    assert remote_tip(shared, "refs/heads/ai/1-t--c1") == merged


def test_watch_exit_status_of_a_temporal_task_follows_its_workers_not_a_local_pid(
    project: Callable[..., Project],
    shared_state: str,
    temporal_server: DevServer,
    tmp_path: Path,
) -> None:
    """Two tasks, one worker that runs one step at a time: the second waits on the queue with no
    lease of its own while the worker polls (busy with the first). Its watch keeps watching (it
    exited 1 after two refreshes: "No supervisor runs workflow ... any more"), and exits 0 once
    the worker has run it to the end."""
    p = project(
        WORKFLOW,
        None,
        ("ROLE: implementer", writes({"answer.txt": "42\n"})),
        ("ROLE: reviewer", reviews("APPROVED")),
    )
    on_temporal(p.root, temporal_server)
    first, _ = submit(p.root, TASK)
    second, _ = submit(p.root, TASK)
    log = tmp_path / "worker.log"
    worker = a_worker(p.root, log, tmp_path)
    try:
        until(lambda: (tmp_path / "working").exists() or worker.poll() is not None, "a step")
        assert worker.poll() is None, log.read_text()
        queued = second if _holds(p.root, first) else first  # one step at a time: the other
        watch = subprocess.Popen(
            [sys.executable, STANDIN, "status", str(queued), "--watch", "--exit-status",
             "--interval", "0.2", "--repo", str(p.root)],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        try:
            time.sleep(1.2)  # six refreshes of a queued task; it gave up after two
            assert watch.poll() is None, watch.communicate()[0]
            (tmp_path / "release").touch()  # the worker finishes the first, then the second
            out, _ = watch.communicate(timeout=WAIT_S)
        finally:
            if watch.poll() is None:
                watch.kill()
                watch.wait()
        assert watch.returncode == 0, out
        assert f"Workflow {queued} completed." in out
    finally:
        stop(worker)


def _holds(repo: Path, wf_id: int) -> bool:
    """Whether a live process holds task `wf_id` now (the one the worker works on)."""
    with reading(repo) as store:
        found = leases.all_leases(store)
    return any(x.name == leases.task_name(wf_id) and not x.expired() for x in found)


def test_a_component_whose_lease_was_taken_over_writes_nothing_on_sqlite_either(
    tmp_path: Path,
) -> None:
    """Workers of one host sharing the repository's SQLite state (Temporal without a shared
    database): a component's lease is a row, not a file lock, so a worker paused past its time
    to live loses it to another. Woken, its writes are refused as on PostgreSQL (they went
    through: only a shared database's holds fenced); the live holder's land."""
    with Store(tmp_path / "state.db") as store:
        wf_id = store.create_workflow(
            description="t", cli="claude", base_branch="main", base_sha="a" * 40,
            branch_for_id=lambda i: f"ai/{i}-t", definition={}, first_step="implement",
        ).id  # fmt: skip
        name = leases.component_name(wf_id, "c1")
        paused = leases.acquire(store.engine, name, wf_id, ttl_s=0.2)
        until(lambda: _expired(store, name), "the paused hold's expiry")
        with leases.hold(store.engine, name, wf_id, ttl_s=30) as taken:
            with pytest.raises(RemoteNotUpdatedError), leases.held_here(wf_id, paused):
                store.add_event(wf_id, EventSpec("component_ran", status="woken"))
            with leases.held_here(wf_id, taken):
                store.add_event(wf_id, EventSpec("component_ran", status="taken over"))
        ran = [e.status for e in store.events(wf_id) if e.type == "component_ran"]
    assert ran == ["taken over"]


def _expired(store: Store, name: str) -> bool:
    found = leases.read(store.engine, name)
    return found is not None and found.expired()


HOLDER = """import sys, time
from pathlib import Path
from supervisor.state.locks import task_lock
from supervisor.state.store import EventSpec, Store
state, held, go = (Path(a) for a in sys.argv[1:])
with task_lock(state, 1):
    held.touch()
    while not go.exists():
        time.sleep(0.05)
    with Store(state / "state.db") as store:
        store.add_event(1, EventSpec("implementation", status="woken"))
"""


def test_a_local_task_held_by_a_paused_process_cannot_be_taken_so_its_woken_writes_stand(
    tmp_path: Path,
) -> None:
    """Local mode with SQLite: the task's lock is a file lock (flock), which the kernel keeps
    for a stopped process as long as it lives, whatever its lease row says; so no other process
    takes the task over, and the woken holder's writes are its own (nothing to fence). A
    component runs in a thread of that process, under the same lock."""
    state = tmp_path / ".supervisor"
    state.mkdir()
    with Store(state / "state.db") as store:
        store.create_workflow(
            description="t", cli="claude", base_branch="main", base_sha="a" * 40,
            branch_for_id=lambda i: f"ai/{i}-t", definition={}, first_step="implement",
        )  # fmt: skip
    held, go = tmp_path / "held", tmp_path / "go"
    env = {k: v for k, v in os.environ.items() if k != "SUPERVISOR_STATE_URL"}
    holder: subprocess.Popen[bytes] = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(state), str(held), str(go)],
        env={**env, "SUPERVISOR_LEASE_SECONDS": "0.5"},
    )
    try:
        until(lambda: held.exists() or holder.poll() is not None, "the holder's lock")
        holder.send_signal(signal.SIGSTOP)
        with Store(state / "state.db") as store:
            name = leases.task_name(1)
            until(lambda: _expired(store, name), "its lease's expiry")
        from supervisor.core.errors import WorkflowBusyError
        from supervisor.state.locks import task_lock

        with pytest.raises(WorkflowBusyError, match="still running"), task_lock(state, 1):
            pass  # a `resume` here is refused: the paused process keeps the task
        holder.send_signal(signal.SIGCONT)
        go.touch()
        assert holder.wait(timeout=WAIT_S) == 0
    finally:
        stop(holder)
    with Store(state / "state.db") as store:
        assert [e.status for e in store.events(1) if e.type == "implementation"] == ["woken"]
