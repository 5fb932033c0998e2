"""`supervisor worker`: poll a task queue and run its tasks' steps on this host.

Each host runs one (or more) with its own clone of the repository; `--max-parallel` bounds the
steps it runs at once. The workflow code runs here too (Temporal hands it to any worker of the
queue); it is deterministic and cheap, the steps are the activities.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path


def run_worker(repo: Path, address: str, namespace: str, queue: str, max_parallel: int) -> None:
    from temporalio.worker import Worker

    from supervisor.temporal.activities import StepActivities
    from supervisor.temporal.client import connect
    from supervisor.temporal.workflow import TaskWorkflow

    async def main() -> None:
        client = await connect(address, namespace)
        steps = StepActivities(repo, max_parallel)
        worker = Worker(
            client,
            task_queue=queue,
            workflows=[TaskWorkflow],
            activities=[steps.run_step, steps.run_component],
            max_concurrent_activities=max_parallel,
        )
        print(f"supervisor worker: {repo} polling {queue!r} at {address}", flush=True)
        await worker.run()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main())
