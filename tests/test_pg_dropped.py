"""A shared PostgreSQL state database that drops connections (issue 50, item 3), on a real server
(tests/pg_support.py): a session ended by `pg_terminate_backend` inside a change, or at its
COMMIT, and the server stopped and started again. A change is run again whole, or refused whole
with one line and its fix (supervisor/state/reconnect.py); never half-written, never twice.

And the fault-matrix row on both runners (issue 50, item 5): a task whose state connection is
dropped while it records a step's end completes, on the local runner and under Temporal
(tests/temporal_standin.py: the real workflow and activities in this process), with nothing run
or recorded twice.
"""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import pytest
from cli_support import supervisor
from sqlalchemy import event
from sqlalchemy.engine import Engine
from temporal_standin import Sandbox, run_on_temporal, to_temporal, use_sandbox
from temporal_support import DevServer
from test_engine_fast import TASK, Project, project, reviews, warm_packer, writes
from test_machine_faults import one_error_line

from supervisor.lifecycle import tasks
from supervisor.state import leases
from supervisor.state.busy import BUSY_TIMEOUT_ENV
from supervisor.state.reconnect import StateConnectionLostError
from supervisor.state.store import EventSpec, Store

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path

    from pg_support import Cluster

    from supervisor.sandbox.standin import WorkerCall

pytestmark = pytest.mark.xdist_group("postgres")
__all__ = ["project", "warm_packer"]

WAIT_S = 120.0  # the longest a spec waits for a moment to come (a bound, never a measure)
DROPPED = "dropped the connection (terminating connection due to administrator command)"


@contextmanager
def dropping(cluster: Cluster, when: Callable[[str, Any], bool]) -> Iterator[list[str]]:
    """The first statement of this process matching `when(statement, parameters)` has its
    session ended by the server just before it runs (the statements hit are listed)."""
    hit: list[str] = []

    def before(conn: Any, cursor: Any, statement: str, params: Any, *_: Any) -> None:
        if not hit and when(statement, params):
            hit.append(statement)
            cluster.terminate(cursor.connection.info.backend_pid)

    event.listen(Engine, "before_cursor_execute", before)
    try:
        yield hit
    finally:
        event.remove(Engine, "before_cursor_execute", before)


def an_event(kind: str) -> Callable[[str, Any], bool]:
    return lambda statement, params: (
        statement.startswith("INSERT INTO events") and (params or {}).get("type") == kind
    )


def new_store(cluster: Cluster, tmp_path: Path) -> tuple[Store, int]:
    store = Store(tmp_path / "state.db", url=cluster.database())
    wf = store.create_workflow(
        description="d", cli="claude", base_branch="main", base_sha="0" * 40,
        branch_for_id=lambda i: f"ai/{i}-d", definition={}, first_step="implement",
    )  # fmt: skip
    return store, wf.id


def kinds(store: Store, wf_id: int) -> list[str]:
    return [e.type for e in store.events(wf_id)]


