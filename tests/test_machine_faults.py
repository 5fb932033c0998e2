"""Faults of the machine, not the worker (issue 50): a stop asked by SIGTERM, a file system that
fills up under a running task, a state database another program holds locked. Each ends in one
clear message (no traceback), a state `status` can explain, and a `resume` that completes the
task once the machine is fixed, buying no finished worker's answer again where the answer was
already recorded.

Real parts: the `supervisor` command as a process of its own (tests/standin_cli.py) or in-process
(tests/cli_support.py), real git, real SQLite, a real tmpfs for the full disk, a real `sqlite3`
connection in another process for the lock, a real signal. The container is the stand-in sandbox
(supervisor/sandbox/standin.py), whose scripted workers run in the supervisor's process.
docs/fault-matrix.md maps these specs to the faults and the moments they strike.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import standin_cli
from cli_support import supervisor
from e2e_support import missing

from supervisor.cli.interrupt import TERMINATED, resumable
from supervisor.core.errors import DiskFullError, Terminated
from supervisor.core.process import run as run_process
from supervisor.guard.trust import trust
from supervisor.lifecycle import tasks
from supervisor.lifecycle.demo import make_demo_repo
from supervisor.sandbox.standin import StandinSandbox, WorkerCall
from supervisor.state.busy import BUSY_TIMEOUT_ENV
from supervisor.state.store import Store
from supervisor.workspace.worktrees import Workspace

if TYPE_CHECKING:
    from collections.abc import Iterator

DRIVER = Path(standin_cli.__file__)
TASK = "Write the answer file"
WORKFLOW = """workflow:
  initial_step: implement
  steps:
    implement: {role: implementer, next: review, max_retries: 2}
    review: {role: reviewer, next: commit, on_reject: implement}
    commit: {action: commit}
"""
CONFIG = "clis:\n  claude:\n    base_url: http://127.0.0.1:9\n"
WAIT_S = 60.0
"""The longest a spec waits for the process to reach the moment it strikes at (a bound, never a
measure: each spec goes on as soon as the moment comes)."""


@pytest.fixture
def standin(monkeypatch: pytest.MonkeyPatch, api_keys: None) -> None:
    """In-process commands get the stand-in sandbox with the driver's scripted workers."""
    monkeypatch.setattr(
        tasks, "open_sandbox", lambda project, clis, **_: StandinSandbox(standin_cli.worker)
    )


def new_project(root: Path, *, mount: str | None = None, options: str = "size=4m") -> Path:
    """The demo repository with the workflow above; `mount`: its `.supervisor/` made a tmpfs
    with `options` first (see `tmpfs`)."""
    repo = make_demo_repo(root)
    state = repo / ".supervisor"
    state.mkdir(exist_ok=True)
    if mount is not None:
        _mount(repo / mount, options)
    (state / "config.yaml").write_text(CONFIG)
    (state / "workflow.yaml").write_text(WORKFLOW)
    trust(repo)  # the base URL is this test's own (nothing listens there: no container)
    return repo


MOUNTED: list[Path] = []


def _mount(folder: Path, options: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"{options},mode=0755", "tmpfs", str(folder)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        missing(f"cannot mount a tmpfs (root needed): {done.stderr.strip()}")
    MOUNTED.append(folder)


@pytest.fixture
def tmpfs() -> Iterator[None]:
    """Unmounts what `new_project` mounted, whatever the spec's end."""
    yield
    while MOUNTED:
        folder = MOUNTED.pop()
        subprocess.run(["umount", "-l", str(folder)], capture_output=True, check=False)


def started(repo: Path, env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(DRIVER), *args, "--repo", str(repo)],
        env={**os.environ, "COLUMNS": "400", **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=repo,
    )


def reach(mark: Path, proc: subprocess.Popen[str]) -> None:
    """Wait until the process touches `mark` (it stands where the spec strikes)."""
    deadline = time.monotonic() + WAIT_S
    while not mark.exists():
        if proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail(f"the process ended (exit {proc.returncode}) first:\n{out}\n{err}")
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"the process did not reach {mark.name} in {WAIT_S:.0f} s")
        time.sleep(0.05)


def workflow(repo: Path) -> tasks.Workflow:
    with tasks.reading(repo) as store:
        return store.workflow(1)


