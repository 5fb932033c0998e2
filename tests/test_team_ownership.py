"""A state database is one repository's, at submission as at the worker (issue 58, item 4).

Two repositories (two root commits) configured alike: one shared PostgreSQL database as their
state (`SUPERVISOR_STATE_URL`, as a team's hosts set it), one Temporal dev server, one task
queue name. The first task submitted makes the database its repository's; a submission from the
other is refused before anything is written, naming both repositories and the fix; this
repository's worker refuses the database while the other's task is live there, and `abandon` of
that task gives the database back. The queues are per repository by construction: a worker
polls only its own repository's, so the other repository's task waits on its own queue,
untouched, instead of being failed by a worker that cannot run it. The real submission, the
real workflow and activities of an in-process worker over the stand-in sandbox
(tests/temporal_standin.py), real git.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
from typing import TYPE_CHECKING

import pytest
import test_engine_fast
from temporal_standin import Sandbox, repository_queue, run_on_temporal, submit, to_temporal
from temporal_standin import use_sandbox as use_sandbox
from temporal_support import DevServer
from test_engine_fast import TASK, Project, writes

from supervisor.core.errors import StateError
from supervisor.guard.trust import trust
from supervisor.lifecycle.abandon import abandon
from supervisor.lifecycle.demo import make_demo_repo
from supervisor.lifecycle.opening import open_project, reading
from supervisor.temporal.identity import repository_id
from supervisor.temporal.worker import preflight

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path

pytestmark = pytest.mark.xdist_group("postgres")  # the group's one PostgreSQL cluster
project = test_engine_fast.project  # the stand-in project fixture
warm_packer = test_engine_fast.warm_packer

ONE_STEP = """implement
  steps:
    implement: {role: implementer, next: commit}
    commit: {action: commit}
"""


@pytest.fixture(scope="module")
def temporal(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    server = DevServer(tmp_path_factory.mktemp("temporal"))
    yield server
    server.stop()


def another_repository(ours: Path, path: Path) -> Path:
    """A repository of its own (its own root commit) configured as `ours` is: the same Temporal
    server and queue name, the same state database (the environment's)."""
    theirs = make_demo_repo(path)
    subprocess.run(
        ["git", "-C", str(theirs), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q",
         "--amend", "-m", "Their calculator"],
        check=True,
    )  # fmt: skip
    for name in ("config.yaml", "workflow.yaml"):
        (theirs / ".supervisor").mkdir(exist_ok=True)
        shutil.copy(ours / ".supervisor" / name, theirs / ".supervisor" / name)
    trust(theirs)
    return theirs


def branches(repo: Path) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), "branch", "--list", "ai/*"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout


async def history_kinds(address: str, wid: str) -> list[str]:
    """The event types of the workflow's history so far, then the workflow is ended (its
    queue has no worker: it would wait there until the server's retention)."""
    from temporalio.api.enums.v1 import EventType
    from temporalio.client import Client

    handle = (await Client.connect(address)).get_workflow_handle(wid)
    kinds = [EventType.Name(e.event_type) async for e in handle.fetch_history_events()]
    await handle.terminate("the spec is over")
    return kinds


def test_a_database_takes_no_task_of_another_repository_and_abandon_gives_it_back(
    project: Callable[..., Project],
    temporal: DevServer,
    shared_state: str,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    p = project(ONE_STEP, None, ("ROLE: implementer", writes({"answer.txt": "42\n"})))
    queue = to_temporal(p.root, temporal)
    theirs = another_repository(p.root, tmp_path / "theirs")
    ours_id, their_id = repository_id(p.root), repository_id(theirs)
    assert ours_id != their_id
    # one queue name configured in both, two queues
    assert repository_queue(p.root, queue) != repository_queue(theirs, queue)

    misplaced, their_wid = submit(theirs, "Their task")  # the database had no task: theirs now

    with pytest.raises(StateError) as at_worker:
        preflight(open_project(p.root))
    said = at_worker.value.message
    assert their_id in said and ours_id in said and str(theirs) in said, said
    assert f"supervisor abandon {misplaced}" in (at_worker.value.hint or "")
    with pytest.raises(StateError) as at_submission:
        submit(p.root, TASK)
    said = at_submission.value.message
    assert their_id in said and ours_id in said and str(theirs) in said, said
    assert "\n" not in said and "its own database" in (at_submission.value.hint or "")
    with reading(p.root) as store:
        assert [w.id for w in store.workflows()] == [misplaced]  # nothing written
    assert branches(p.root) == ""

    abandon(misplaced, p.root)  # from this repository's checkout: the database is ours again
    assert preflight(open_project(p.root)) == ours_id
    use_sandbox(monkeypatch, Sandbox(p.script))
    wf = run_on_temporal(p.root, temporal, queue, TASK)  # this repository's worker, its queue

    assert wf.status == "completed", wf.error
    assert p.git("show", f"{wf.task_branch}:answer.txt") == "42\n"
    kinds = asyncio.run(history_kinds(temporal.address, their_wid))
    # their task waited on their queue: no worker took even its workflow's first task
    assert "EVENT_TYPE_WORKFLOW_TASK_STARTED" not in kinds, kinds
    assert "EVENT_TYPE_ACTIVITY_TASK_SCHEDULED" not in kinds, kinds
