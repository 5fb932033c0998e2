"""The Docker engine lost under a running step (issue 50, item 2), the fast half: what the engine's
loss looks like to the Docker SDK and how it is recognised, the bounded wait that says so, and
what the workflow does with a run lost (the step afresh, no retry spent) or an engine that stays
away (one line, the fix, `status` says why, `resume` completes), on a one-step task and at each
moment of the moments' task (tests/moments_support.py: planning, a fan-out, a gate).

Real parts: the Docker SDK against real Unix sockets (one nothing listens on; one a scripted
engine answers `/_ping` on once it "restarts"), the `supervisor` command in-process on real git
and SQLite, the stand-in sandbox (supervisor/sandbox/standin.py) whose scripted worker meets what
DockerSandbox raises. A real engine crashed under the real CLI: tests/test_engine_restart_e2e.py.
"""

from __future__ import annotations

import http.server
import json
import socket
import socketserver
import tempfile
import threading
from pathlib import Path
from typing import TYPE_CHECKING

import docker
import pytest
from cli_support import supervisor
from moments_support import UNDISTURBED, Task
from moments_support import Sandbox as MomentSandbox
from moments_support import resumed as moments_resumed
from moments_support import started as moments_started
from moments_support import status as moments_status

from supervisor.core import host_faults
from supervisor.core.errors import DockerUnavailableError
from supervisor.guard.trust import trust
from supervisor.lifecycle import tasks
from supervisor.lifecycle.demo import make_demo_repo
from supervisor.sandbox import engine_loss
from supervisor.sandbox.standin import StandinSandbox, WorkerCall, answer, record

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

TASK = "Write the answer file"
WORKFLOW = """workflow:
  initial_step: implement
  steps:
    implement: {role: implementer, next: commit, max_retries: 0}
    commit: {action: commit}
"""
CONFIG = "clis:\n  claude:\n    base_url: http://127.0.0.1:9\n"
REPORT = {"status": "SUCCESS", "summary": "wrote answer.txt", "files_created": ["answer.txt"]}


@pytest.fixture
def short_dir() -> Iterator[Path]:
    """A folder for sockets (a Unix socket's path is capped at 108 bytes)."""
    with tempfile.TemporaryDirectory(prefix="sv-", dir="/tmp") as folder:
        yield Path(folder)


def client_at(path: Path) -> docker.DockerClient:
    return docker.DockerClient(base_url=f"unix://{path}", version="1.41", timeout=5)


def lost_error(path: Path) -> Exception:
    """What the Docker SDK raises when the engine at `path` is gone."""
    try:
        client_at(path).ping()
    except Exception as e:
        return e
    raise AssertionError("an engine answered")


# -- recognising the loss ----------------------------------------------------------------------


