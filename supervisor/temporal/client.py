"""Submitting a task to Temporal, handing it back after a failure, and telling its workflow
about a person's decision.

A submission is atomic: the Temporal server and the shared remote are checked before the task
exists (`Submitter.__init__`); then the task is created, its refs published and its workflow
started, and a failure of either undoes the other (the remote's refs, the local branch) and
leaves the task `abandoned` with the reason, never `running` with nothing to run it.

The submission is recorded as a `temporal_submitted` event (address, namespace, queue, workflow
id, repository), so that `approve`, `reject` and `resume`, from any machine with the shared
state database, know where to send it without any configuration of their own.
"""

from __future__ import annotations

import socket
from typing import TYPE_CHECKING, Any, NamedTuple

from supervisor.core.errors import (
    RunnerUnavailableError,
    StateError,
    SupervisorError,
    WorkflowBusyError,
)
from supervisor.lifecycle import refusals

if TYPE_CHECKING:
    from pathlib import Path

    from supervisor.core.config import TemporalSettings
    from supervisor.lifecycle.opening import Project
    from supervisor.routing.pools import Route
    from supervisor.state.records import Workflow
    from supervisor.state.writer import TaskRows
    from supervisor.temporal.link import Link

SUBMITTED = "temporal_submitted"


class Server(NamedTuple):
    """Where a connection goes: what `TemporalSettings` says of it, without the settings' model
    (the submission's helper process, supervisor/temporal/link.py, loads no settings)."""

    address: str
    namespace: str


def workflow_id(repository: str, wf_id: int) -> str:
    """Unique per repository and task (two repositories' task 1 are two workflows); the same
    in every clone, so a hand-back from any host replaces the same workflow."""
    return f"supervisor-{repository}-{wf_id}"


async def connect(address: str, namespace: str, timeout: float | None = None) -> Any:
    """The SDK's client (for signals); a workflow's start needs only the service (`Session`)."""
    from temporalio.client import Client

    from supervisor.temporal.service import reach

    return await reach(address, namespace, Client.connect(address, namespace=namespace), timeout)


def start_workflow(settings: TemporalSettings | Server, wid: str, task: Any, queue: str,
                   replace: bool, session: Session | None = None) -> None:  # fmt: skip
    """Start (or, `replace`, restart) the task's workflow; over `session`'s connection when
    the caller has one open (a submission), else over a new one. `task`: `TaskInput` or its
    fields (supervisor/temporal/service.py)."""
    from supervisor.temporal.service import start_request

    own = session is None
    session = session or Session(settings)
    try:
        request = start_request(settings.namespace, wid, task, queue, replace)
        service = session.client().workflow_service
        session.run(service.start_workflow_execution(request, retry=True))
    except SupervisorError:
        raise
    except Exception as e:
        raise RunnerUnavailableError(
            f"The Temporal server at {settings.address} did not start the task's workflow: {e}",
            "Check the server (`temporal operator cluster health`), then submit again.",
        ) from e
    finally:
        if own:
            session.close()


class Session:
    """One connection to the server's service on one event loop, for a command's every call: a
    client is bound to the loop it was made on, and connecting is most of what a call costs."""

    def __init__(self, settings: TemporalSettings | Server) -> None:
        import asyncio  # here: the submitting process (a `Submitter`) never runs a loop

        self.settings = settings
        self.loop = asyncio.new_event_loop()
        self._client: Any = None

    def run(self, coro: Any) -> Any:
        return self.loop.run_until_complete(coro)

    def client(self) -> Any:
        """The `ServiceClient` (supervisor/temporal/service.py), connected at the first call."""
        from supervisor.temporal.service import connect_service

        if self._client is None:
            self._client = self.run(
                connect_service(self.settings.address, self.settings.namespace, timeout=15)
            )
        return self._client

    def close(self) -> None:
        self._client = None
        self.loop.close()


def _record(store: TaskRows, wf_id: int, settings: TemporalSettings, wid: str, queue: str,
            repository: str, kind: str = SUBMITTED,
            checkout: str | None = None) -> None:  # fmt: skip
    from supervisor.state.records import EventSpec

    payload = {
        "address": settings.address,
        "namespace": settings.namespace,
        "task_queue": queue,
        "workflow_id": wid,
        "repository": repository,
        "remote": settings.remote,
    }
    if checkout:  # host:path, named when another repository finds the task in its database
        payload["checkout"] = checkout
    store.add_event(wf_id, EventSpec(kind, status="submitted", payload=payload))


