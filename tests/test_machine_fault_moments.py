"""Faults of the machine at each moment of a task (issue 50; docs/fault-matrix.md): a SIGTERM, a
state database another program holds locked, a file system with no space left, striking while
the planner works, while the components fan out, while a gate runs (or before its worktree),
before a component's merge, before the commit. Each ends in one message and a clear state, and
`resume` finishes the task at the tree an undisturbed run makes, buying no answer twice that
had been recorded.

One task runs through every moment (tests/moments_support.py): a plan of three components (two
at a time), their merges, a test gate, the commit. The strike comes from where it would in
life: the scripted workers (the planner, component a), the stand-in sandbox's runs (a gate, a
container made), the proxy's record folder, or the named fault-injection points before a merge,
the commit and a gate's worktree (supervisor/core/faults.py `reached`, here given the fault to
deliver instead of its SIGKILL). Real parts as in tests/test_machine_faults.py: the command line
(in this process, whose main thread takes the signal), the engine, git, SQLite, a real tmpfs, a
real lock held by another process, a real signal.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import docker.errors
import pytest
from moments_support import (
    COMPONENT_GATES,
    GATES_SEEN,
    LIE,
    UNDISTURBED,
    WORKFLOW,
    Sandbox,
    Task,
    ended,
    on_tmpfs,
    resumed,
    sigterm,
    sigterm_while_the_gate_runs,
    started,
    status,
)
from standin_cli import fill, fill_inodes
from test_machine_faults import MOUNTED, _mount, held, one_error_line, tmpfs  # noqa: F401

from supervisor.cli.interrupt import TERMINATED
from supervisor.core import faults
from supervisor.core.errors import SandboxError
from supervisor.lifecycle import tasks
from supervisor.lifecycle.opening import reading
from supervisor.state.busy import BUSY_TIMEOUT_ENV

if TYPE_CHECKING:
    from collections.abc import Callable


@pytest.fixture
def task(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, api_keys: None
) -> Callable[[str, Callable[[], None]], Task]:
    """A task whose run meets `fault` at `moment`, on the stand-in sandbox, in this process."""

    def made(moment: str, fault: Callable[[], None]) -> Task:
        t = Task(tmp_path, moment, fault)
        sandbox = Sandbox(t.worker)
        sandbox.task = t
        monkeypatch.setattr(tasks, "open_sandbox", lambda project, clis, **_: sandbox)
        monkeypatch.setattr(faults, "reached", t.reached)
        return t

    return made


# -- SIGTERM ---------------------------------------------------------------------------------------

SIGTERM_AT = ["planning", "fan-out", "gating", "merging", "committing"]


@pytest.mark.parametrize("moment", SIGTERM_AT)
def test_sigterm_at_each_moment_stops_with_143_and_resume_buys_nothing_twice(
    moment: str, task: Callable[[str, Callable[[], None]], Task], monkeypatch: pytest.MonkeyPatch
) -> None:
    """systemd, `docker stop`, a CI cancel, at any moment: the same message and exit 143. In a
    fan-out, no component starts after the signal and the running ones end (their answers
    recorded) before the process exits; `resume` runs what was cut short and no more."""
    GATES_SEEN.clear()
    if moment == "gating":
        monkeypatch.setenv("GATE_PAUSE", "5")  # a bound: the signal ends it at once
    t = task(moment, sigterm_while_the_gate_runs if moment == "gating" else sigterm)
    t.configure()
    stopped = started(t)
    if moment == "gating":  # the gate's process (a container on Docker) ended, not left
        assert len(GATES_SEEN) == 1 and ended(GATES_SEEN[0]), GATES_SEEN
        monkeypatch.delenv("GATE_PAUSE")

    assert t.struck, stopped.stderr + stopped.stdout
    assert stopped.returncode == TERMINATED == 143, stopped.stderr
    said = " ".join(stopped.stderr.split())
    assert "Stopped (SIGTERM). Workflow 1 keeps the steps it finished" in said, said
    assert "continue it with: supervisor resume 1" in said, said
    assert "Traceback" not in stopped.stderr and "error:" not in stopped.stderr, said
    assert "running (no supervisor)" in status(t.repo)
    if moment == "fan-out":  # a and b ran to their answers; c never started
        assert sorted(t.bought) == ["a", "b", "planner"], t.bought

    resumed(t)
    # A worker cut short by the signal (the planner) never answered: it runs again, once.
    assert sorted(t.bought) == ["a", "b", "c", "planner"], t.bought


# -- a locked state database -----------------------------------------------------------------------

LOCK_AT = ["planning", "gating", "merging", "committing"]
STEP = {"planning": "plan", "gating": "test", "merging": "implement", "committing": "commit"}


@pytest.mark.parametrize("moment", LOCK_AT)
def test_a_lock_at_each_moment_is_said_with_its_holder_and_resume_completes(
    moment: str,
    task: Callable[[str, Callable[[], None]], Task],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Another program takes the state database's write lock at the moment: past the busy
    timeout the change is refused whole, the message names the holder and `resume`; once the
    lock is gone, `resume` completes the task."""
    monkeypatch.setenv(BUSY_TIMEOUT_ENV, "0.5")
    holding = contextlib.ExitStack()

    def takes_the_lock() -> None:
        holding.enter_context(held(t.repo / ".supervisor" / "state.db"))

    t = task(moment, takes_the_lock)
    t.configure()
    with holding:
        refused = started(t)
    assert t.struck
    assert refused.returncode == 2, refused.stderr
    line = one_error_line(refused.stderr)
    db = t.repo / ".supervisor" / "state.db"
    assert line.startswith(f"error: The state database {db} is locked by another program (pid "), (
        line
    )
    assert "supervisor resume 1" in refused.stderr.split("fix:", 1)[1]
    with reading(t.repo) as store:  # as last recorded (its lease, this live process's:
        wf = store.workflow(1)  # `status` says `running (no supervisor)` once it has exited)
        assert wf.status == "running" and wf.current_step == STEP[moment], wf

    resumed(t)
    # The planner's answer came while the lock was held and could not be recorded: the
    # stand-in has no container to adopt, so it is bought again (a real one is adopted,
    # tests/test_machine_faults_e2e.py). At the other moments every answer was recorded.
    again = ["planner"] if moment == "planning" else []
    assert sorted(t.bought) == sorted(["a", "b", "c", "planner", *again]), t.bought


