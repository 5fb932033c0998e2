"""Several tasks in one repository: each held by its own lock while a supervisor runs it, and
what they share guarded only for the moment they share it. Real processes, real flock, real git;
no Docker (a refused resume stops before the sandbox is opened)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest
from e2e_support import new_repo

from supervisor.core.errors import WorkflowBusyError
from supervisor.lifecycle import abandon
from supervisor.sandbox.docker import (
    LABEL_REPO,
    LABEL_WORKFLOW,
    RUN_PREFIX,
    remove_stale_run_dirs,
    repo_label,
    run_dir_label,
)
from supervisor.state.locks import critical_section, lock_path, task_holder, task_lock
from supervisor.state.store import Store
from supervisor.workspace.worktrees import Workspace, wait_for_deletions

HOLD = """
import sys, time
from pathlib import Path
from supervisor.state.locks import {function}
with {function}(Path(sys.argv[1]), {argument}):
    print("held", flush=True)
    sys.stdin.readline()
"""


@pytest.fixture(autouse=True)
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SUPERVISOR_USER_DIR", str(tmp_path / "user"))
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")


def holder(state_dir: Path, function: str = "task_lock", argument: str = "1") -> subprocess.Popen:
    """Another process holding a lock, as a running supervisor would, until its stdin closes."""
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD.format(function=function, argument=argument), str(state_dir)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


def repo_with_tasks(tmp_path: Path, count: int) -> Path:
    repo = new_repo(tmp_path, "http://127.0.0.1:9")
    ws = Workspace(repo)
    with Store(repo / ".supervisor" / "state.db") as store:
        for n in range(count):
            store.create_workflow(
                description=f"task {n + 1}",
                cli="claude",
                base_branch="main",
                base_sha=ws.head_commit(),
                branch_for_id=lambda i: f"ai/{i}-task",
                definition={},
                first_step="implement",
            )
    return repo


def cli(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "supervisor", *args, "--repo", str(repo)],
        env={**os.environ, "COLUMNS": "200"},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_resume_of_a_task_a_live_supervisor_runs_is_refused_naming_it(tmp_path: Path) -> None:
    repo = repo_with_tasks(tmp_path, 2)
    state = repo / ".supervisor"
    running = holder(state)
    try:
        with Store(state / "state.db") as store:
            events_before = len(store.events(1))
        result = cli(repo, "resume", "1")
        assert result.returncode == 2, result.stderr
        message = " ".join(result.stderr.split())
        assert f"Task 1 is still running: a supervisor (pid {running.pid}) holds it" in message
        assert "supervisor resume 1" in message and "fix:" in message
        with Store(state / "state.db") as store:
            assert len(store.events(1)) == events_before  # the refused resume changed nothing
        listed = {wf["id"]: wf for wf in json.loads(cli(repo, "status", "--json").stdout)}
        assert listed[1]["supervisor_pid"] == running.pid
        assert listed[2]["supervisor_pid"] is None  # the other task is not held by it
        with task_lock(state, 2):  # and stays free to start, resume or abandon meanwhile
            pass
        with pytest.raises(WorkflowBusyError, match="Task 1 is still running"):
            abandon.abandon(1, repo)
    finally:
        running.kill()
        running.wait()
    # SIGKILL: the kernel dropped the lock; the pid written in it is history.
    assert lock_path(state, 1).read_text() == f"pid {running.pid}"
    assert task_holder(state, 1) is None
    table = cli(repo, "status").stdout
    assert "running (no supervisor)" in table


def test_a_stale_lock_of_a_dead_pid_is_taken_over(tmp_path: Path) -> None:
    state = tmp_path / ".supervisor"
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    lock_path(state, 7).parent.mkdir(parents=True)
    lock_path(state, 7).write_text(f"pid {dead.pid}")
    assert task_holder(state, 7) is None
    with task_lock(state, 7):
        assert lock_path(state, 7).read_text() == f"pid {os.getpid()}"
        assert task_holder(state, 7) == os.getpid()
    assert task_holder(state, 7) is None


def test_a_crash_of_one_holder_leaves_the_other_tasks_locks_held(tmp_path: Path) -> None:
    state = tmp_path / ".supervisor"
    first, second = holder(state, argument="1"), holder(state, argument="2")
    try:
        first.send_signal(signal.SIGKILL)
        first.wait()
        assert task_holder(state, 1) is None
        assert task_holder(state, 2) == second.pid
        with pytest.raises(WorkflowBusyError), task_lock(state, 2):
            pass
    finally:
        second.kill()
        second.wait()


def test_git_bookkeeping_waits_for_another_process_in_the_same_repository(
    tmp_path: Path,
) -> None:
    repo = new_repo(tmp_path, "http://127.0.0.1:9")
    ws = Workspace(repo)
    head = ws.head_commit()
    other = holder(ws.state_dir, "critical_section", "'git'")
    moved = threading.Event()

    def move() -> None:
        ws.set_ref("refs/supervisor/wf1/candidate", head, "")
        moved.set()

    thread = threading.Thread(target=move)
    try:
        thread.start()
        assert not moved.wait(1.0)  # the ref update waits while the other process is in git
    finally:
        assert other.stdin is not None
        other.stdin.close()
        other.wait()
    assert moved.wait(30)
    thread.join()
    with critical_section(ws.state_dir, "git"):  # free again
        pass


def test_clean_up_after_a_crash_touches_only_the_tasks_own_worktrees(tmp_path: Path) -> None:
    repo = new_repo(tmp_path, "http://127.0.0.1:9")
    ws = Workspace(repo)
    head = ws.head_commit()
    mine = ws.add_worktree("wf1-implement-implementer-1", head)
    theirs = ws.add_worktree("wf12-implement-implementer-1", head)
    (ws.trash_dir / "wf1-plan-abc").mkdir(parents=True)
    (ws.trash_dir / "wf12-plan-abc").mkdir()

    assert ws.remove_stale_worktrees(prefix="wf1-") == [mine.name]
    wait_for_deletions()
    assert not mine.exists()
    assert (theirs / "calc.py").is_file()  # the running task's worktree is whole
    assert theirs in ws._registered_paths()
    assert sorted(p.name for p in ws.trash_dir.iterdir()) == ["wf12-plan-abc"]


def test_clean_up_removes_only_the_tasks_own_run_folders() -> None:
    repo = f"test{os.getpid()}"
    made = {
        n: Path(tempfile.mkdtemp(prefix=f"{RUN_PREFIX}{repo}-wf{n}-")) for n in ("1", "12", "2")
    }
    try:
        remove_stale_run_dirs(run_dir_label({LABEL_REPO: repo, LABEL_WORKFLOW: "1"}))
        assert [n for n, path in made.items() if path.exists()] == ["12", "2"]
    finally:
        for path in made.values():
            if path.exists():
                path.rmdir()


WRITER = """
import sys
from pathlib import Path
from supervisor.state.store import EventSpec, Store
with Store(Path(sys.argv[1])) as store:
    wf = store.create_workflow(
        description="writer", cli="claude", base_branch="main", base_sha="0" * 40,
        branch_for_id=lambda i: f"ai/{i}-writer", definition={}, first_step="implement",
    )
    for n in range(150):
        store.add_event(wf.id, EventSpec("note", status=str(n)))
        store.update_workflow(wf.id, status="running", current_step=f"s{n}", context={"n": n})
        store.interrupt_running_steps(wf.id)  # a read, then a write, in one transaction
