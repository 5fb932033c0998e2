"""A Docker engine restarted, or gone for good, under a running worker or gate (issue 50, item
2), on a real daemon: a second `dockerd` of this file's own (tests/dockerd_support.py), crashed
with its containers while the real CLI (e2e_support.CLI) in the real sandbox waits on the
scripted API, so that no other spec's engine is disturbed. The supervisor notices at once, waits
for the engine saying so on every try, and re-runs only what the engine lost; or, the engine
still away past its wait, stops with one line and the fix, resumable.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from cli_support import supervisor
from dockerd_support import Engine, own_engine
from e2e_support import CLI, IMAGE, write_config, write_workflow

from supervisor.core.config import Limits
from supervisor.guard.trust import trust
from supervisor.lifecycle import tasks
from supervisor.lifecycle.demo import fenced, make_demo_repo
from supervisor.sandbox.engine_loss import WAIT_ENV

if TYPE_CHECKING:
    from collections.abc import Iterator

    from supervisor.fakeapi import ScriptedModelServer

pytestmark = [pytest.mark.docker, pytest.mark.xdist_group("own_engine")]
WORKFLOW = """workflow:
  initial_step: implement
  steps:
    implement: {role: implementer, next: commit, max_retries: 0}
    commit: {action: commit}
"""
REPORT = {"status": "SUCCESS", "summary": "wrote answer.txt", "files_created": ["answer.txt"]}
WAIT_S = 240.0
"""The longest a spec waits for a moment it strikes at (a bound: it goes on at once)."""
UNREACHABLE = "Docker engine unreachable at unix://"
GATE = (
    "if [ -f runs.txt ]; then echo ran >> runs.txt; echo passed; "
    "else echo ran > runs.txt; sleep 60; fi"
)
"""A gate whose first run lasts until the engine takes it (no race with the crash), the next
one passes at once."""


@pytest.fixture(scope="module")
def engine() -> Iterator[Engine]:
    bridge = Path("/sys/class/net/docker0")
    had_bridge = bridge.exists()
    with own_engine() as started:
        yield started
    # The machine's engine keeps its default network: the spec's daemon, in a network
    # namespace of its own, cannot delete the host's docker0 as it starts without a bridge.
    assert bridge.exists() or not had_bridge


@pytest.fixture(autouse=True)
def engine_up(engine: Engine, api_keys: None) -> None:
    if engine.proc is None:
        engine.start()


def implementer(release: Path) -> dict[str, Any]:
    """Writes answer.txt, then answers once `release` exists."""
    write = {"name": "Write", "input": {"file_path": "answer.txt", "content": "right\n"}}
    last = {"text": "Done.\n" + fenced(REPORT), "after": str(release)}
    return {"when": "ROLE: implementer", "turns": [{"tool_use": write}, last]}


def project(tmp_path: Path, server: ScriptedModelServer) -> Path:
    repo = make_demo_repo(tmp_path / "repo")
    write_config(repo, server.url, CLI)
    with (repo / ".supervisor" / "config.yaml").open("a") as handle:
        handle.write("sandbox:\n  workspace: full\n")
    write_workflow(repo, WORKFLOW)
    trust(repo)
    return repo


def conversations(server: ScriptedModelServer, turn: int = 0) -> int:
    return sum(
        1
        for r in server.requests
        if r.kind == "scripted" and r.turn == turn and "ROLE: implementer" in json.dumps(r.body)
    )


class Run:
    """The `supervisor` command against the spec's engine, its stderr read as it comes."""

    def __init__(self, repo: Path, engine: Engine, wait_s: float, *args: str) -> None:
        env = {**os.environ, "COLUMNS": "400", "DOCKER_HOST": engine.host, WAIT_ENV: str(wait_s)}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "supervisor", *args, "--repo", str(repo)],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.err: list[str] = []
        self.out = ""
        assert self.proc.stderr is not None
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.err.append(line)

    def said(self) -> str:
        return "".join(self.err)

    def until(self, reached: Any, what: str) -> None:
        deadline = time.monotonic() + WAIT_S
        while not reached():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.proc.kill()
                self.end()
                pytest.fail(f"{what} never came: {self.said()[-3000:]}")
            time.sleep(0.05)

    def end(self) -> int:
        """Its exit code, once it ended; stderr stays the reader's alone."""
        assert self.proc.stdout is not None
        self.out = self.proc.stdout.read()
        code = self.proc.wait(timeout=WAIT_S)
        self._reader.join(timeout=5)
        return code


def answer_on_branch(repo: Path) -> str:
    with tasks.reading(repo) as store:
        wf = store.workflow(1)
    assert wf.status == "completed", wf.error
    shown = subprocess.run(
        ["git", "-C", str(repo), "show", f"{wf.task_branch}:answer.txt"],
        capture_output=True,
        text=True,
        check=True,
    )
    return shown.stdout


