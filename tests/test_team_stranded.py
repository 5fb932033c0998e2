"""Nothing stranded in Temporal (issue 58, round two's holes):

- a task submitted to a queue no worker polls any more (its repository's queue under an old
  name: before per-repository queues, or before temporal.task_queue changed) says so in
  `status`, and `resume` hands it to the repository's current queue, where a worker runs it;
- a workflow cancelled from Temporal's CLI or UI writes why into the state (the workflow's
  cancellation path runs the record-failure activity), and `resume` hands the task back;
- a workflow terminated there (no code of ours runs) is noticed by `status` and `resume`, which
  ask Temporal how it ended; `resume` records it and hands the task back.

The real dev server (one for the file), the real submission, workflow and activities of a
worker in this process over the stand-in sandbox (tests/temporal_standin.py), real git and
SQLite; `status` as a command of its own.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from typing import TYPE_CHECKING, Any

import pytest
import test_engine_fast
from temporal_standin import Sandbox, repository_queue, submit, to_temporal, use_sandbox
from temporal_support import DevServer
from test_engine_fast import TASK, Project, reviews, writes

from supervisor.lifecycle.opening import open_project, reading
from supervisor.lifecycle.task_state import runners
from supervisor.state import leases
from supervisor.temporal.client import hand_back

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path

pytestmark = pytest.mark.xdist_group("temporal")
project = test_engine_fast.project  # the stand-in project fixture
warm_packer = test_engine_fast.warm_packer

WORKFLOW = """implement
  steps:
    implement: {role: implementer, next: review}
    review: {role: reviewer, next: commit}
    commit: {action: commit}
