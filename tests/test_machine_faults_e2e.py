"""Faults of the machine on the real parts (issue 50): the real `claude` in the real sandbox
against the scripted API, the `supervisor` command as a process of its own. What the stand-in
specs (tests/test_machine_faults.py) cannot show, because the stand-in has no container to
adopt: a worker whose model already answered, or is still working, when the disk fills or a
SIGTERM comes, is adopted by `resume` and its conversation is bought once; a gate's container
running when a SIGTERM comes is removed instead (never adopted), and `resume` runs the gate again.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from e2e_support import missing, require_sandbox, write_config, write_workflow

from supervisor.guard.trust import trust
from supervisor.lifecycle import tasks
from supervisor.lifecycle.demo import fenced, make_demo_repo
from supervisor.sandbox.docker import LABEL_REPO, repo_label
from supervisor.sandbox.labels import LABEL_STEP
from supervisor.sandbox.run_files import WORKSPACE

if TYPE_CHECKING:
    from collections.abc import Iterator

    from supervisor.fakeapi import ScriptedModelServer

pytestmark = pytest.mark.docker
CLI = "claude"
TASK = "Write the answer file"
WORKFLOW = """workflow:
  initial_step: implement
  steps:
    implement: {role: implementer, next: commit, max_retries: 1}
    commit: {action: commit}