"""


def test_tasks_writing_the_state_database_at_once_lose_nothing(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    writers = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(db)], stderr=subprocess.PIPE, text=True)
        for _ in range(3)
    ]
    errors = [w.communicate(timeout=300)[1] for w in writers]
    assert [w.returncode for w in writers] == [0, 0, 0], errors
    with Store(db) as store:
        assert store.integrity_ok()
        for wf in store.workflows():
            assert wf.context == {"n": 149} and wf.current_step == "s149"
            assert [e.status for e in store.events(wf.id) if e.type == "note"] == [
                str(n) for n in range(150)
            ]


def test_a_killed_image_commands_head_tree_goes_but_a_live_ones_stays(tmp_path: Path) -> None:
    from supervisor.lifecycle.image_commands import remove_dead_head_trees
    from supervisor.lifecycle.opening import open_project

    project = open_project(new_repo(tmp_path, "http://127.0.0.1:9"))
    ws = project.workspace
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    ws.add_worktree(f"sandbox-{dead.pid}", ws.head_commit())
    live = ws.add_worktree(f"sandbox-{os.getpid()}", ws.head_commit())
    assert remove_dead_head_trees(project) == [f"sandbox-{dead.pid}"]
    assert [p.name for p in ws.worktrees_dir.iterdir()] == [live.name]


@pytest.mark.docker
def test_abandon_removes_the_killed_tasks_containers_and_no_other_tasks(tmp_path: Path) -> None:
    import docker
    from e2e_support import IMAGE, require_sandbox

    require_sandbox()
    repo = repo_with_tasks(tmp_path, 2)
    client = docker.from_env()
    label = repo_label(repo)
    left = {
        n: client.containers.run(
            IMAGE,
            ["sleep", "120"],
            detach=True,
            network_mode="none",
            labels={LABEL_REPO: label, LABEL_WORKFLOW: str(n)},
        )
        for n in (1, 2)
    }
    try:
        abandon.abandon(1, repo)
        running = client.containers.list(all=True, filters={"label": f"{LABEL_REPO}={label}"})
        assert [c.id for c in running] == [left[2].id]  # task 2 may be running: untouched
    finally:
        for container in left.values():
            with contextlib.suppress(docker.errors.NotFound):
                container.remove(force=True)


KILLED_WITH_VIEWS = """
import os, sys
from pathlib import Path
from supervisor.workspace.worktrees import Workspace
ws = Workspace(Path(sys.argv[1]))
for n in (1, 2):
    ws.use_overlay(owner=f"wf{n}")
    ws.add_worktree(f"wf{n}-implement-implementer-1", ws.head_commit())