class Submitter:
    """Hands created tasks to Temporal (supervisor/temporal/submit.py); made only once Temporal
    and the shared remote answer (checked at once), so a task is never created for a runner out
    of reach. Its one connection, held by a helper process (`link`, one already started or one
    started here; supervisor/temporal/link.py), serves every submission it makes."""

    def __init__(self, project: Project, link: Link | None = None) -> None:
        from concurrent.futures import ThreadPoolExecutor

        from supervisor.temporal.identity import queue_for, repository_id
        from supervisor.temporal.link import Link
        from supervisor.workspace import remote

        self.project = project
        self.settings = project.settings.temporal
        self.link = link or Link()
        self.link.connect(self.settings.address, self.settings.namespace)
        with ThreadPoolExecutor(1) as pool:  # the remote's answer while the server's comes
            reached = (
                pool.submit(remote.check_reachable, project.root, self.settings.remote)
                if self.settings.remote
                else None
            )
            try:
                self.repository = repository_id(project.root, self.settings.remote)
                self.queue = queue_for(project.root, self.settings)
                self.link.answer()
            except SupervisorError:
                self.link.close()
                raise
            finally:  # waited for either way: no git left running
                unreachable = reached.exception() if reached is not None else None
        if unreachable is not None:
            self.link.close()
            raise unreachable

    def __call__(self, wf: Workflow, store: TaskRows, route: Route | None = None) -> None:
        """`store`: the task's, open (the caller created the task in it). `route`: the first
        step's worker pool (supervisor/routing/pools.py), None for any worker."""
        wid = workflow_id(self.repository, wf.id)
        task = {  # `TaskInput`'s fields (supervisor/temporal/workflow.py imports temporalio)
            "wf_id": wf.id,
            "heartbeat_timeout_s": self.settings.heartbeat_timeout_seconds,
            "repository": self.repository,
            "max_attempts": self.settings.max_attempts,
        }
        if route is not None:
            task["route"] = route.data()
        if self.settings.remote:  # the worker hosts' clones take the task from there
            from supervisor.workspace import remote

            remote.publish(self.project.root, self.settings.remote, wf)
        checkout = f"{socket.gethostname()}:{self.project.root}"  # recorded before a worker
        _record(store, wf.id, self.settings, wid, self.queue, self.repository, checkout=checkout)
        if route is not None:  # `status`: queued for that pool's workers
            from supervisor.state.records import EventSpec

            payload = {"step": wf.current_step, **route.data()}
            store.add_event(wf.id, EventSpec("step_routed", step=wf.current_step, role=route.role,
                                             status="queued", payload=payload))  # fmt: skip
        self.link.start(wid, task, self.queue)

    def close(self) -> None:
        self.link.close()

    def undo(self, wf: Workflow, error: SupervisorError, store: TaskRows) -> None:
        """Leave nothing of a submission that failed (in this call or before it, once the task
        existed): the remote's refs, the local branch; the task is `abandoned`, saying why."""
        from supervisor.state.records import EventSpec

        removed: list[str] = []
        if self.settings.remote:
            from supervisor.workspace import remote

            try:
                removed = remote.unpublish(self.project.root, self.settings.remote, wf)
            except SupervisorError:
                removed = ["(the remote could not be cleaned: see `supervisor abandon`)"]
        ws = self.project.workspace
        if ws.branch_exists(wf.task_branch):
            ws.delete_ref(f"refs/heads/{wf.task_branch}")
        store.update_workflow(
            wf.id,
            status="abandoned",
            current_step=None,
            context=store.workflow(wf.id).context,
            events=[
                EventSpec(
                    "submission_failed",
                    status="abandoned",
                    payload={"error": error.message, "removed_remote_refs": removed},
                )
            ],
        )


def submitter(repo: Path) -> Submitter:
    from supervisor.lifecycle.opening import open_project

    return Submitter(open_project(repo))


def submission(store: Any, wf_id: int) -> dict[str, Any] | None:
    """Where the task was submitted, or None when this process's runner runs it."""
    found = [e for e in store.events(wf_id) if e.type == SUBMITTED]
    return dict(found[-1].payload) if found else None


def hand_back(project: Project, wf_id: int) -> str:
    """`resume` of a task Temporal owns: a new run of its workflow, from the recorded state
    (the old run, if any is left, is replaced). Refused while a worker runs it."""
    from supervisor.state import leases
    from supervisor.temporal.workflow import TaskInput

    with project.store() as store:
        wf = store.workflow(wf_id)
        where = submission(store, wf_id)
        assert where is not None
        task = leases.task_name(wf_id)
        live = [
            x
            for x in leases.all_leases(store)
            if (x.name == task or x.name.startswith(task + "/")) and not x.expired()
        ]
    refusals.not_abandoned(wf, "resume")
    if wf.status == "completed":
        raise StateError(
            f"Task {wf_id} is completed; nothing to resume.",
            f"Land it with `supervisor complete-task {wf_id}`.",
        )
    if live:
        x = live[0]
        doing = x.doing or f"step {wf.current_step}"
        raise WorkflowBusyError(
            f"Task {wf_id} runs on {x.host} under Temporal ({doing}).",
            f"Nothing to do: follow it with `supervisor status {wf_id}`.",
        )
    settings = project.settings.temporal.model_copy(
        update={"address": where["address"], "namespace": where["namespace"]}
    )
    repository = str(where.get("repository") or "")
    task_input = TaskInput(
        wf_id, settings.heartbeat_timeout_seconds, None, repository, settings.max_attempts
    )
    start_workflow(
        settings, str(where["workflow_id"]), task_input, str(where["task_queue"]), replace=True
    )
    with project.store() as store:
        _record(store, wf_id, settings, str(where["workflow_id"]), str(where["task_queue"]),
                repository)  # fmt: skip
    return str(where["task_queue"])


def signal_decided(where: dict[str, Any]) -> None:
    """Wake the workflow waiting for a decision (already recorded in the state database)."""
    import asyncio

    from supervisor.temporal.workflow import DECIDED_SIGNAL

    async def send() -> None:
        client = await connect(where["address"], where["namespace"])
        await client.get_workflow_handle(where["workflow_id"]).signal(DECIDED_SIGNAL)

    asyncio.run(send())