def test_an_engine_restarted_under_a_worker_is_waited_for_and_only_that_step_runs_again(
    engine: Engine, tmp_path: Path, serve: Any
) -> None:
    """The engine crashes (its containers die with it) while the implementer waits on its
    model: the supervisor says it is waiting for the engine, the engine comes back, and the
    implementer's step runs afresh in the same process; the task ends with the undisturbed
    tree."""
    release = tmp_path / "release"
    server = serve(implementer(release), implementer(release))  # the lost run's, the next
    repo = project(tmp_path, server)
    run = Run(
        repo, engine, 60, "start-task", "Write the answer file", "--yes", "--depth", "planned"
    )
    run.until(lambda: conversations(server, turn=1) == 1, "the implementer's last turn")
    engine.crash()
    run.until(lambda: UNREACHABLE in run.said(), "the waiting line")
    engine.start()
    release.touch()  # the re-run's conversation is answered at once
    code = run.end()

    said = run.said()
    assert code == 0, said
    assert "Traceback" not in said
    assert f"{UNREACHABLE}{engine.socket}; retrying in 1s (1 of " in said
    assert "answers again" in said, said
    assert answer_on_branch(repo) == "right\n"
    with tasks.reading(repo) as store:
        interrupted = [e.step for e in store.events(1) if e.type == "step_interrupted"]
        failed = [e for e in store.events(1) if e.type == "worker_failed"]
    assert interrupted == ["implement"]  # no retry spent: the run was lost, not failed
    assert failed == []
    # The lost run had not been answered; its step's fresh run was, once.
    assert conversations(server) == 2
    assert conversations(server, turn=1) == 2


def test_a_gate_whose_container_died_with_the_engine_runs_again_once_it_is_back(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The gates' path is the same: their container dies with the engine, the wait is said,
    and the gate runs again in a new container (a gate's run is kept by nobody)."""
    import docker

    from supervisor.gates.run import run_gate
    from supervisor.sandbox.docker import DockerSandbox

    monkeypatch.setenv("DOCKER_HOST", engine.host)
    monkeypatch.setenv(WAIT_ENV, "60")
    tree = tmp_path / "tree"
    tree.mkdir()
    runs = tree / "runs.txt"
    sandbox = DockerSandbox(IMAGE, "none", docker.DockerClient(base_url=engine.host))
    said: list[str] = []

    def chaos() -> None:  # the engine crashes once the gate runs, and starts once that is said
        deadline = time.monotonic() + WAIT_S
        while not runs.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        engine.crash()
        while not said and time.monotonic() < deadline:
            time.sleep(0.05)
        engine.start()

    sandbox.say = said.append
    crashing = threading.Thread(target=chaos)
    crashing.start()
    try:
        result = run_gate(
            sandbox, "test", GATE, tree,
            Limits(gate_timeout_seconds=120), {"supervisor.step": "gate"},
        )  # fmt: skip
    finally:
        crashing.join()
        sandbox.close()
    assert result.passed, result.output
    assert result.output.strip() == "passed"
    assert runs.read_text() == "ran\nran\n"  # the lost run, the new one
    assert said[0].startswith(f"{UNREACHABLE}{engine.socket}; retrying in 1s (1 of ")
    assert said[-1].endswith("answers again; re-running what it lost.")


def test_an_engine_still_away_past_the_wait_stops_resumable_and_resume_completes(
    engine: Engine, tmp_path: Path, serve: Any
) -> None:
    """The engine crashes and stays down past the wait: one error line with the fix, exit 3,
    `status` says why; once the engine is started again, `resume` re-runs the lost step."""
    release = tmp_path / "release"
    server = serve(implementer(release), implementer(release))  # the lost run's, the next
    repo = project(tmp_path, server)
    run = Run(repo, engine, 2, "start-task", "Write the answer file", "--yes", "--depth", "planned")
    run.until(lambda: conversations(server, turn=1) == 1, "the implementer's last turn")
    engine.crash()
    code = run.end()

    said = run.said()
    assert code == 3, said
    assert "Traceback" not in said
    assert [line for line in said.splitlines() if line.startswith("error:")] == [
        f"error: The Docker engine at {engine.host} stopped answering (connection refused); "
        "waited 2 s for it to come back."
    ], said
    flat = " ".join(said.split())
    assert "Start the Docker engine (`docker info` checks it), then run `supervisor resume 1`" in (
        flat
    )
    status = supervisor("status", "1", "--repo", str(repo))
    assert "stopped answering" in status.stdout, status.stdout

    engine.start()
    release.touch()
    resumed = Run(repo, engine, 60, "resume", "1")
    assert resumed.end() == 0, resumed.said()
    assert "Traceback" not in resumed.said()
    assert answer_on_branch(repo) == "right\n"