os._exit(0)  # killed: the views and their bases stay
"""


def test_abandon_removes_the_task_s_copy_on_write_bases_and_no_other_tasks(
    tmp_path: Path,
) -> None:
    repo = repo_with_tasks(tmp_path, 2)
    subprocess.run([sys.executable, "-c", KILLED_WITH_VIEWS, str(repo)], check=True)
    bases = repo / ".supervisor" / "bases"
    assert sorted(p.name for p in bases.iterdir()) == ["wf1", "wf2"]

    abandon.abandon(1, repo)
    wait_for_deletions()

    assert [p.name for p in bases.iterdir()] == ["wf2"]  # task 2 may be running: untouched
    worktrees = sorted(p.name for p in (repo / ".supervisor" / "worktrees").iterdir())
    assert worktrees == ["wf2-implement-implementer-1"]


@pytest.mark.docker
def test_a_killed_starts_probe_container_goes_but_a_starting_ones_stays(tmp_path: Path) -> None:
    import docker
    from e2e_support import IMAGE, require_sandbox

    from supervisor.lifecycle.opening import open_project, remove_dead_probes
    from supervisor.sandbox.docker import LABEL_PROBE, DockerSandbox

    require_sandbox()
    project = open_project(new_repo(tmp_path, "http://127.0.0.1:9"))
    client = docker.from_env()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    probes = {
        pid: client.containers.create(
            IMAGE, ["true"], labels={LABEL_REPO: repo_label(project.root), LABEL_PROBE: str(pid)}
        )
        for pid in (dead.pid, os.getpid())
    }
    try:
        sandbox = DockerSandbox(IMAGE, project.settings.sandbox.egress_network, client)
        assert remove_dead_probes(project, sandbox) == [probes[dead.pid].id]
        probes[os.getpid()].reload()  # still there: its supervisor is alive
    finally:
        for container in probes.values():
            with contextlib.suppress(docker.errors.NotFound):
                container.remove(force=True)


FIREWALL = """
import sys
from supervisor.sandbox.egress import HostFirewall
print(HostFirewall(sys.argv[1]).warning or "ok", flush=True)
"""


def test_supervisors_starting_at_once_set_up_the_host_firewall_once(tmp_path: Path) -> None:
    """Tasks starting side by side share the sandbox network's iptables chain: none of them may
    fail on another's half-made chain (that would leave host services open to its workers)."""
    import shutil

    from e2e_support import missing

    if os.getuid() != 0 or shutil.which("iptables") is None:
        missing("the host firewall needs root and iptables")
    bridge = f"mt{os.getpid():x}{int(time.time()) % 4096:x}"
    chain = f"SUPERVISOR-{bridge[-12:]}".upper()
    iptables = ["iptables", "-w", "5"]
    try:
        starts = [
            subprocess.Popen(
                [sys.executable, "-c", FIREWALL, bridge], stdout=subprocess.PIPE, text=True
            )
            for _ in range(4)
        ]
        assert [p.communicate(timeout=120)[0].strip() for p in starts] == ["ok"] * 4
        rules = subprocess.run([*iptables, "-S", chain], capture_output=True, text=True).stdout
        assert rules.count("-j DROP") == 1 and rules.count("ESTABLISHED") == 1
        jumps = subprocess.run([*iptables, "-S", "INPUT"], capture_output=True, text=True).stdout
        assert jumps.count(f"-i {bridge} -j {chain}") == 1
    finally:
        jump = [*iptables, "-D", "INPUT", "-i", bridge, "-j", chain]
        while subprocess.run(jump, capture_output=True, check=False).returncode == 0:
            pass
        subprocess.run([*iptables, "-F", chain], check=False)
        subprocess.run([*iptables, "-X", chain], check=False)
