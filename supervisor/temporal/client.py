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
import time
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

    def __init__(self, settings: TemporalSettings | Server, timeout: float = 15) -> None:
        import asyncio  # here: the submitting process (a `Submitter`) never runs a loop

        self.settings = settings
        self.timeout = timeout
        self.loop = asyncio.new_event_loop()
        self._client: Any = None

    def run(self, coro: Any) -> Any:
        return self.loop.run_until_complete(coro)

    def client(self) -> Any:
        """The `ServiceClient` (supervisor/temporal/service.py), connected at the first call."""
        from supervisor.temporal.service import connect_service

        if self._client is None:
            self._client = self.run(
                connect_service(self.settings.address, self.settings.namespace, self.timeout)
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


class HandedBack(NamedTuple):
    queue: str  # where the new run waits
    said: list[str]  # what `resume` found: a closed workflow, a queue no worker polls


def hand_back(project: Project, wf_id: int) -> HandedBack:
    """`resume` of a task Temporal owns: a new run of its workflow, from the recorded state
    (the old run, if any is left, is replaced). Refused while a worker runs it. A run Temporal
    closed while the state says the task runs (terminated: no workflow code ran) is recorded
    as a failure first, saying so; a task submitted to a queue no worker polls any more goes to
    the repository's current one (`_queue`)."""
    from supervisor.state import leases
    from supervisor.state.runner_view import polled_queues
    from supervisor.temporal.workflow import TaskInput

    with project.store() as store:
        wf = store.workflow(wf_id)
        where = submission(store, wf_id)
        assert where is not None
        task = leases.task_name(wf_id)
        every = leases.all_leases(store)
        live = [
            x
            for x in every
            if (x.name == task or x.name.startswith(task + "/")) and not x.expired()
        ]
        polled = polled_queues([x for x in every if not x.dead_here()], time.time())
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
    said = []
    if wf.status == "running":
        closed = closed_run(where)
        if closed is not None:
            said.append(_closed_recorded(project, wf_id, closed))
    recorded = str(where["task_queue"])
    queue = _queue(project, recorded, polled)
    if queue != recorded:
        said.append(f"it was submitted to queue {recorded}, which no worker polls any more")
    repository = str(where.get("repository") or "")
    task_input = TaskInput(
        wf_id, settings.heartbeat_timeout_seconds, None, repository, settings.max_attempts
    )
    start_workflow(settings, str(where["workflow_id"]), task_input, queue, replace=True)
    with project.store() as store:
        _record(store, wf_id, settings, str(where["workflow_id"]), queue, repository)
    return HandedBack(queue, said)


def _queue(project: Project, recorded: str, polled: set[str]) -> str:
    """Where a handed-back task goes: the queue it was submitted to while a worker polls it;
    else the repository's queue by this checkout's settings (temporal.task_queue, identity
    appended) when one polls it or none polls any; else the queue this database's workers
    poll (a database is one repository's). A task submitted under an old name (before each
    repository had its queue, or before temporal.task_queue changed) waited there forever."""
    from supervisor.temporal.identity import queue_for

    if recorded in polled:
        return recorded
    current = queue_for(project.root, project.settings.temporal)
    theirs = sorted(q for q in polled if "@" not in q)
    return current if current in polled or not theirs else theirs[0]


def _closed_recorded(project: Project, wf_id: int, closed: str) -> str:
    """The task `failed` in the state, with a `temporal_failed` event saying how its workflow
    ended (as the workflow's own failure path writes it); what `resume` says of it."""
    from supervisor.state.records import EventSpec
    from supervisor.state.runner_view import FAILED

    reason = f"its Temporal workflow {closed} while the task was running"
    with project.store() as store:
        step = store.workflow(wf_id).current_step
        store.set_status(
            wf_id, "failed", error=f"Failed in Temporal: {reason}",
            event=EventSpec(FAILED, step=step, status="failed", payload={"reason": reason}),
        )  # fmt: skip
    return reason


def closed_run(where: dict[str, Any], timeout: float = 15) -> str | None:
    """How the task's workflow (its latest run) ended, when Temporal closed it: "was
    terminated (reason: ..., by ...)", "was cancelled", ...; None while it runs. A server out
    of reach raises `RunnerUnavailableError`."""
    session = Session(Server(str(where["address"]), str(where["namespace"])), timeout)
    try:
        service = session.client().workflow_service
        closed: str | None = session.run(
            _closing(service, str(where["namespace"]), str(where["workflow_id"]))
        )
        return closed
    finally:
        session.close()


CLOSED = {"TERMINATED": "was terminated", "CANCELED": "was cancelled", "TIMED_OUT": "timed out",
          "FAILED": "failed", "COMPLETED": "ended"}  # fmt: skip


async def _closing(service: Any, namespace: str, wid: str) -> str | None:
    from temporalio.api.common.v1 import WorkflowExecution
    from temporalio.api.enums.v1 import HistoryEventFilterType, WorkflowExecutionStatus
    from temporalio.api.workflowservice.v1 import (
        DescribeWorkflowExecutionRequest,
        GetWorkflowExecutionHistoryRequest,
    )
    from temporalio.service import RPCError, RPCStatusCode

    execution = WorkflowExecution(workflow_id=wid)
    try:
        described = await service.describe_workflow_execution(
            DescribeWorkflowExecutionRequest(namespace=namespace, execution=execution)
        )
    except RPCError as e:
        if e.status == RPCStatusCode.NOT_FOUND:
            return "is not known to the Temporal server any more"
        raise
    name = WorkflowExecutionStatus.Name(described.workflow_execution_info.status)
    said = CLOSED.get(name.removeprefix("WORKFLOW_EXECUTION_STATUS_"))
    if said != "was terminated":
        return said
    history = await service.get_workflow_execution_history(
        GetWorkflowExecutionHistoryRequest(
            namespace=namespace, execution=execution,
            history_event_filter_type=HistoryEventFilterType.HISTORY_EVENT_FILTER_TYPE_CLOSE_EVENT,
        )
    )  # fmt: skip
    for event in history.history.events:
        ended = event.workflow_execution_terminated_event_attributes
        why = f"reason: {' '.join(ended.reason.split())[:300]}, " if ended.reason else ""
        said += f" ({why}by {ended.identity or 'someone'})"
    return said


def stopped_labels(state: Any, found: list[Workflow], shown: dict[int, str]) -> dict[int, str]:
    """`status`: the tasks `shown` queued on Temporal whose workflow is closed (terminated or
    cancelled from Temporal's CLI or UI, where no code of ours ran) say so instead. Only those:
    a task a live process holds has a workflow running it. A server out of reach leaves them
    as they were (status says what the state says, at once)."""
    stopped = dict(shown)
    for wf in found:
        label = shown.get(wf.id, "")
        if wf.status != "running" or not label.startswith(("queued", "stranded")):
            continue
        where = submission(state, wf.id)
        if where is None:
            continue
        try:
            closed = closed_run(where, timeout=3)
        except Exception:  # out of reach (or refused): the state's word stands, for them all
            break
        if closed is not None:
            stopped[wf.id] = (
                f"stopped in Temporal: its workflow {closed}; `supervisor resume {wf.id}` "
                "hands it back"
            )
    return stopped


def signal_decided(where: dict[str, Any]) -> None:
    """Wake the workflow waiting for a decision (already recorded in the state database)."""
    import asyncio

    from supervisor.temporal.workflow import DECIDED_SIGNAL

    async def send() -> None:
        client = await connect(where["address"], where["namespace"])
        await client.get_workflow_handle(where["workflow_id"]).signal(DECIDED_SIGNAL)

    asyncio.run(send())