"""
REPORT = {"status": "SUCCESS", "summary": "wrote answer.txt", "files_created": ["answer.txt"]}
WAIT_S = 240.0
"""The longest a spec waits for the moment it strikes at (a bound: it goes on at once)."""


@pytest.fixture(autouse=True)
def real_parts(api_keys: None) -> None:
    require_sandbox()


@pytest.fixture
def state_on_tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A repository whose `.supervisor/` is a small tmpfs; unmounted at the end."""
    repo = make_demo_repo(tmp_path / "repo")
    state = repo / ".supervisor"
    state.mkdir(exist_ok=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64m,mode=0755", "tmpfs", str(state)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        missing(f"cannot mount a tmpfs (root needed): {mounted.stderr.strip()}")
    try:
        yield repo
    finally:
        subprocess.run(["umount", "-l", str(state)], capture_output=True, check=False)


def implementer(*first: dict[str, Any], after: Path | None = None) -> dict[str, Any]:
    """Writes answer.txt, then answers; `first`: turns before it; `after`: the answer waits
    for that file (scripted API `after`)."""
    last: dict[str, Any] = {"text": "Done.\n" + fenced(REPORT)}
    if after is not None:
        last["after"] = str(after)
    write = {"name": "Write", "input": {"file_path": "answer.txt", "content": "right\n"}}
    return {"when": "ROLE: implementer", "turns": [*first, {"tool_use": write}, last]}


def configure(repo: Path, server: ScriptedModelServer) -> None:
    write_config(repo, server.url, CLI)
    with (repo / ".supervisor" / "config.yaml").open("a") as handle:
        handle.write("sandbox:\n  workspace: full\n")
    write_workflow(repo, WORKFLOW)
    trust(repo)


def conversations(server: ScriptedModelServer, turn: int = 0) -> int:
    """The implementer's conversations the model API saw (or, with `turn`, reaching it)."""
    return sum(
        1
        for r in server.requests
        if r.kind == "scripted" and r.turn == turn and "ROLE: implementer" in json.dumps(r.body)
    )


def started(repo: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "supervisor", *args, "--repo", str(repo)],
        env={**os.environ, "COLUMNS": "400"},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def when(reached: Any, proc: subprocess.Popen[str], what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not reached():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            _, err = proc.communicate()
            pytest.fail(f"{what} never came: {err[-3000:]}")
        time.sleep(0.1)


def fill(folder: Path) -> None:
    fd = os.open(folder / "ballast", os.O_WRONLY | os.O_CREAT, 0o600)
    block = b"\0" * 65536
    try:
        while True:
            try:
                os.write(fd, block)
            except OSError:
                if len(block) == 1:
                    return
                block = block[: len(block) // 2]
    finally:
        os.close(fd)


def assert_completed_once(repo: Path, server: ScriptedModelServer) -> None:
    import docker

    with tasks.reading(repo) as store:
        wf = store.workflow(1)
        adopted = [e.step for e in store.events(1) if e.type == "worker_adopted"]
        assert store.integrity_ok()
    assert wf.status == "completed", wf.error
    shown = subprocess.run(
        ["git", "-C", str(repo), "show", f"{wf.task_branch}:answer.txt"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert shown.stdout == "right\n"
    assert adopted == ["implement"]
    assert conversations(server) == 1  # the implementer's answer, bought once
    left = docker.from_env().containers.list(
        all=True, filters={"label": f"{LABEL_REPO}={repo_label(repo)}"}
    )
    assert left == []


def test_a_disk_full_after_the_model_answered_keeps_the_answer_for_resume(
    state_on_tmpfs: Path, tmp_path: Path, serve: Any
) -> None:
    """The disk holding `.supervisor/` fills just before the implementer's last answer is sent:
    the answer arrives, but its step's end cannot be recorded. The command says what is full;
    after freeing space, `resume` adopts the finished worker instead of asking the model again."""
    repo = state_on_tmpfs
    release = tmp_path / "answer"
    server = serve(implementer(after=release))
    configure(repo, server)
    proc = started(repo, "start-task", TASK, "--yes", "--depth", "planned")
    when(lambda: conversations(server, turn=1) == 1, proc, "the implementer's last turn")
    fill(repo / ".supervisor")
    release.touch()
    _, err = proc.communicate(timeout=WAIT_S)

    assert proc.returncode == 1, err
    assert "Traceback" not in err
    said = " ".join(err.split())
    assert f"error: No space left on the file system mounted at {repo / '.supervisor'}" in said
    assert "then run `supervisor resume 1`" in said

    (repo / ".supervisor" / "ballast").unlink()
    resumed = started(repo, "resume", "1")
    _, err = resumed.communicate(timeout=WAIT_S)
    assert resumed.returncode == 0, err
    assert_completed_once(repo, server)


def test_sigterm_while_a_worker_works_leaves_it_running_and_resume_adopts_it(
    tmp_path: Path, serve: Any
) -> None:
    """`docker stop` or systemd stops the supervisor while the implementer works (a shell
    command between two model turns): the process exits 143 at once, the worker goes on, and
    `resume` takes it over: its conversation is bought once."""
    repo = make_demo_repo(tmp_path / "repo")
    release = tmp_path / "stopped"
    work = {"tool_use": {"name": "Bash", "input": {"command": "sleep 2"}}}
    server = serve(implementer(work, after=release))
    configure(repo, server)
    proc = started(repo, "start-task", TASK, "--yes", "--depth", "planned")
    when(lambda: conversations(server, turn=1) == 1, proc, "the implementer's work")
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=WAIT_S)
    release.touch()

    assert proc.returncode == 143, err
    said = " ".join(err.split())
    assert "Stopped (SIGTERM). Workflow 1 keeps the steps it finished" in said, err
    assert "continue it with: supervisor resume 1" in said
    assert "Traceback" not in err

    resumed = started(repo, "resume", "1")
    _, err = resumed.communicate(timeout=WAIT_S)
    assert resumed.returncode == 0, err
    assert_completed_once(repo, server)


GATED = """workflow:
  initial_step: implement
  steps:
    implement: {role: implementer, next: test, max_retries: 1}
    test: {gate: test, next: commit, on_fail: implement}
    commit: {action: commit}
"""
HELD_TESTS = "test:\n\twhile [ ! -e released ]; do sleep 0.1; done\n\tgrep -q right answer.txt\n"
"""The project's tests (the demo's gate is `make test`), held until the spec writes `released`
into the gate's worktree: the gate runs for as long as the spec needs it to."""


def gate_containers(repo: Path) -> list[dict[str, Any]]:
    """The containers of the task's test gate, by the labels the supervisor puts on them (the
    engine's listing as it is: `containers.list` inspects each, racing their removal)."""
    import docker

    labels = [f"{LABEL_REPO}={repo_label(repo)}", f"{LABEL_STEP}=test"]
    found: list[dict[str, Any]] = docker.from_env().api.containers(
        all=True, filters={"label": labels}
    )
    return found


def running_gates(repo: Path) -> list[Path]:
    """The worktrees (their host folders) of the gate's runs whose containers run: the
    candidate's, and the base's (the baseline of its tests: gates/base_oracle.py)."""
    return [
        Path(m["Source"])
        for container in gate_containers(repo)
        if container["State"] == "running"
        for m in container["Mounts"]
        if m["Destination"] == WORKSPACE
    ]


def releasing_gates(repo: Path, proc: subprocess.Popen[str]) -> str:
    """Each gate's run released (`released` written into its worktree) as it comes, until `proc`
    ends; its stderr."""
    deadline = time.monotonic() + WAIT_S
    while proc.poll() is None and time.monotonic() < deadline:
        for worktree in running_gates(repo):
            with contextlib.suppress(FileNotFoundError):  # its run ended meanwhile
                (worktree / "released").touch()
        time.sleep(0.1)
    if proc.poll() is None:
        proc.kill()
    _, err = proc.communicate(timeout=WAIT_S)
    return err


def test_sigterm_while_a_gate_runs_removes_its_container_and_resume_runs_it_again(
    tmp_path: Path, serve: Any
) -> None:
    """The SIGTERM row at gating on the real sandbox: `docker stop` or systemd stops the
    supervisor while the project's tests run in the gate's container. The process exits 143
    with the resume line and ends the gate (its container removed, never adopted: a gate's
    run is cheap and its result must be the candidate's own); `resume` runs the gate again in
    a new container, and the implementer's answer, recorded before, is not bought again."""
    repo = make_demo_repo(tmp_path / "repo")
    (repo / "Makefile").write_text(HELD_TESTS)
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "commit", "-qam", "tests held by the spec"], check=True)
    server = serve(implementer())
    configure(repo, server)
    write_workflow(repo, GATED)
    proc = started(repo, "start-task", TASK, "--yes", "--depth", "planned")
    when(lambda: running_gates(repo) != [], proc, "the gate's run")
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=WAIT_S)

    assert proc.returncode == 143, err
    said = " ".join(err.split())
    assert "Stopped (SIGTERM). Workflow 1 keeps the steps it finished" in said, err
    assert "continue it with: supervisor resume 1" in said
    assert "Traceback" not in err
    assert gate_containers(repo) == []  # ended with the supervisor, not left to adopt

    resumed = started(repo, "resume", "1")
    err = releasing_gates(repo, resumed)
    assert resumed.returncode == 0, err
    with tasks.reading(repo) as store:
        wf = store.workflow(1)
        gates = [(s["name"], s["status"]) for s in store.steps(1) if s["name"] == "test"]
    assert wf.status == "completed", wf.error
    assert gates == [("test", "interrupted"), ("test", "succeeded")], gates  # run again
    assert conversations(server) == 1  # the implementer's answer, bought once
    assert gate_containers(repo) == []
