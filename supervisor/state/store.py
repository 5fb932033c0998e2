"""The state database: one SQLite file per repository, one transaction per state change.

Nothing secret is stored: every free text written here (a task's description, errors, a
workflow's context with its feedback and gate output, step outputs, event payloads) goes through
`_clean`, the supervisor's redaction, on its way in.

Crash safety rests on two habits: every method that changes state does it in a single
transaction (so a kill leaves either the old state or the new one), and the engine advances
`current_step` in the same transaction that records the step's result
(so a completed step is never run again).
"""

from __future__ import annotations

import fcntl
from collections.abc import Collection, Iterator
from contextlib import contextmanager, nullcontext
from typing import TYPE_CHECKING, Any

from sqlalchemy import create_engine, event, insert, select, text, update
from sqlalchemy.exc import DatabaseError

from supervisor.core import faults, host_faults
from supervisor.core.errors import StateError, UnknownWorkflowError
from supervisor.state import postgres, reconnect
from supervisor.state import schema as t
from supervisor.state.after_record import AfterRecord
from supervisor.state.busy import busy_timeout, busy_timeout_pragma
from supervisor.state.location import state_url
from supervisor.state.migrations import LATEST_VERSION, MIGRATIONS, applied_versions, migrate
from supervisor.state.queries import StoreQueries
from supervisor.state.records import Approval, Event, EventSpec, StepRecord, Workflow, now
from supervisor.state.rows import _append, _clean, _finish

if TYPE_CHECKING:
    from datetime import datetime
    from pathlib import Path

    from sqlalchemy.engine import Connection, Engine, ExceptionContext

__all__ = ["Approval", "Event", "EventSpec", "StepRecord", "Store", "Workflow", "now"]


