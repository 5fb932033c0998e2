"""`start-task --backend temporal`: create a task and hand it to Temporal's workers.

A submission is the command a person waits for, so it does only what must happen on the
submitting host, over one connection: the checks that need no sandbox
(supervisor/lifecycle/starting.py), the Temporal server and shared remote (checked while those run,
see `Submitter`; Temporal's client runs in a helper process, supervisor/temporal/link.py), that
the state database is this repository's (supervisor/temporal/ownership.py), the task's row and
branch, its refs on the remote, its workflow. Docker, the
engine and the CLI probe are the workers' business, on their hosts, at the task's first step
(a submitting host need not even have Docker). Atomic: a failure anywhere after the row exists
leaves nothing (`Submitter.undo`).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from typing import TYPE_CHECKING

from supervisor.core.errors import SupervisorError
from supervisor.lifecycle import starting
from supervisor.lifecycle.opening import open_project
from supervisor.state.locks import task_lock
from supervisor.temporal.ownership import refuse_submission

if TYPE_CHECKING:
    from pathlib import Path

    from sqlalchemy.engine import Engine

    from supervisor.lifecycle.opening import Project
    from supervisor.routing.pools import Route
    from supervisor.state.records import Workflow
    from supervisor.state.writer import TaskRows
    from supervisor.temporal.client import Submitter
    from supervisor.temporal.link import Link
    from supervisor.workflow.depth import Asked


def submit_task(
    description: str,
    path: Path,
    *,
    cli: str | None = None,
    roles: dict[str, str] | None = None,
    no_gate: bool = False,
    allow_protected: list[str] | None = None,
    depth: Asked = "planned",
    submitter: Submitter | None = None,
    link: Link | None = None,
    project: Project | None = None,
) -> Workflow:
    """The task, created and its workflow started. `submitter`: one already connected (a
    caller submitting many); by default one is made meanwhile, over `link` when the caller
    started one: the SDK's import and the connection (in the link's process), the remote's
    `ls-remote` overlap the checks instead of following them. `project`: `path`, already
    opened with `cli`."""
    project = project or open_project(path, {"cli": cli} if cli else None)
    with ExitStack() as ending:
        with ThreadPoolExecutor(1, thread_name_prefix="supervisor-connect") as pool:
            connecting = pool.submit(_submitter, project, link) if submitter is None else None
            try:
                task = starting.prepare(
                    description, project, roles=roles, no_gate=no_gate,
                    allow_protected=allow_protected, depth=depth,
                )  # fmt: skip
                route = _first_route(task)  # a pool nobody allowed stops it here
                # Opened (its schema checked) while the server answers; nothing is created in it
                # before the server did. Without SQLAlchemy when it can (supervisor/state/writer.py)
                store: TaskRows = project.writer()
                ending.callback(store.close)
            except BaseException:  # the task's own error is the one said, once the thread ends
                if connecting is not None and connecting.exception() is None:
                    connecting.result().close()
                raise
            submit = submitter or connecting.result()  # type: ignore[union-attr]
        if submitter is None:
            ending.callback(submit.close)
        # Another repository's database is refused before anything is written in it.
        refuse_submission(store, submit.repository, project.root, project.state_dir)
        wf = starting.create(task, store)
        try:
            with task_lock(project.state_dir, wf.id, record=False, engine=_shared(store)):
                starting.begin(task, store, wf)
            submit(wf, store, route)
        except SupervisorError as e:
            submit.undo(wf, e, store)
            raise
        return store.workflow(wf.id)


def _first_route(task: starting.Prepared) -> Route | None:
    """Every step's worker pool checked (supervisor/routing/pools.py); the first step's."""
    from supervisor.routing import pools

    definition, settings, root = task.definition, task.project.settings, task.project.root
    pools.check_definition(definition, settings, root)
    return pools.step_route(definition, definition.initial_step, settings, root)


def _shared(store: TaskRows) -> Engine | None:
    """The shared database's engine, when the task is written there through `Store`: the task's
    lease (its lock across hosts) is taken over the same connection, not a second one."""
    engine: Engine | None = getattr(store, "engine", None)
    return engine if getattr(store, "url", None) else None


def _submitter(project: Project, link: Link | None) -> Submitter:
    from supervisor.temporal.client import Submitter

    return Submitter(project, link)