def test_an_engine_gone_is_recognised_as_a_machine_fault_naming_where_and_the_resume(
    short_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A socket file removed (the engine stopped) and one left by a killed engine (nothing
    listens: connection refused) are the engine lost, said as one DockerUnavailableError."""
    bound = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    bound.bind(str(short_dir / "left.sock"))  # no listen(): refused, as after a SIGKILL
    try:
        for path, reason in (
            (short_dir / "gone.sock", "no such file or directory"),
            (short_dir / "left.sock", "connection refused"),
        ):
            monkeypatch.setenv("DOCKER_HOST", f"unix://{path}")
            error = lost_error(path)
            assert host_faults.is_engine_lost(error)
            assert engine_loss.lost(error)
            fault = host_faults.machine_fault(error, 4)
            assert isinstance(fault, DockerUnavailableError)
            assert fault.exit_code == 3
            assert fault.message == (
                f"The Docker engine at unix://{path} stopped answering ({reason})."
            )
            assert fault.hint.startswith(
                "Start the Docker engine (`docker info` checks it), then run `supervisor resume 4`"
            )
    finally:
        bound.close()


def test_a_read_timeout_or_an_engines_own_error_is_not_the_engine_lost() -> None:
    import requests.exceptions

    assert not host_faults.is_engine_lost(
        requests.exceptions.ConnectionError("UnixHTTPConnectionPool: Read timed out.")
    )
    assert not host_faults.is_engine_lost(requests.exceptions.ReadTimeout("slow"))
    assert not host_faults.is_engine_lost(docker.errors.NotFound("No such container: x"))
    assert not host_faults.is_engine_lost(ConnectionRefusedError(111, "the model API"))
    assert host_faults.machine_fault(docker.errors.APIError("conflict"), 1) is None


# -- the bounded wait --------------------------------------------------------------------------


def test_the_back_off_doubles_to_a_ceiling_and_adds_up_to_the_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert engine_loss.delays(120) == [1, 2, 4, 8, 15, 15, 15, 15, 15, 15, 15]
    assert engine_loss.delays(2) == [1, 1]
    assert engine_loss.delays(0) == []
    monkeypatch.setenv(engine_loss.WAIT_ENV, "7.5")
    assert engine_loss.wait_bound() == 7.5
    monkeypatch.setenv(engine_loss.WAIT_ENV, "soon")
    assert engine_loss.wait_bound() == engine_loss.DEFAULT_WAIT_S


class _Ping(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # the standard library names it
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"OK")

    def log_message(self, *args: object) -> None:
        return None


class _UnixHTTP(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True

    def get_request(self) -> tuple[socket.socket, tuple[str, int]]:
        conn, _ = super().get_request()
        return conn, ("local", 0)  # what BaseHTTPRequestHandler expects of a client address


def engine_back_after(path: Path, said: list[str], tries: int) -> Callable[[str], None]:
    """A `say` that brings a scripted engine up at `path` once `tries` lines were said."""

    def say(line: str) -> None:
        said.append(line)
        if len(said) == tries:
            server = _UnixHTTP(str(path), _Ping)
            threading.Thread(target=server.serve_forever, daemon=True).start()

    return say


@pytest.mark.waits  # the back-off's own second and a half
def test_the_wait_says_each_try_and_ends_when_the_engine_answers_again(
    short_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = short_dir / "docker.sock"
    monkeypatch.setenv("DOCKER_HOST", f"unix://{path}")
    monkeypatch.setenv(engine_loss.WAIT_ENV, "1.5")
    said: list[str] = []
    engine_loss.wait_for_engine(client_at(path), engine_back_after(path, said, 2))
    where = f"unix://{path}"
    assert said == [
        f"Docker engine unreachable at {where}; retrying in 1s (1 of 2)…",
        f"Docker engine unreachable at {where}; retrying in 0.5s (2 of 2)…",
        f"Docker engine at {where} answers again; re-running what it lost.",
    ]


@pytest.mark.waits  # the back-off's own second and a half
def test_runs_that_lose_the_engine_together_wait_for_it_once(
    short_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fan-out's components meet the loss together: one wait is said, all go on after it."""
    path = short_dir / "docker.sock"
    monkeypatch.setenv("DOCKER_HOST", f"unix://{path}")
    monkeypatch.setenv(engine_loss.WAIT_ENV, "1.5")
    said: list[str] = []
    say = engine_back_after(path, said, 2)
    ended: list[str] = []

    def run(name: str) -> None:
        engine_loss.wait_for_engine(client_at(path), say)
        ended.append(name)

    runs = [threading.Thread(target=run, args=(f"component {n}",)) for n in range(3)]
    for thread in runs:
        thread.start()
    for thread in runs:
        thread.join()
    assert sorted(ended) == ["component 0", "component 1", "component 2"]
    assert len(said) == 3 and said[-1].endswith("answers again; re-running what it lost.")


def test_an_engine_away_past_the_bound_is_docker_unavailable_with_the_last_reason(
    short_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = short_dir / "docker.sock"
    monkeypatch.setenv("DOCKER_HOST", f"unix://{path}")
    monkeypatch.setenv(engine_loss.WAIT_ENV, "0.2")
    said: list[str] = []
    with pytest.raises(DockerUnavailableError) as raised:
        engine_loss.wait_for_engine(client_at(path), said.append, lost_error(path))
    assert len(said) == 1
    assert raised.value.message == (
        f"The Docker engine at unix://{path} stopped answering (no such file or directory); "
        "waited 0.2 s for it to come back."
    )


# -- the workflow: a run lost, an engine that stays away ---------------------------------------


def new_project(root: Path) -> Path:
    repo = make_demo_repo(root)
    state = repo / ".supervisor"
    state.mkdir(exist_ok=True)
    (state / "config.yaml").write_text(CONFIG)
    (state / "workflow.yaml").write_text(WORKFLOW)
    trust(repo)
    return repo


def scripted(first: BaseException, calls: list[str]) -> Callable[[WorkerCall], str]:
    """An implementer whose first run half-writes its work and meets `first`, as DockerSandbox
    raises it; its next run does the work."""

    def worker(call: WorkerCall) -> str:
        calls.append(call.role)
        if len(calls) == 1:
            call.write("half.txt", "left by the run the engine took\n")
            raise first
        assert not (call.worktree / "half.txt").exists()  # a fresh worktree
        call.write("answer.txt", "right\n")
        return answer(REPORT)

    return worker


def use(monkeypatch: pytest.MonkeyPatch, worker: Callable[[WorkerCall], str]) -> None:
    monkeypatch.setattr(tasks, "open_sandbox", lambda project, clis, **_: StandinSandbox(worker))


def finished_tree(repo: Path) -> tuple[str, list[str]]:
    from supervisor.core.process import run

    with tasks.reading(repo) as store:
        wf = store.workflow(1)
    assert wf.status == "completed", wf.error
    git = ["git", "-C", str(repo)]
    files = run([*git, "ls-tree", "-r", "--name-only", wf.task_branch]).stdout.split()
    return str(run([*git, "show", f"{wf.task_branch}:answer.txt"]).stdout), files


def test_a_worker_run_lost_with_the_engine_runs_afresh_spending_no_retry(
    tmp_path: Path, api_keys: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The engine came back, the worker's container had died with it: the step is interrupted,
    not failed, and runs again in a new worktree although it has no retry left."""
    repo = new_project(tmp_path / "repo")
    calls: list[str] = []
    lost = engine_loss.RunLost("The container of 'implement' died with the Docker engine.")
    use(monkeypatch, scripted(lost, calls))
    done = supervisor("start-task", TASK, "--yes", "--repo", str(repo))

    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert calls == ["implementer", "implementer"]
    text, files = finished_tree(repo)
    assert text == "right\n" and "half.txt" not in files
    with tasks.reading(repo) as store:
        steps = [(s["name"], s["status"]) for s in store.steps(1)]
        kinds = [e.type for e in store.events(1)]
    assert steps[:2] == [("implement", "interrupted"), ("implement", "succeeded")]
    assert "worker_failed" not in kinds


def test_an_engine_away_past_the_wait_stops_resumable_saying_why_and_resume_completes(
    tmp_path: Path, api_keys: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = new_project(tmp_path / "repo")
    monkeypatch.setenv("DOCKER_HOST", "unix:///run/gone/docker.sock")
    calls: list[str] = []
    away = host_faults.docker_unavailable("connection refused", None, waited_s=120)
    use(monkeypatch, scripted(away, calls))
    stopped = supervisor("start-task", TASK, "--yes", "--repo", str(repo))

    assert stopped.returncode == 3, stopped.stderr
    assert "Traceback" not in stopped.stderr
    errors = [line for line in stopped.stderr.splitlines() if line.startswith("error:")]
    assert errors == [
        "error: The Docker engine at unix:///run/gone/docker.sock stopped answering (connection "
        "refused); waited 120 s for it to come back."
    ], stopped.stderr
    fix = " ".join(stopped.stderr.split("fix:", 1)[1].split())
    assert fix.startswith("Start the Docker engine (`docker info` checks it), then run `supervisor")
    assert "resume 1`" in fix
    status = supervisor("status", "1", "--repo", str(repo)).stdout
    assert "stopped answering" in status, status

    resumed = supervisor("resume", "1", "--repo", str(repo))
    assert resumed.returncode == 0, resumed.stderr
    assert calls == ["implementer", "implementer"]
    text, files = finished_tree(repo)
    assert text == "right\n" and "half.txt" not in files


# -- at each moment of a task (tests/moments_support.py) ---------------------------------------


@pytest.fixture
def moment_task(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, api_keys: None
) -> Callable[[str, Callable[[], None]], Task]:
    """The moments' task (a plan, three components two at a time, a gate, the commit) meeting
    `fault` at `moment`, on the stand-in sandbox, in this process."""

    def made(moment: str, fault: Callable[[], None]) -> Task:
        t = Task(tmp_path, moment, fault)
        sandbox = MomentSandbox(t.worker)
        sandbox.task = t
        monkeypatch.setattr(tasks, "open_sandbox", lambda project, clis, **_: sandbox)
        return t

    return made


def engine_away() -> None:
    """What DockerSandbox raises once the engine stayed away past the wait."""
    raise host_faults.docker_unavailable("connection refused", None, waited_s=120)


def engine_restarted() -> None:
    """What DockerSandbox raises for a worker whose container died with an engine that is back
    (a gate's run it runs again itself: tests/test_engine_restart_e2e.py)."""
    raise engine_loss.RunLost("The container died with the Docker engine.")


@pytest.mark.parametrize("moment", ["planning", "fan-out", "gating"])
def test_an_engine_away_at_each_moment_stops_resumable_and_resume_completes(
    moment: str, moment_task: Callable[[str, Callable[[], None]], Task]
) -> None:
    t = moment_task(moment, engine_away)
    t.configure()
    stopped = moments_started(t)
    assert t.struck
    assert stopped.returncode == 3, stopped.stderr
    assert "Traceback" not in stopped.stderr
    errors = [line for line in stopped.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "stopped answering" in errors[0], stopped.stderr
    assert "supervisor resume 1" in stopped.stderr.split("fix:", 1)[1]
    assert "stopped answering" in moments_status(t.repo, "1")
    moments_resumed(t)
    assert t.finished_tree() == UNDISTURBED


@pytest.mark.parametrize("moment", ["planning", "fan-out"])
def test_a_worker_lost_with_a_restarted_engine_at_each_moment_runs_again_in_the_same_run(
    moment: str, moment_task: Callable[[str, Callable[[], None]], Task]
) -> None:
    t = moment_task(moment, engine_restarted)
    t.configure()
    done = moments_started(t)
    assert t.struck
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert t.finished_tree() == UNDISTURBED
    with tasks.reading(t.repo) as store:
        interrupted = [e.step for e in store.events(1) if e.type == "step_interrupted"]
    assert len(interrupted) == 1, interrupted


def test_a_worker_whose_answer_arrived_before_the_engine_died_is_not_bought_again(
    tmp_path: Path, api_keys: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The model's final answer reached the proxy, then the engine took the container before the
    CLI could print it: the step is settled from the proxy's record (the witness decides a
    step, not stdout), the work stands, and no second conversation is bought."""
    repo = new_project(tmp_path / "repo")
    calls: list[str] = []

    def worker(call: WorkerCall) -> str:
        calls.append(call.role)
        call.write("answer.txt", "right\n")
        record(call, f"Done.\n```json\n{json.dumps(REPORT)}\n```")
        raise engine_loss.RunLost("The container of 'implement' died with the Docker engine.")

    use(monkeypatch, worker)
    monkeypatch.setattr(StandinSandbox, "records_model_exchanges", True, raising=False)
    done = supervisor("start-task", TASK, "--yes", "--repo", str(repo))

    assert done.returncode == 0, done.stderr
    assert calls == ["implementer"]
    assert "read from the proxy's record, not bought again" in done.stderr + done.stdout
    text, _ = finished_tree(repo)
    assert text == "right\n"
    with tasks.reading(repo) as store:
        steps = [(s["name"], s["status"]) for s in store.steps(1)]
    assert steps[0] == ("implement", "succeeded")