@reconnect.retrying  # a dropped PostgreSQL connection: the method (one transaction) again
class Store(StoreQueries):
    """Access to `<repo>/.supervisor/state.db`, or to the shared PostgreSQL database that
    `state.url` names (`url`; by default supervisor/state/location.py finds it)."""

    def __init__(self, path: Path, url: str | None = None) -> None:
        self.path = path
        self.after_record = AfterRecord()
        self.url = state_url() if url is None else url
        self.where = str(path)
        if self.url:
            self.engine: Engine = postgres.make_engine(self.url)
            self.where = postgres.describe(self.url)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            self.engine = create_engine(
                f"sqlite:///{path}",
                connect_args={"timeout": busy_timeout(), "check_same_thread": False},
            )
            event.listen(self.engine, "connect", _on_connect)
            event.listen(self.engine, "handle_error", self._machine_fault)
        self.setup()

    def setup(self) -> None:
        """Create or upgrade the schema; safe to call any number of times."""
        try:
            if self.url and self._at_latest():
                return
            lock = self.path.with_name(self.path.name + ".setup-lock")
            with nullcontext() if self.url else _file_lock(lock), self._tx() as conn:
                if self.url:
                    postgres.lock_setup(conn)
                versions = applied_versions(conn)
                if versions and max(versions) > LATEST_VERSION:
                    raise StateError(
                        f"{self.where} was written by a newer supervisor (schema version "
                        f"{max(versions)}, this one knows up to {LATEST_VERSION}).",
                        "Upgrade supervisor (pip install -U supervisor) before using this repo.",
                    )
                migrate(conn)
        except DatabaseError as e:
            if self.url:
                raise postgres.unreachable(self.url, e.orig) from e
            raise StateError(
                f"The state database {self.path} cannot be opened: {e.orig}",
                "Check that the file is a supervisor state database and is writable; move it "
                "aside to start afresh.",
            ) from e

    def _machine_fault(self, ctx: ExceptionContext) -> None:
        """SQLite's full disk, or its lock held by another program past the busy timeout, said
        as what it is (supervisor/core/host_faults.py) instead of a driver error: raised here, after
        SQLAlchemy rolled the transaction back, so nothing of the change is written."""
        orig = ctx.original_exception
        if host_faults.is_disk_full(orig):
            raise host_faults.disk_full_error(self.path, None, database=True) from orig
        if host_faults.is_database_locked(orig):
            raise host_faults.locked_error(self.path, None, busy_timeout()) from orig

    def _at_latest(self) -> bool:
        """A shared database whose every migration is recorded needs no set-up: one query
        instead of the cross-host set-up lock and its statements (a submission opens a store
        and waits for each round trip). Anything else, a newer schema included, takes the
        whole set-up and its errors."""
        from sqlalchemy.exc import ProgrammingError

        try:
            with self.engine.connect() as conn:
                versions = {
                    r[0] for r in conn.execute(text("SELECT version FROM schema_migrations"))
                }
        except ProgrammingError:  # no table yet
            return False
        return versions == {version for version, _, _ in MIGRATIONS}

    def close(self) -> None:
        self.after_record.drain()
        self.engine.dispose()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _tx(self) -> Iterator[Connection]:
        with self.engine.begin() as conn:
            if not self.url:
                # Python's sqlite3 only begins at the first INSERT/UPDATE, so a read-modify-write
                # (an approval vote) would read outside its transaction and lose a concurrent
                # writer's update; take the write lock first (waits up to busy_timeout).
                conn.exec_driver_sql("BEGIN IMMEDIATE")
            yield conn
            reconnect.commit_sent()  # a drop from here on: its fate unknown, not run again
        faults.committed()

    # -- workflows -------------------------------------------------------------------------

    def create_workflow(
        self,
        *,
        description: str,
        cli: str,
        base_branch: str | None,
        base_sha: str,
        branch_for_id: Any,
        definition: dict[str, Any],
        first_step: str,
        context: dict[str, Any] | None = None,
        events: list[EventSpec] = (),  # type: ignore[assignment]
    ) -> Workflow:
        """Insert a workflow; `branch_for_id(id)` names its task branch in the same transaction."""
        with self._tx() as conn:
            stamp = now()
            description = _clean(description)
            wf_id = conn.execute(  # type: ignore[index]  # an insert has its key
                insert(t.workflows).values(
                    description=description,
                    status="running",
                    current_step=first_step,
                    cli=cli,
                    base_branch=base_branch,
                    base_sha=base_sha,
                    task_branch="",
                    definition=definition,
                    context=context or {},
                    created_at=stamp,
                    updated_at=stamp,
                )
            ).inserted_primary_key[0]
            conn.execute(
                update(t.workflows)
                .where(t.workflows.c.id == wf_id)
                .values(task_branch=branch_for_id(wf_id))
            )
            started = EventSpec("workflow_started", payload={"description": description})
            _append(conn, wf_id, started)
            for spec in events:
                _append(conn, wf_id, spec)
        return self.workflow(wf_id)

    def workflow(self, wf_id: int) -> Workflow:
        with self.engine.connect() as conn:
            row = conn.execute(select(t.workflows).where(t.workflows.c.id == wf_id)).first()
        if row is None:
            raise UnknownWorkflowError(
                f"No workflow with id {wf_id} in {self.where}.",
                "Run `supervisor status` to list the workflows of this repository.",
            )
        return Workflow(**row._mapping)

    def workflows(self) -> list[Workflow]:
        with self.engine.connect() as conn:
            rows = conn.execute(select(t.workflows).order_by(t.workflows.c.id)).all()
        return [Workflow(**r._mapping) for r in rows]

    def set_status(
        self, wf_id: int, status: str, *, error: str | None = None, event: EventSpec | None = None
    ) -> None:
        with self._tx() as conn:
            conn.execute(
                update(t.workflows)
                .where(t.workflows.c.id == wf_id)
                .values(status=status, error=_clean(error), updated_at=now())
            )
            if event is not None:
                _append(conn, wf_id, event)

    def update_workflow(
        self,
        wf_id: int,
        *,
        status: str,
        current_step: str | None,
        context: dict[str, Any],
        events: list[EventSpec] = (),  # type: ignore[assignment]
    ) -> None:
        """Change where a workflow stands without a step having run (resume, approvals)."""
        with self._tx() as conn:
            _set_workflow(conn, wf_id, status, current_step, context, events)

    def interrupt_running_steps(self, wf_id: int, keep: Collection[int] = ()) -> list[str]:
        """Mark steps a crash left 'running' as interrupted; the engine re-runs the current one.
        `keep`: steps whose container is adopted (see sandbox/adopt.py) stay running."""
        with self._tx() as conn:
            rows = conn.execute(
                select(t.steps.c.id, t.steps.c.name).where(
                    t.steps.c.workflow_id == wf_id,
                    t.steps.c.status == "running",
                    t.steps.c.id.not_in(list(keep)),
                )
            ).all()
            for step_id, name in rows:
                conn.execute(
                    update(t.steps)
                    .where(t.steps.c.id == step_id)
                    .values(status="interrupted", finished_at=now())
                )
                _append(conn, wf_id, EventSpec("step_interrupted", step=name, status="interrupted"))
        return [name for _, name in rows]

    def advance(
        self,
        wf_id: int,
        *,
        step: str,
        next_step: str | None,
        context: dict[str, Any],
        status: str = "running",
        checkpoint_status: str = "completed",
        git_sha: str | None = None,
        events: list[EventSpec] = (),  # type: ignore[assignment]
        request_approval: bool = False,
        error: str | None = None,
    ) -> None:
        """Move the workflow on without a step run to record (approvals, dependency waits)."""
        self.transition(
            wf_id,
            step=step,
            next_step=next_step,
            context=context,
            status=status,
            checkpoint_status=checkpoint_status,
            git_sha=git_sha,
            events=events,
            request_approval=request_approval,
            error=error,
        )

    def transition(
        self,
        wf_id: int,
        *,
        step: str,
        next_step: str | None,
        context: dict[str, Any],
        records: list[StepRecord] = (),  # type: ignore[assignment]
        status: str = "running",
        checkpoint_status: str = "completed",
        git_sha: str | None = None,
        events: list[EventSpec] = (),  # type: ignore[assignment]
        request_approval: bool = False,
        error: str | None = None,
    ) -> None:
        """Record the step runs that finished, their events, the step's outcome and the
        workflow's move to `next_step`, all in one transaction: a crash is either before the
        whole transition (the step runs again) or after it (it never does)."""
        with self._tx() as conn:
            stamp = now()
            for record in records:
                _finish(conn, record)
            conn.execute(
                update(t.workflows)
                .where(t.workflows.c.id == wf_id)
                .values(
                    current_step=next_step,
                    context=_clean(context),
                    status=status,
                    error=_clean(error),
                    updated_at=stamp,
                )
            )
            conn.execute(
                insert(t.checkpoints).values(
                    workflow_id=wf_id,
                    step=step,
                    git_sha=git_sha,
                    status=checkpoint_status,
                    next_step=next_step,
                    timestamp=stamp,
                )
            )
            if request_approval:
                conn.execute(
                    insert(t.approvals).values(
                        workflow_id=wf_id, step=step, status="pending", requested_at=stamp
                    )
                )
            for spec in events:
                _append(conn, wf_id, spec)
        self.after_record.recorded(r.step_id for r in records)

    # -- steps -----------------------------------------------------------------------------

    def start_step(
        self,
        wf_id: int,
        name: str,
        attempt: int,
        role: str | None,
        worktree: str | None,
        started_at: datetime | None = None,
    ) -> int:
        """`started_at`: when the step began, if before now (its worktree is made first, and a
        step's time in `status` includes making it)."""
        with self._tx() as conn:
            step_id = conn.execute(  # type: ignore[index]  # an insert has its key
                insert(t.steps).values(
                    workflow_id=wf_id,
                    name=name,
                    attempt=attempt,
                    role=role,
                    status="running",
                    worktree=worktree,
                    started_at=started_at or now(),
                )
            ).inserted_primary_key[0]
            _append(
                conn,
                wf_id,
                EventSpec("step_started", step=name, role=role, payload={"attempt": attempt}),
            )
        return int(step_id)

    def set_step_container(self, step_id: int, container_id: str) -> None:
        with self._tx() as conn:
            conn.execute(
                update(t.steps).where(t.steps.c.id == step_id).values(container_id=container_id)
            )

    def finish_step(
        self,
        step_id: int,
        status: str,
        *,
        output: dict[str, Any] | None = None,
        error: str | None = None,
        event: EventSpec | None = None,
        invocation: dict[str, Any] | None = None,
        workflow_context: dict[str, Any] | None = None,
    ) -> None:
        """`workflow_context`: the workflow's new context, saved in the same transaction (so that
        a step can never be recorded done while the workflow forgets what it produced)."""
        record = StepRecord(step_id, status, output, error, event, invocation)
        with self._tx() as conn:
            wf_id = _finish(conn, record)
            if workflow_context is not None:
                conn.execute(
                    update(t.workflows)
                    .where(t.workflows.c.id == wf_id)
                    .values(context=_clean(workflow_context), updated_at=now())
                )
        self.after_record.recorded([step_id])

    def checkpoint(
        self,
        wf_id: int,
        *,
        step: str,
        context: dict[str, Any],
        events: list[EventSpec] = (),  # type: ignore[assignment]
        records: list[StepRecord] = (),  # type: ignore[assignment]
    ) -> None:
        """Progress inside a running step (a component implemented, gated, merged): the finished
        step runs, the workflow's context and the events, in one transaction."""
        with self._tx() as conn:
            for record in records:
                _finish(conn, record)
            _set_workflow(conn, wf_id, "running", step, context, events)
        self.after_record.recorded(r.step_id for r in records)

    def record_invocation(self, invocation: dict[str, Any]) -> None:
        with self._tx() as conn:
            conn.execute(insert(t.invocations).values(**invocation, timestamp=now()))

    # -- events ----------------------------------------------------------------------------

    def add_event(self, wf_id: int | None, spec: EventSpec) -> None:
        with self._tx() as conn:
            _append(conn, wf_id, spec)


def _set_workflow(
    conn: Connection,
    wf_id: int,
    status: str,
    current_step: str | None,
    context: dict[str, Any],
    events: list[EventSpec],
) -> None:
    """Where a workflow stands (its error cleared) and the events that say why, inside the
    caller's transaction: what `update_workflow` and `checkpoint` both write."""
    conn.execute(
        update(t.workflows)
        .where(t.workflows.c.id == wf_id)
        .values(
            status=status,
            current_step=current_step,
            context=_clean(context),
            error=None,
            updated_at=now(),
        )
    )
    for spec in events:
        _append(conn, wf_id, spec)


@contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    """Serialises schema set-up between processes that open a new database at the same time."""
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _on_connect(dbapi_conn: Any, _record: Any) -> None:
    """WAL lets `status` read while a task writes; foreign keys catch orphaned rows."""
    cursor = dbapi_conn.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute(busy_timeout_pragma())
    cursor.close()