# -- a full disk -----------------------------------------------------------------------------------


FULL_AT: dict[str, tuple[str, str, str]] = {
    "planning": (".supervisor", "size=16m", "bytes"),
    # The worktrees on a file system of their own, filled whole: the gate's tests find no room,
    # the state database (on another) keeps its own, however much it grows meanwhile.
    "gating": (".supervisor/worktrees", "size=16m", "bytes"),
    "component gating": (".supervisor/worktrees", "size=16m", "bytes"),
    "gate_worktree": (".supervisor", "size=64m,nr_inodes=400", "inodes"),
    "merging": (".git", "size=16m", "bytes"),
    "committing": (".git", "size=16m", "bytes"),
}


@pytest.mark.parametrize("moment", list(FULL_AT))
def test_a_full_disk_at_each_moment_names_the_file_system_and_resume_completes(
    moment: str,
    task: Callable[[str, Callable[[], None]], Task],
    tmpfs: None,  # noqa: F811 (the fixture, imported)
) -> None:
    """Another program fills the file system the moment writes (the state folder while the
    planner works; the worktrees' before a gate's worktree is made, or while the gate's tests
    run, which then find no room for their scratch file; the repository's `.git` before a merge
    or the commit, which git then cannot write): one line says which file system is full,
    `status` explains, and after freeing space `resume` completes the task. The gate that
    failed for want of space was the machine's fault: its output is not sent to the
    implementer, who is not asked again."""
    folder_name, options, how = FULL_AT[moment]
    ballast_holder: list[Path] = []

    def fills() -> None:
        ballast = t.repo / folder_name / "ballast"
        ballast_holder.append(ballast)
        if how == "inodes":
            fill_inodes(ballast)
            return
        fill(ballast)

    t = task("gating" if moment == "component gating" else moment, fills)
    folder = t.repo / folder_name
    on_tmpfs(folder, options)
    t.configure(COMPONENT_GATES if moment == "component gating" else WORKFLOW)
    if moment == "component gating":  # one at a time: no other component writes meanwhile
        config = t.repo / ".supervisor" / "config.yaml"
        config.write_text(config.read_text().replace("components: 2", "components: 1"))
    failed = started(t)

    assert t.struck
    assert failed.returncode == 1, failed.stderr
    line = one_error_line(failed.stderr)
    assert line.startswith(f"error: No space left on the file system mounted at {folder} ("), line
    fix = " ".join(failed.stderr.split("fix:", 1)[1].split())
    assert fix.startswith(f"Free space on {folder}, then run `supervisor resume 1`"), fix
    if moment == "planning":  # the database is on it: not even the failure is recorded
        assert "for the state database" in line
        assert "running (no supervisor)" in status(t.repo)
    else:
        shown = status(t.repo, "1")
        assert f"No space left on the file system mounted at {folder}" in shown, shown
    if moment == "component gating":  # its implementer's answer kept: not bought again
        assert "worktrees/wf1-implement-" in " ".join(failed.stderr.split()), failed.stderr
    if moment == "gating":  # the gate counts as failed, its output sent to no one
        with reading(t.repo) as store:
            gates = [
                (e.status, e.payload.get("exit_code")) for e in store.events(1) if e.type == "gate"
            ]
        assert gates == [("failed", 1)], gates

    shutil.rmtree(ballast_holder[0]) if ballast_holder[0].is_dir() else ballast_holder[0].unlink()
    resumed(t)
    again = ["planner"] if moment == "planning" else []  # as for the lock
    assert sorted(t.bought) == sorted(["a", "b", "c", "planner", *again]), t.bought