"""


@pytest.fixture(scope="module")
def temporal(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    server = DevServer(tmp_path_factory.mktemp("temporal"))
    yield server
    server.stop()


def a_task(project: Callable[..., Project], temporal: DevServer,
           monkeypatch: pytest.MonkeyPatch) -> tuple[Project, str]:  # fmt: skip
    p = project(
        WORKFLOW,
        None,
        ("ROLE: implementer", writes({"answer.txt": "42\n"})),
        ("ROLE: reviewer", reviews("APPROVED")),
    )
    queue = to_temporal(p.root, temporal)
    use_sandbox(monkeypatch, Sandbox(p.script))
    return p, queue


def label(repo: Path, wf_id: int) -> str:
    """Who runs the task, as `status` says it from the state alone."""
    with reading(repo) as store:
        wf = store.workflow(wf_id)
    return runners(repo, [wf], {wf_id: None}).get(wf_id, "")


def status_of(repo: Path, wf_id: int) -> str:
    """`supervisor status <id>` to a pipe (plain lines)."""
    done = subprocess.run(
        [sys.executable, "-m", "supervisor", "status", str(wf_id), "--repo", str(repo)],
        capture_output=True, text=True, check=False, env={**os.environ, "COLUMNS": "300"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return " ".join(done.stdout.split())


async def on_workflow(address: str, wid: str, act: str, **kwargs: Any) -> None:
    """Cancel or terminate the task's workflow, as Temporal's CLI or UI does."""
    from temporalio.client import Client

    handle = (await Client.connect(address)).get_workflow_handle(wid)
    await getattr(handle, act)(**kwargs)


async def work_until_ended(repo: Path, address: str, queue: str, wid: str) -> BaseException | None:
    """A worker of the queue in this process until the workflow ends, however it ends."""
    from temporalio.client import Client
    from temporalio.worker import Worker

    from supervisor.temporal.activities import StepActivities
    from supervisor.temporal.workflow import TaskWorkflow

    client = await Client.connect(address)
    steps = StepActivities(repo, 2)
    try:
        async with Worker(
            client, task_queue=repository_queue(repo, queue), workflows=[TaskWorkflow],
            activities=steps.activities(), max_concurrent_activities=2,
        ):  # fmt: skip
            try:
                await asyncio.wait_for(client.get_workflow_handle(wid).result(), 120)
            except TimeoutError:
                raise
            except Exception as e:  # the spec looks at how it ended
                return e
            return None
    finally:
        steps.pool.shutdown(wait=True)


def finish(p: Project, temporal: DevServer, queue: str, wf_id: int, wid: str) -> None:
    """`resume` has handed the task back: a worker of `queue` runs it to the end, once."""
    assert asyncio.run(work_until_ended(p.root, temporal.address, queue, wid)) is None
    wf = p.workflow(wf_id)
    assert wf.status == "completed", wf.error
    assert p.on_branch("answer.txt") == "42\n"
    kinds = [e.type for e in p.events(None, wf_id)]
    assert kinds.count("implementation") == 1, kinds


def test_a_task_on_a_queue_no_worker_polls_says_so_and_resume_hands_it_to_the_current_one(
    project: Callable[..., Project], temporal: DevServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    p, old = a_task(project, temporal, monkeypatch)
    wf_id, wid = submit(p.root, TASK)
    config = p.root / ".supervisor" / "config.yaml"
    config.write_text(config.read_text().replace(old, "renamed"))  # temporal.task_queue changed
    was, now = repository_queue(p.root, old), repository_queue(p.root, "renamed")
    polling = leases.worker_name(now, "hostb-1")  # this repository's worker, on the new name
    with reading(p.root) as store, leases.hold(store.engine, polling, None, "repository"):
        said = label(p.root, wf_id)
    assert said.startswith(f"stranded on queue {was}, which no worker polls"), said
    assert f"workers poll {now}" in said and f"supervisor resume {wf_id}" in said, said

    handed = hand_back(open_project(p.root), wf_id)

    assert handed.queue == now
    assert handed.said == [f"it was submitted to queue {was}, which no worker polls any more"]
    finish(p, temporal, "renamed", wf_id, wid)
    submitted = [e for e in p.events("temporal_submitted", wf_id)]
    assert [e.payload["task_queue"] for e in submitted] == [was, now]


def test_a_workflow_cancelled_in_temporal_records_why_and_resume_hands_it_back(
    project: Callable[..., Project], temporal: DevServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from temporalio.client import WorkflowFailureError
    from temporalio.exceptions import CancelledError

    p, queue = a_task(project, temporal, monkeypatch)
    wf_id, wid = submit(p.root, TASK)
    asyncio.run(on_workflow(temporal.address, wid, "cancel"))

    ended = asyncio.run(work_until_ended(p.root, temporal.address, queue, wid))

    assert isinstance(ended, WorkflowFailureError) and isinstance(ended.cause, CancelledError)
    wf = p.workflow(wf_id)
    assert wf.status == "failed"  # written before the workflow ended, with why
    (failed,) = p.events("temporal_failed", wf_id)
    assert "workflow was cancelled" in failed.payload["reason"]
    assert label(p.root, wf_id).startswith("failed in Temporal: its Temporal workflow was cancel")
    assert hand_back(open_project(p.root), wf_id).said == []
    finish(p, temporal, queue, wf_id, wid)


def test_a_workflow_terminated_in_temporal_is_noticed_by_status_and_resume_hands_it_back(
    project: Callable[..., Project], temporal: DevServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    p, queue = a_task(project, temporal, monkeypatch)
    wf_id, wid = submit(p.root, TASK)
    asyncio.run(on_workflow(temporal.address, wid, "terminate", reason="stopped by hand"))
    assert p.workflow(wf_id).status == "running"  # no code of ours ran: the state cannot say

    shown = status_of(p.root, wf_id)
    assert "stopped in Temporal: its workflow was terminated (reason: stopped by hand, by " in shown
    assert f"`supervisor resume {wf_id}` hands it back" in shown

    handed = hand_back(open_project(p.root), wf_id)

    assert len(handed.said) == 1 and "was terminated (reason: stopped by hand" in handed.said[0]
    (failed,) = p.events("temporal_failed", wf_id)  # the events say it too
    assert "was terminated" in failed.payload["reason"]
    finish(p, temporal, queue, wf_id, wid)