def test_a_change_whose_connection_drops_midway_runs_again_whole_and_lands_once(
    pg_cluster: Cluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store, wf_id = new_store(pg_cluster, tmp_path)
    with dropping(pg_cluster, an_event("component_merged")) as hit:
        # the workflow's row is updated first, then the event: the drop comes between them
        store.checkpoint(
            wf_id, step="implement", context={"integrated": "1" * 40},
            events=[EventSpec("component_merged", step="implement")],
        )  # fmt: skip
    assert hit, "the session was not ended"
    assert kinds(store, wf_id).count("component_merged") == 1
    assert store.workflow(wf_id).context == {"integrated": "1" * 40}
    said = capsys.readouterr().err
    assert DROPPED in said and "trying again" in said
    assert "Traceback" not in said
    store.close()


def test_a_task_lease_whose_session_drops_while_it_is_taken_is_taken_once(
    pg_cluster: Cluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The lease that makes one process the task's only runner (supervisor/state/leases.py):
    taken again whole after the drop, one row, this process's; a second taker is refused."""
    store, wf_id = new_store(pg_cluster, tmp_path)
    with dropping(pg_cluster, lambda statement, _: "INSERT INTO leases" in statement) as hit:
        held = leases.acquire(store.engine, leases.task_name(wf_id), wf_id, "implement")
    assert hit, "the session was not ended"
    assert DROPPED in capsys.readouterr().err
    current = leases.read(store.engine, leases.task_name(wf_id))
    assert current is not None and current.holder == held.holder
    with pytest.raises(leases.LeaseBusyError):
        leases.acquire(store.engine, leases.task_name(wf_id), wf_id, "implement")
    held.release()
    store.close()


def test_a_drop_at_the_commit_is_not_run_again_and_says_the_change_may_not_have_landed(
    pg_cluster: Cluster, tmp_path: Path
) -> None:
    """Whether a COMMIT whose connection died landed is unknown to the client: running it again
    could write it twice, so the change is refused with the fix; here it had not landed (the
    session ended before the COMMIT reached the server), and nothing of it is there."""
    store, wf_id = new_store(pg_cluster, tmp_path)
    hit: list[int] = []

    def at_commit(conn: Any) -> None:
        if not hit:
            hit.append(1)
            pg_cluster.terminate(conn.connection.dbapi_connection.info.backend_pid)

    event.listen(Engine, "commit", at_commit)
    try:
        with pytest.raises(StateConnectionLostError) as refused:
            store.checkpoint(
                wf_id, step="implement", context={"integrated": "1" * 40},
                events=[EventSpec("component_merged", step="implement")],
            )  # fmt: skip
    finally:
        event.remove(Engine, "commit", at_commit)
    assert "while a change was being committed" in refused.value.message
    assert "\n" not in refused.value.message
    assert "pg_isready" in refused.value.hint
    assert "component_merged" not in kinds(store, wf_id)  # nothing half-written
    assert store.workflow(wf_id).context == {}
    store.close()


def test_a_restart_is_waited_for_with_a_progress_line_and_a_server_gone_past_the_wait_is_named(
    pg_cluster: Cluster,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    store, wf_id = new_store(pg_cluster, tmp_path)
    pg_cluster.stop_server()
    try:
        # The server restarts while a change waits for it: it lands, once.
        monkeypatch.setenv(BUSY_TIMEOUT_ENV, str(WAIT_S))
        done = threading.Thread(
            target=store.add_event, args=(wf_id, EventSpec("component_merged", step="i"))
        )
        done.start()
        deadline = time.monotonic() + WAIT_S
        said = ""
        while "trying again" not in said and time.monotonic() < deadline:
            said += capsys.readouterr().err
            time.sleep(0.1)
        assert "dropped the connection" in said and "Connection refused" in said
        pg_cluster.start_server()
        done.join(WAIT_S)
        assert not done.is_alive()
        assert kinds(store, wf_id).count("component_merged") == 1

        # A server that stays away past the wait: one line, the fix, nothing written.
        monkeypatch.setenv(BUSY_TIMEOUT_ENV, "1")
        pg_cluster.stop_server()
        with pytest.raises(StateConnectionLostError) as gone:
            store.set_status(wf_id, "failed", event=EventSpec("workflow_failed"))
        assert "stopped answering" in gone.value.message
        assert "wrote nothing of this change" in gone.value.message
        assert "\n" not in gone.value.message
        assert "pg_isready" in gone.value.hint and BUSY_TIMEOUT_ENV in gone.value.hint
    finally:
        pg_cluster.start_server()
    assert store.workflow(wf_id).status == "running"  # the store works again, unchanged
    assert "workflow_failed" not in kinds(store, wf_id)
    store.close()


def test_a_state_database_gone_while_a_step_runs_ends_in_one_line_and_resume_completes(
    project: Callable[..., Project],
    pg_cluster: Cluster,
    shared_state: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The server stops while the implementer works and stays away past the wait: the command
    says so in one line with the fix and the resume (exit 2, no traceback), the step's end is
    not half-recorded, and `resume` completes the task once the server is back."""
    monkeypatch.setenv(BUSY_TIMEOUT_ENV, "1")
    monkeypatch.setenv("SUPERVISOR_LEASE_SECONDS", "2")
    answered = writes({"answer.txt": "42\n"})

    def stops_the_server(call: WorkerCall) -> str:
        if not stopped:
            stopped.append(True)
            pg_cluster.stop_server()
        return answered(call)

    stopped: list[bool] = []
    p = project(
        WORKFLOW,
        None,
        {"when": "ROLE: implementer", "do": stops_the_server, "repeat": True},
        ("ROLE: reviewer", reviews("APPROVED")),
    )
    try:
        refused = supervisor("start-task", TASK, "--yes", "--repo", str(p.root))
    finally:
        pg_cluster.start_server()
    assert refused.returncode == 2, refused.stderr
    line = one_error_line(refused.stderr)
    assert "stopped answering" in line and "wrote nothing of this change" in line, line
    assert "supervisor resume 1" in refused.stderr.split("fix:", 1)[1]
    assert "trying again" in refused.stderr  # the progress lines while it waited
    assert p.workflow().current_step == "implement"  # its end not recorded, nor half of it
    assert [e.type for e in p.events()].count("implementation") == 0

    # The refused command could not release its hold on the task (the server was away): a
    # process that ended is seen dead and its hold taken at once; this one is the spec's own,
    # alive, so its hold is let expire (SUPERVISOR_LEASE_SECONDS) as a silent holder's would.
    with Store(p.root / ".supervisor" / "state.db") as store:
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            hold = leases.read(store.engine, leases.task_name(1))
            if hold is None or hold.expired():
                break
            time.sleep(0.2)
    resumed = supervisor("resume", "1", "--repo", str(p.root))
    assert resumed.returncode == 0, resumed.stderr
    assert p.workflow().status == "completed"
    assert p.on_branch("answer.txt") == "42\n"


# -- the fault-matrix row on both runners ------------------------------------------------------

WORKFLOW = """implement
  steps:
    implement: {role: implementer, next: review}
    review: {role: reviewer, next: commit}
    commit: {action: commit}
"""


@pytest.fixture(scope="module")
def temporal_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    """A dev server for this file's Temporal specs, started only if one runs."""
    server = DevServer(tmp_path_factory.mktemp("temporal"))
    yield server
    server.stop()


@pytest.mark.parametrize("runner", ["local", "temporal"])
def test_a_state_connection_dropped_while_a_task_records_a_step_costs_nothing_on_either_runner(
    runner: str,
    project: Callable[..., Project],
    pg_cluster: Cluster,
    shared_state: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
) -> None:
    p = project(
        WORKFLOW,
        None,
        ("ROLE: implementer", writes({"answer.txt": "42\n"})),
        ("ROLE: reviewer", reviews("APPROVED")),
    )
    with dropping(pg_cluster, an_event("implementation")) as hit:
        if runner == "local":
            wf = tasks.start_task(TASK, p.root)
        else:
            server: DevServer = request.getfixturevalue("temporal_server")
            queue = to_temporal(p.root, server)
            use_sandbox(monkeypatch, Sandbox(p.script))
            wf = run_on_temporal(p.root, server, queue, TASK)
    assert hit, "the session was not ended"
    assert wf.status == "completed", wf.error
    assert p.on_branch("answer.txt") == "42\n"
    assert [c.role for _, c in p.script.calls] == ["implementer", "reviewer"]  # each once
    steps = [(s["name"], s["status"]) for s in p.steps()]
    assert steps == [("implement", "succeeded"), ("review", "succeeded")]
    events = [e.type for e in p.events()]
    assert events.count("implementation") == events.count("review") == 1
    said = capsys.readouterr().err
    assert DROPPED in said and "Traceback" not in said


def test_a_server_that_refuses_is_not_waited_for_one_coming_back_is() -> None:
    """What is a drop (run again while the wait lasts) and what is a refusal (said at once):
    psycopg's words for each, as the real server sends them."""
    import psycopg
    from sqlalchemy.exc import OperationalError

    from supervisor.state.reconnect import dropped

    def connecting(said: str) -> OperationalError:
        return OperationalError("SELECT 1", {}, psycopg.OperationalError(said))

    at = 'connection failed: connection to server at "127.0.0.1", port 5 failed: '
    assert dropped(connecting(at + "Connection refused\n\tIs the server running?"))
    assert dropped(connecting(at + "FATAL:  the database system is starting up"))
    assert dropped(connecting(at + "FATAL:  the database system is shutting down"))
    assert not dropped(connecting(at + 'FATAL:  password authentication failed for user "u"'))
    assert not dropped(connecting(at + 'FATAL:  database "nope" does not exist'))
    assert not dropped(OperationalError("SELECT 1", {}, psycopg.OperationalError("deadlock")))
