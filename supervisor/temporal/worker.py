"""`supervisor worker`: poll a task queue and run its tasks' steps on this host.

Each host runs one (or more) with its own clone of the repository; `--max-parallel` bounds the
steps it runs at once. The workflow code runs here too (Temporal hands it to any worker of the
queue); it is deterministic and cheap, the steps are the activities.

Before it polls, a worker checks what its steps will need, so that a misconfigured host says so
and exits instead of taking tasks it can only fail: the state database (its URL and password),
the shared remote, the Temporal server, and that the database is this repository's. While it
polls it holds a lease (`worker:<queue>:...`, supervisor/state/leases.py), which is how `status`
on any host tells a task queued for a worker from one with no worker to run it.

Worker pools (docs/worker-pools.md): `--capabilities large_context,isolated` (or `worker:
{capabilities: [...]}` in the user's own config on this host) makes it poll, besides the
repository's queue, one queue per pool it serves (`<queue>@isolated`, and `<queue>@a+b` for a
role that requires both), with a lease on each. `--max-tasks N` (a CI runner's): it exits 0 once
it ran steps of N tasks (distinct task ids) and none of its steps still runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
from typing import TYPE_CHECKING, Any

TERMINATED = 143  # 128 + SIGTERM, as supervisor/cli/interrupt.py exits

if TYPE_CHECKING:
    from pathlib import Path

    from supervisor.lifecycle.opening import Project
    from supervisor.temporal.activities import TaskCount


def preflight(project: Project) -> str:
    """The repository's identity, once the state database (this repository's: no live task of
    another, supervisor/temporal/ownership.py) and the shared remote answer."""
    from supervisor.temporal.identity import repository_id
    from supervisor.temporal.ownership import refuse_worker
    from supervisor.workspace import remote

    own = repository_id(project.root, project.settings.temporal.remote)
    with project.store() as store:
        refuse_worker(store, own, project.state_dir)
    if project.settings.temporal.remote:
        remote.check_reachable(project.root, project.settings.temporal.remote)
    return own


def run_worker(
    repo: Path,
    address: str,
    namespace: str,
    queue: str | None,
    max_parallel: int,
    capabilities: list[str] | None = None,
    max_tasks: int | None = None,
) -> None:
    from supervisor.lifecycle.opening import open_project
    from supervisor.routing import pools
    from supervisor.state import leases
    from supervisor.temporal.activities import TaskCount
    from supervisor.temporal.identity import queue_for

    project = open_project(repo)
    own = preflight(project)
    queue = queue_for(project.root, project.settings.temporal, queue)  # always the repository's
    if capabilities is None:
        capabilities = project.settings.worker.capabilities
    queues = [queue, *(pools.queue(queue, pool) for pool in pools.served(capabilities))]
    quiet_expected_retries()

    terminated = asyncio.Event()
    count = TaskCount(max_tasks)  # asyncio's, used only on the loop asyncio.run makes below

    async def main() -> None:
        workers = await _workers(repo, address, namespace, queues, max_parallel, count)
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, terminated.set)
        holder = f"{leases.host()}-{os.getpid()}"
        with project.store() as store, contextlib.ExitStack() as held:
            for polled in queues:
                name = leases.worker_name(polled, holder)
                held.enter_context(leases.hold(store.engine, name, None, f"repository {own}"))
            print(
                f"supervisor worker: {repo} (repository {own}) polling "
                f"{', '.join(map(repr, queues))} at {address}",
                flush=True,
            )
            async with contextlib.AsyncExitStack() as polling:
                for worker in workers:  # their end (on SIGTERM) stops polling, cancels steps
                    await polling.enter_async_context(worker)
                stop = asyncio.ensure_future(terminated.wait())
                await asyncio.wait({stop, asyncio.ensure_future(count.done.wait())},
                                   return_when=asyncio.FIRST_COMPLETED)  # fmt: skip

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main())
    if terminated.is_set():
        _stopped(repo)
    if count.done.is_set():
        print(f"supervisor worker: ran steps of {count.said()}; exiting (--max-tasks).", flush=True)


async def _workers(repo: Path, address: str, namespace: str, queues: list[str],
                   max_parallel: int, count: TaskCount) -> list[Any]:  # fmt: skip
    """A worker of the repository's queue (the workflow and every activity), and one per pool's
    queue (the step and component activities). Each may start `max_parallel` steps; the threads
    that run them are `max_parallel` in all."""
    from temporalio.worker import Worker

    from supervisor.temporal.activities import StepActivities
    from supervisor.temporal.client import connect
    from supervisor.temporal.workflow import TaskWorkflow

    client = await connect(address, namespace)
    steps = StepActivities(repo, max_parallel, on_run=count)
    every = steps.activities()
    base = Worker(
        client, task_queue=queues[0], workflows=[TaskWorkflow], activities=every,
        max_concurrent_activities=max_parallel,
    )  # fmt: skip
    pooled = [
        Worker(client, task_queue=q, activities=every[:2], max_concurrent_activities=max_parallel)
        for q in queues[1:]
    ]
    return [base, *pooled]


def _stopped(repo: Path) -> None:
    """SIGTERM (systemd, `docker stop`, a CI cancel): this worker polls no more and its steps
    were given back to Temporal, which runs each again on a worker of the queue (a step's
    task lease, held by a process that is gone, is taken at once on this host, after its
    time to live elsewhere). The threads still running those steps are not waited for: they
    may be inside a worker's run for most of an hour. Exit 143, as a shell reports SIGTERM."""
    print(
        f"supervisor worker: stopped (SIGTERM) for {repo}; the steps it ran go back to "
        "Temporal, which runs them again on another worker of the queue.",
        file=sys.stderr,
        flush=True,
    )
    sys.stdout.flush()
    os._exit(TERMINATED)


class _ExpectedRetry(logging.Filter):
    """An activity that failed in a way Temporal retries (the remote out of reach, another host
    moved the refs) is one line in the worker's log, not a traceback."""

    EXPECTED = ("RemoteUnavailable", "WorkflowBusy", "OtherRepository", "StateUnavailable")

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and record.exc_info[1] is not None:
            kind = getattr(record.exc_info[1], "type", None)
            if kind in self.EXPECTED:
                said = " ".join(str(record.exc_info[1]).split())  # one line a retry
                record.msg = f"{record.getMessage()}: {said}"
                record.args = None
                record.exc_info = None
                record.exc_text = None
        return True


def quiet_expected_retries() -> None:
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(message)s")
    for name in ("temporalio.activity", "temporalio.worker._activity", "temporalio"):
        logging.getLogger(name).addFilter(_ExpectedRetry())
    for handler in logging.getLogger().handlers:
        handler.addFilter(_ExpectedRetry())