def bought(log: Path) -> list[str]:
    return log.read_text().split() if log.exists() else []


def on_branch(repo: Path, path: str) -> str:
    return str(
        run_process(["git", "-C", str(repo), "show", f"{workflow(repo).task_branch}:{path}"]).stdout
    )


def one_error_line(stderr: str) -> str:
    """The error's line; the output holds no traceback and no other error."""
    assert "Traceback" not in stderr, stderr
    errors = [line for line in stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, stderr
    return errors[0]


# -- SIGTERM ---------------------------------------------------------------------------------------


def test_sigterm_while_a_step_runs_stops_like_ctrl_c_exits_143_and_resume_completes(
    tmp_path: Path, standin: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """systemd, `docker stop` or a CI runner's cancel: the run stops where it is, says which
    workflow and how to go on, and exits as a shell reports a SIGTERM (143)."""
    repo = new_project(tmp_path / "repo")
    log, mark = tmp_path / "bought.log", tmp_path / "implementing"
    env = {"STANDIN_IMPLEMENTER": "blocks", "STANDIN_MARK": str(mark), "STANDIN_LOG": str(log)}
    proc = started(repo, env, "start-task", TASK, "--yes")
    reach(mark, proc)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=WAIT_S)

    assert proc.returncode == TERMINATED == 143, err
    said = " ".join(err.split())
    assert "Stopped (SIGTERM). Workflow 1 keeps the steps it finished" in said, err
    assert "continue it with: supervisor resume 1" in said
    assert "Traceback" not in err and "Aborted!" not in err
    assert "running (no supervisor)" in supervisor("status", "--repo", str(repo)).stdout

    monkeypatch.setenv("STANDIN_LOG", str(log))
    resumed = supervisor("resume", "1", "--repo", str(repo))
    assert resumed.returncode == 0, resumed.stderr
    assert workflow(repo).status == "completed"
    assert on_branch(repo, "answer.txt") == "right\n"
    # The stopped implementer never answered: its step ran again, once; nothing else twice.
    assert bought(log) == ["implementer", "reviewer"]


def test_the_sigterm_handler_is_set_only_while_a_run_goes_and_then_put_back(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def before(signum: int, frame: object) -> None:
        raise AssertionError("the handler of before the run was called")

    previous = signal.signal(signal.SIGTERM, before)
    try:
        with pytest.raises(SystemExit) as ended, resumable(tmp_path, 7):
            assert signal.getsignal(signal.SIGTERM) is not before
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)  # the handler raises here, at once
        assert ended.value.code == TERMINATED
        assert "supervisor resume 7" in " ".join(capsys.readouterr().err.split())
        assert signal.getsignal(signal.SIGTERM) is before

        with resumable(tmp_path, 7):  # a run that ends as it should: put back as well
            pass
        assert signal.getsignal(signal.SIGTERM) is before

        seen: list[object] = []

        def elsewhere() -> None:  # Python lets only the main thread set a handler
            with resumable(tmp_path, 7):
                seen.append(signal.getsignal(signal.SIGTERM))

        thread = threading.Thread(target=elsewhere)
        thread.start()
        thread.join()
        assert seen == [before]
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_a_stop_is_a_keyboard_interrupt_so_every_unwinding_path_treats_it_as_one() -> None:
    """What Ctrl-C's unwinding does (the engine's `except Exception` lets it through, the clean-
    ups in `finally` run), SIGTERM's does too; only the worker left running differs."""
    assert issubclass(Terminated, KeyboardInterrupt)
    assert not issubclass(Terminated, Exception)


# -- a full disk -----------------------------------------------------------------------------------


def test_a_full_state_folder_ends_in_one_line_naming_it_and_resume_completes_after_freeing_space(
    tmp_path: Path, standin: None, tmpfs: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The repository's `.supervisor/` (state database, worktrees) on a small file system that
    another program fills while the implementer runs: the database cannot record even the
    failure, so the message says so, and the task stays resumable at its last recorded step."""
    repo = new_project(tmp_path / "repo", mount=".supervisor")
    state = repo / ".supervisor"
    log, mark = tmp_path / "bought.log", tmp_path / "filled"
    env = {
        "STANDIN_IMPLEMENTER": "fills",
        "STANDIN_BALLAST": str(state / "ballast"),
        "STANDIN_MARK": str(mark),
        "STANDIN_LOG": str(log),
    }
    proc = started(repo, env, "start-task", TASK, "--yes")
    _, err = proc.communicate(timeout=WAIT_S)

    assert mark.exists(), err  # the disk did fill while the implementer ran
    assert proc.returncode == DiskFullError.exit_code == 1, err
    said = " ".join(err.split())
    line = one_error_line(err)
    assert line.startswith(f"error: No space left on the file system mounted at {state} (0 B"), line
    assert (
        f"for the state database {state / 'state.db'}: it could not record this change, so the "
        "task stays at its last recorded step." in said
    ), err
    fix = " ".join(err.split("fix:", 1)[1].split())
    assert fix.startswith(f"Free space on {state}, then run `supervisor resume 1`"), err
    shown = supervisor("status", "--repo", str(repo)).stdout
    assert "running (no supervisor)" in shown, shown

    (state / "ballast").unlink()
    with Store(state / "state.db") as store:
        assert store.integrity_ok()
    monkeypatch.setenv("STANDIN_LOG", str(log))
    resumed = supervisor("resume", "1", "--repo", str(repo))
    assert resumed.returncode == 0, resumed.stderr
    assert workflow(repo).status == "completed"
    assert on_branch(repo, "answer.txt") == "right\n"
    # The stand-in's worker ran in the supervisor's own process, with no container left to
    # adopt: its answer is bought again here. A real worker's is not (the same moment on the
    # real sandbox: tests/test_machine_faults_e2e.py).
    assert bought(log) == ["implementer", "implementer", "reviewer"]


def test_a_state_folder_with_no_room_for_a_file_fails_the_task_saying_why_and_buys_nothing_twice(
    tmp_path: Path, standin: None, tmpfs: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`.supervisor/` on a file system that runs out of inodes while the implementer runs: the
    database's files still grow, so the implementer's answer is recorded, and the review step,
    which cannot make its worktree, fails the task with what is full and where; `status` says
    it, and after freeing space `resume` runs on without buying the implementer's answer
    again."""
    repo = new_project(tmp_path / "repo", mount=".supervisor", options="size=64m,nr_inodes=400")
    state = repo / ".supervisor"
    log, mark = tmp_path / "bought.log", tmp_path / "filled"
    env = {
        "STANDIN_IMPLEMENTER": "fills-inodes",
        "STANDIN_BALLAST": str(state / "ballast"),
        "STANDIN_MARK": str(mark),
        "STANDIN_LOG": str(log),
    }
    proc = started(repo, env, "start-task", TASK, "--yes")
    _, err = proc.communicate(timeout=WAIT_S)

    assert mark.exists(), err
    assert proc.returncode == 1, err
    line = one_error_line(err)
    assert line.startswith(f"error: No space left on the file system mounted at {state} ("), line
    assert "no inode left for a new file)" in line and str(state / "worktrees") in line, line
    assert "supervisor resume 1" in " ".join(err.split("fix:", 1)[1].split()), err
    wf = workflow(repo)
    assert wf.status == "failed" and wf.current_step == "review"
    assert wf.error is not None and wf.error.startswith("No space left on the file system")
    detail = " ".join(supervisor("status", "1", "--repo", str(repo)).stdout.split())
    assert f"No space left on the file system mounted at {state}" in detail, detail

    subprocess.run(["rm", "-rf", str(state / "ballast")], check=True)
    monkeypatch.setenv("STANDIN_LOG", str(log))
    resumed = supervisor("resume", "1", "--repo", str(repo))
    assert resumed.returncode == 0, resumed.stderr
    assert workflow(repo).status == "completed"
    assert bought(log) == ["implementer", "reviewer"]


# -- a locked state database -----------------------------------------------------------------------

HOLDER = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN EXCLUSIVE")
print("held", flush=True)
sys.stdin.read()  # until the spec lets go
"""


@contextlib.contextmanager
def held(db: Path) -> Iterator[subprocess.Popen[str]]:
    """Another program (python's sqlite3 in a process of its own) holding the database's write
    lock in an open `BEGIN EXCLUSIVE` until the block ends."""
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(db)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "held\n"
        yield proc
    finally:
        proc.kill()
        proc.wait()


def test_a_database_locked_past_the_busy_timeout_names_the_holder_and_writes_nothing(
    tmp_path: Path, standin: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A task's change waits for another program's lock up to the busy timeout, then is refused
    whole (its transaction never began): the message names the process that holds the lock
    and the fix; once the lock is gone the command runs."""
    monkeypatch.setenv(BUSY_TIMEOUT_ENV, "0.5")
    repo = new_project(tmp_path / "repo")
    db = repo / ".supervisor" / "state.db"
    Store(db).close()  # the database exists, at this schema
    with held(db) as holder:
        refused = supervisor("start-task", TASK, "--yes", "--repo", str(repo))
    assert refused.returncode == 2, refused.stderr
    line = one_error_line(refused.stderr)
    assert line.startswith(f"error: The state database {db} is locked by another program"), line
    assert f"pid {holder.pid} python" in line, line
    said = " ".join(refused.stderr.split())
    assert "; waited for 0.5 s and wrote nothing of this change." in said, said
    fix = " ".join(refused.stderr.split("fix:", 1)[1].split())
    assert fix == (
        "End that program's open transaction (or the program), then run the command again."
    ), fix
    with tasks.reading(repo) as store:
        assert store.workflows() == []  # nothing of the task was written

    started_now = supervisor("start-task", TASK, "--yes", "--repo", str(repo))
    assert started_now.returncode == 0, started_now.stderr


def test_a_lock_taken_while_a_step_runs_leaves_the_task_as_last_recorded_and_resumable(
    tmp_path: Path, standin: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lock comes while the implementer works: the step's end cannot be recorded, nor the
    failure; nothing is half-written (the step's run, its events and the move to review
    commit together or not at all), and `resume` completes the task once the lock is gone."""
    monkeypatch.setenv(BUSY_TIMEOUT_ENV, "0.5")
    repo = new_project(tmp_path / "repo")
    db = repo / ".supervisor" / "state.db"
    holding: list[contextlib.ExitStack] = []

    def locks_then_answers(call: WorkerCall) -> str:
        if call.role == "implementer" and not holding:
            stack = contextlib.ExitStack()
            stack.enter_context(held(db))
            holding.append(stack)
        return standin_cli.worker(call)

    monkeypatch.setattr(
        tasks, "open_sandbox", lambda project, clis, **_: StandinSandbox(locks_then_answers)
    )
    try:
        refused = supervisor("start-task", TASK, "--yes", "--repo", str(repo))
    finally:
        for stack in holding:
            stack.close()
    assert refused.returncode == 2, refused.stderr
    line = one_error_line(refused.stderr)
    assert f"error: The state database {db} is locked by another program (pid " in line, line
    assert "supervisor resume 1" in refused.stderr.split("fix:", 1)[1]

    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    with tasks.reading(repo) as store:
        steps = store.steps(1)
        assert [(s["name"], s["status"]) for s in steps] == [("implement", "running")]
        assert store.checkpoints(1) == []  # no move half-made
        assert store.workflow(1).current_step == "implement"

    resumed = supervisor("resume", "1", "--repo", str(repo))
    assert resumed.returncode == 0, resumed.stderr
    assert workflow(repo).status == "completed"


@pytest.mark.usefixtures("tmpfs")
def test_worktrees_on_a_file_system_of_their_own_are_removed_where_they_are(tmp_path: Path) -> None:
    """`.supervisor/worktrees` mounted apart from `.supervisor` (its trash): a rename cannot
    cross, so a worktree is deleted in place rather than failing its step with EXDEV."""
    repo = new_project(tmp_path / "calc", mount=".supervisor/worktrees", options="size=16m")
    ws = Workspace(repo)
    tree = ws.add_worktree("wf1-implement-1", ws.branch_tip("main"))
    assert (tree / "calc.py").is_file()
    ws.remove_worktree(tree)
    assert not tree.exists()
    assert (
        str(tree)
        not in subprocess.run(
            ["git", "-C", str(repo), "worktree", "list"], capture_output=True, text=True, check=True
        ).stdout
    )