def test_a_gate_that_only_says_the_disk_is_full_fails_as_any_gate_and_its_output_is_feedback(
    task: Callable[[str, Callable[[], None]], Task],
    tmpfs: None,  # noqa: F811 (the fixture, imported)
) -> None:
    """Component c's code prints the words of a full disk and fails, on a disk with room: the
    host's reading of the worktrees' file system finds space, so the gate failed as any gate
    does, its output goes to the implementer, and the lie passes nothing (the task ends at
    the undisturbed tree, c fixed by the fix-up the feedback asked for)."""
    t = task("lie", lambda: None)
    on_tmpfs(t.repo / ".supervisor", "size=64m")  # room, whatever the host's
    t.configure()
    done = started(t)

    assert done.returncode == 0, done.stderr
    assert "error:" not in done.stderr and "Traceback" not in done.stderr, done.stderr
    with reading(t.repo) as store:
        gates = [e for e in store.events(1) if e.type == "gate"]
    assert [g.status for g in gates] == ["failed", "passed"], gates
    assert LIE in str(gates[0].payload), gates[0]
    assert t.finished_tree() == UNDISTURBED
    assert sorted(t.bought) == ["a", "b", "c", "fix-up", "planner"], t.bought


def test_docker_out_of_space_for_a_container_is_named_as_a_full_disk_and_resume_completes(
    task: Callable[[str, Callable[[], None]], Task],
    tmpfs: None,  # noqa: F811 (the fixture, imported)
    tmp_path: Path,
) -> None:
    """The Docker engine's data root is full: creating the planner's container fails with the
    engine's "no space left on device" after the path it could not make. That is said as the
    full disk it is, naming the file system and how to free space on it, not as a sandbox
    failure; after freeing space, `resume` completes the task. (The engine's refusal is the one
    stand-in here: the SDK's own error, raised where supervisor/sandbox/docker.py raises it,
    from a data root that is a real full tmpfs.)"""
    root = tmp_path / "docker-root"
    _mount(root, "size=1m")
    layer = root / "overlay2" / "3f2a9c" / "diff"

    def refuses() -> None:
        fill(root / "ballast")
        reply = docker.errors.APIError(
            "500 Server Error: Internal Server Error",
            explanation=f"failed to mkdir {layer}: mkdir {layer}: no space left on device",
        )
        raise SandboxError(
            f"Docker refused to create the container: {reply.explanation}",
            "Check `docker info` and the sandbox settings in .supervisor/config.yaml.",
        ) from reply

    t = task("creating", refuses)
    t.configure()
    failed = started(t)

    assert failed.returncode == 1, failed.stderr
    one_error_line(failed.stderr)
    said = " ".join(failed.stderr.split())
    assert (
        f"error: No space left on the file system mounted at {root} (0 B free), the Docker "
        f"engine's data root: it could not create a container (writing {layer}). fix:"
    ) in said, said
    fix = " ".join(failed.stderr.split("fix:", 1)[1].split())
    assert fix.startswith(f"Free space on {root} (`docker system prune` removes"), fix
    assert "supervisor resume 1" in fix, fix
    shown = status(t.repo, "1")
    assert f"No space left on the file system mounted at {root}" in shown, shown

    (root / "ballast").unlink()
    resumed(t)
    assert sorted(t.bought) == ["a", "b", "c", "planner"], t.bought


def test_a_full_record_folder_stops_for_the_machine_not_as_tampering_and_resume_completes(
    task: Callable[[str, Callable[[], None]], Task],
    tmpfs: None,  # noqa: F811 (the fixture, imported)
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The proxy's record folders (the temporary folder) fill while the planner works: the
    proxy cannot write what the model answered, so the run has no record. That is not taken
    for an answer that never came from the model (tampering): the host reads the record's file
    system as full, the step stops for the machine, and after freeing space `resume` runs the
    planner again (nothing vouches for the answer it printed) and completes the task."""
    folder = tmp_path / "records"
    _mount(folder, "size=1m")
    monkeypatch.setattr(tempfile, "tempdir", str(folder))  # where record folders are made
    t = task("planning", lambda: fill(folder / "ballast"))
    t.records = True
    t.configure()
    failed = started(t)

    assert failed.returncode == 1, failed.stderr
    line = one_error_line(failed.stderr)
    assert line.startswith(f"error: No space left on the file system mounted at {folder} (0 B"), (
        line
    )
    assert "supervisor resume 1" in failed.stderr.split("fix:", 1)[1]
    shown = status(t.repo, "1")
    assert f"No space left on the file system mounted at {folder}" in shown, shown
    with reading(t.repo) as store:
        assert not [e for e in store.events(1) if e.type == "result_tampered"]

    (folder / "ballast").unlink()
    resumed(t)
    assert sorted(t.bought) == ["a", "b", "c", "planner", "planner"], t.bought
