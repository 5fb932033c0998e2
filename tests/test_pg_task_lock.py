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

from supervisor.core.errors import WorkflowBusyError
from supervisor.lifecycle import task_state as access
from supervisor.state.locks import task_lock
from supervisor.state.shared_lock import is_held
from supervisor.state.store import EventSpec, Store
from supervisor.views.render import _shown_status

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


PAUSED_WRITER = """
import sys
from pathlib import Path
from supervisor.core.errors import RemoteNotUpdatedError
from supervisor.state.locks import task_lock
from supervisor.state.store import EventSpec, Store
state, wf_id = Path(sys.argv[1]), int(sys.argv[2])
with Store(state / "state.db") as store, task_lock(state, wf_id):
    print("held", flush=True)
    sys.stdin.readline()  # paused meanwhile, past its lease
    try:
        store.add_event(wf_id, EventSpec("context_packed", step="implement"))
        print("written", flush=True)
    except RemoteNotUpdatedError:
        print("refused", flush=True)
"""


def paused_holder(shared_state: str, tmp_path: Path) -> tuple[subprocess.Popen[str], int]:
    """A process holding a new task with a 1 s lease, then stopped (SIGSTOP) for 1.5 s: past
    its lease, so another host may take the task over."""
    with Store(tmp_path / "state.db", url=shared_state) as store:
        wf_id = store.create_workflow(
            description="t", cli="claude", base_branch="main", base_sha="a" * 40,
            branch_for_id=lambda i: f"ai/{i}-t", definition={}, first_step="plan",
        ).id  # fmt: skip
    env = {**os.environ, "SUPERVISOR_STATE_URL": shared_state, "SUPERVISOR_LEASE_SECONDS": "1"}
    holder = subprocess.Popen(
        [sys.executable, "-c", PAUSED_WRITER, str(tmp_path / "a" / ".supervisor"), str(wf_id)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    assert holder.stdin is not None and holder.stdout is not None
    assert holder.stdout.readline().strip() == "held"
    holder.send_signal(signal.SIGSTOP)
    time.sleep(1.5)
    return holder, wf_id


def woken_writes(holder: subprocess.Popen[str]) -> str:
    """The holder woken and asked to write an event: "written" or "refused"."""
    assert holder.stdin is not None and holder.stdout is not None
    holder.send_signal(signal.SIGCONT)
    holder.stdin.write("go\n")
    holder.stdin.flush()
    return holder.stdout.readline().strip()


def test_a_holder_paused_past_its_lease_writes_nothing_into_the_task_another_took_over(
    shared_state: str, tmp_path: Path
) -> None:
    """A worker stopped while it holds a task loses the task to another; once it runs again,
    its next write to the task is refused before anything lands (the other's completion stays
    the task's last event)."""
    holder, wf_id = paused_holder(shared_state, tmp_path)
    try:
        with (
            task_lock(tmp_path / "b" / ".supervisor", wf_id),
            Store(tmp_path / "state.db", url=shared_state) as store,
        ):
            store.add_event(wf_id, EventSpec("workflow_completed", status="completed"))
            said = woken_writes(holder)
            events = [e.type for e in store.events(wf_id)]
    finally:
        holder.kill()
        holder.wait()
    assert said == "refused"
    assert events[-1] == "workflow_completed" and "context_packed" not in events


def test_a_holder_paused_past_its_lease_that_nobody_took_over_goes_on_writing(
    shared_state: str, tmp_path: Path
) -> None:
    """A laptop that slept through its lease with nobody taking the task: its renewal says it
    still holds it, and its writes land."""
    holder, wf_id = paused_holder(shared_state, tmp_path)
    try:
        said = woken_writes(holder)
    finally:
        holder.kill()
        holder.wait()
    assert said == "written"
    with Store(tmp_path / "state.db", url=shared_state) as store:
        assert store.events(wf_id)[-1].type == "context_packed"


PAUSED_MID_TRANSACTION = """
import os, signal, sys
from sqlalchemy import text
from supervisor.state import leases, postgres
engine = postgres.make_engine(sys.argv[1])
leases.acquire(engine, "task:41", 41)
conn = engine.connect()  # a renewal's transaction, begun and not committed: the row is locked
conn.execute(text("UPDATE leases SET doing = 'renewing' WHERE name = 'task:41'"))
print("paused", flush=True)
os.kill(os.getpid(), signal.SIGSTOP)
"""


def test_a_holder_paused_inside_a_transaction_on_its_lease_does_not_keep_the_task(
    shared_state: str, tmp_path: Path
) -> None:
    """The kernel of a stopped process keeps its database session open for as long as it likes;
    a transaction the holder had begun keeps its row locks with it, and a taker waiting for
    them waited forever (a team task stayed `running` with a live worker polling beside it).
    The server ends such a session after the lease's time to live (at least 5 s)."""
    import threading

    from supervisor.state import leases, postgres

    with Store(tmp_path / "state.db", url=shared_state):
        pass  # the schema
    env = {**os.environ, "SUPERVISOR_LEASE_SECONDS": "2"}
    holder = subprocess.Popen(
        [sys.executable, "-c", PAUSED_MID_TRANSACTION, shared_state],
        stdout=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    engine = postgres.make_engine(shared_state)
    taken: list[leases.Held] = []
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "paused"
        time.sleep(2.5)  # past the paused holder's lease
        taker = threading.Thread(
            target=lambda: taken.append(leases.acquire(engine, "task:41", 41)), daemon=True
        )
        started = time.monotonic()
        taker.start()
        taker.join(timeout=60)
        assert taken, "the taker still waits for the paused holder's row lock after 60 s"
        assert time.monotonic() - started < 30
        assert leases.read(engine, "task:41").holder == taken[0].holder  # type: ignore[union-attr]
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
        if taken:
            taken[0].release()
        engine.dispose()
