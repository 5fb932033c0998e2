"""A supervisor SIGKILLed while workers run loses none of their work: `resume` adopts their
containers (still running, or done while it was down) instead of re-running them. Real parts:
the real `claude` in the real sandbox against the scripted API, a real SIGKILL."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from typing import TYPE_CHECKING, Any

import pytest
from e2e_support import IMAGE, killed_at, new_repo, planner, require_sandbox, write_workflow

from supervisor.core.errors import CommandTimeoutError
from supervisor.lifecycle import tasks
from supervisor.lifecycle.demo import fenced
from supervisor.sandbox.docker import LABEL_REPO, LABEL_STEP, DockerSandbox, RunSpec, repo_label

if TYPE_CHECKING:
    from pathlib import Path

    from supervisor.fakeapi import ScriptedModelServer

pytestmark = pytest.mark.docker
CLI = "claude"
"""The default CLI, and the one whose runs are prepared ahead (sandbox/warm.py): the adoption of
a prepared container that its step had taken is what several of these specs kill into."""
TASK = "Build the shapes package"
WORKFLOW = """workflow:
  initial_step: plan
  steps:
    plan: {role: planner, next: implement}
    implement: {role: implementer, for_each: component, gates: [compile], next: commit,
                max_retries: 1}
    commit: {action: commit}
"""
GATES = 'gates:\n  compile: "python3 -m py_compile *.py"\n'


def config(workspace: str) -> str:
    return f"{GATES}sandbox:\n  workspace: {workspace}\n"


FILES = {
    "square": ("square.py", "def area(side):\n    return side * side\n"),
    "circle": ("circle.py", "def area(r):\n    return 3.14159 * r * r\n"),
}
WORK_SECONDS = 12
"""How long each worker works (a shell command between two model turns): the kill lands inside."""


@pytest.fixture(autouse=True)
def real_parts(api_keys: None) -> None:
    require_sandbox()


def marker(cid: str) -> str:
    return f"one component of the plan: '{cid}'"


def script(thinking: bool = False, plant: str = "") -> list[dict[str, Any]]:
    """Each worker works for WORK_SECONDS: in a shell command between two model turns, or
    (`thinking`) waiting on the model's answer, the request open through the proxy. `plant`:
    a shell command the square's worker runs first (files no other component claims)."""
    components = [
        {"id": cid, "description": f"the {cid} module", "files": [path], "depends_on": []}
        for cid, (path, _) in FILES.items()
    ]
    plan = {
        "status": "COMPLETE",
        "phases": [{"id": "p1", "description": "shapes", "components": components}],
        "estimated_components": len(components),
    }
    workers = []
    for cid, (path, content) in FILES.items():
        report = {"status": "SUCCESS", "summary": cid, "files_created": [path]}
        first = plant if cid == "square" else ""
        work = "true" if thinking else f"{first}sleep {WORK_SECONDS}"
        write = {"name": "Write", "input": {"file_path": path, "content": content}}
        turns = [
            {"tool_use": {"name": "Bash", "input": {"command": work}}},
            {"delay": WORK_SECONDS if thinking else 0, "tool_use": write},
            {"text": "Done.\n" + fenced(report)},
        ]
        workers.append({"when": marker(cid), "turns": turns, "repeat": True})
    return [planner(fenced(plan)), *workers]


def invocations(server: ScriptedModelServer, cid: str, turn: int = 0) -> int:
    """Worker runs of a component as the model API saw them: conversations opened (or, with
    `turn`, that reached that turn)."""
    return sum(
        1
        for r in server.requests
        if r.kind == "scripted" and r.turn == turn and marker(cid) in json.dumps(r.body)
    )


def worker_containers(repo: Path) -> dict[str, Any]:
    """The task's running containers by step: a prepared one (sandbox/warm.py, started before
    its step was known) by the step whose row names it; one no step took yet is left out."""
    import docker

    from supervisor.sandbox.warm import LABEL_PREPARED

    client = docker.from_env()
    found = client.containers.list(filters={"label": f"{LABEL_REPO}={repo_label(repo)}"})
    rows: dict[str, str] = {}
    if any(LABEL_PREPARED in c.labels for c in found):
        with tasks.reading(repo) as store:
            rows = {s["container_id"]: s["name"] for s in store.steps(1) if s["container_id"]}
    named = {
        (rows.get(c.id, "") if LABEL_PREPARED in c.labels else c.labels.get(LABEL_STEP, "")): c
        for c in found
    }
    named.pop("", None)
    return named


def start_and_kill_while_both_work(
    repo: Path, server: ScriptedModelServer, thinking: bool = False
) -> None:
    """`start-task` in a child process, SIGKILLed once both workers are inside their work."""
    child = subprocess.Popen(
        [sys.executable, "-m", "supervisor", "start-task", TASK, "--yes", "--repo", str(repo)],
        env=os.environ.copy(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 240
    while not all(invocations(server, cid, 1 if thinking else 0) for cid in FILES):
        if child.poll() is not None or time.monotonic() > deadline:
            child.kill()
            _, err = child.communicate()
            pytest.fail(f"the workers never started: {err.decode()[-2000:]}")
        time.sleep(0.2)
    time.sleep(1)
    assert set(worker_containers(repo)) >= {f"implement/{cid}" for cid in FILES}
    child.send_signal(signal.SIGKILL)
    child.communicate()
    assert child.returncode == -signal.SIGKILL


def assert_done_and_clean(repo: Path, wf: Any) -> None:
    assert wf.status == "completed"
    for path, content in FILES.values():
        shown = subprocess.run(
            ["git", "-C", str(repo), "show", f"{wf.task_branch}:{path}"],
            capture_output=True,
            text=True,
            check=True,
        )
        assert shown.stdout == content
    with tasks.reading(repo) as store:
        assert store.integrity_ok()
        assert not [s for s in store.steps(wf.id) if s["status"] == "running"]
    assert worker_containers(repo) == {}
    import docker

    left = docker.from_env().containers.list(
        all=True, filters={"label": f"{LABEL_REPO}={repo_label(repo)}"}
    )
    assert left == []
    worktrees = repo / ".supervisor" / "worktrees"
    assert not worktrees.exists() or list(worktrees.iterdir()) == []
    assert not (repo / ".supervisor" / "bases").exists()  # a copy-on-write view's base too
    volumes = docker.from_env().volumes.list(filters={"label": f"{LABEL_REPO}={repo_label(repo)}"})
    assert volumes == []


def test_workers_running_when_the_supervisor_is_killed_are_adopted_not_rerun(
    tmp_path: Path, serve: Any
) -> None:
    """With fully written worktrees: the copy-on-write views (the default) are adopted in the
    specs of the planted links and of the answer in flight, which kill at the same moment."""
    server = serve(*script())
    repo = new_repo(tmp_path, server.url, config("full"), cli=CLI)
    write_workflow(repo, WORKFLOW)
    start_and_kill_while_both_work(repo, server)

    wf = tasks.workflows(repo)[0]
    done = tasks.resume(wf.id, repo)

    assert_done_and_clean(repo, done)
    assert {cid: invocations(server, cid) for cid in FILES} == {"square": 1, "circle": 1}
    with tasks.reading(repo) as store:
        steps = store.steps(done.id)
        adopted = [e.step for e in store.events(done.id) if e.type == "worker_adopted"]
    assert sorted(adopted) == ["implement/circle", "implement/square"]
    for cid in FILES:
        runs = [s["status"] for s in steps if s["name"] == f"implement/{cid}"]
        assert runs == ["succeeded"]  # one step, one container: the one started before the kill


def test_a_run_that_ended_but_whose_step_was_not_yet_recorded_is_adopted_not_bought_again(
    tmp_path: Path, serve: Any
) -> None:
    """Killed after a worker's container ended and was read, before its step's end was recorded
    (`worker_ran`): its container, worktree and model record are still there, so `resume` adopts
    them. First the planner (after the depth analyzer's run: its end goes with the engine's move
    to the next step), then, in the `resume`, the first component read after the adopted plan
    (its end goes with the fan-out's progress)."""
    server = serve(*script())
    repo = new_repo(tmp_path, server.url, GATES, cli=CLI)
    write_workflow(repo, WORKFLOW)
    for kill_at, command in (("worker_ran#2", ("start-task", TASK, "--yes")),
                             ("worker_ran#2", ("resume", "1"))):  # fmt: skip
        killed = killed_at(kill_at, repo, *command)
        assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]

    done = tasks.resume(1, repo)

    assert_done_and_clean(repo, done)
    planned = [r for r in server.requests if r.turn == 0 and "ROLE: planner" in json.dumps(r.body)]
    assert len(planned) == 1  # the plan, bought once
    assert {cid: invocations(server, cid) for cid in FILES} == {"square": 1, "circle": 1}
    with tasks.reading(repo) as store:
        steps = store.steps(done.id)
        adopted = [e.step for e in store.events(done.id) if e.type == "worker_adopted"]
    assert "plan" in adopted
    assert {"implement/square", "implement/circle"} & set(adopted)
    for name in ("plan", "implement/square", "implement/circle"):
        assert [s["status"] for s in steps if s["name"] == name] == ["succeeded"], name


def test_a_worker_whose_container_died_with_the_supervisor_is_run_again_and_only_it(
    tmp_path: Path, serve: Any
) -> None:
    """With copy-on-write views (the default): a written worktree's adoption is the spec above."""
    server = serve(*script())
    repo = new_repo(tmp_path, server.url, config("overlay"), cli=CLI)
    write_workflow(repo, WORKFLOW)
    start_and_kill_while_both_work(repo, server)
    worker_containers(repo)["implement/circle"].kill()

    wf = tasks.workflows(repo)[0]
    done = tasks.resume(wf.id, repo)

    assert_done_and_clean(repo, done)
    assert {cid: invocations(server, cid) for cid in FILES} == {"square": 1, "circle": 2}
    with tasks.reading(repo) as store:
        steps = store.steps(done.id)
    assert [s["status"] for s in steps if s["name"] == "implement/square"] == ["succeeded"]
    # the dead container's step counts as interrupted by the crash: no retry spent on it
    assert [s["status"] for s in steps if s["name"] == "implement/circle"] == [
        "interrupted",
        "succeeded",
    ]


def test_a_worker_planting_the_host_s_own_names_as_links_in_its_view_is_adopted_links_kept(
    tmp_path: Path, serve: Any
) -> None:
    # The names the host gives a view's own folders (upper, work, dot-git), planted as links
    # in the view before the kill, and a name the mount options could not carry: the host
    # rebuilds the view from the container's labels, never from what the worker wrote, and
    # records the links as links.
    plant = "ln -s square.py upper; ln -s circle.py dot-git; mkdir work; printf y > 'a,b:c'; "
    server = serve(*script(plant=plant))
    repo = new_repo(tmp_path, server.url, config("overlay"), cli=CLI)
    write_workflow(repo, WORKFLOW)
    start_and_kill_while_both_work(repo, server)

    wf = tasks.workflows(repo)[0]
    done = tasks.resume(wf.id, repo)

    assert_done_and_clean(repo, done)
    assert {cid: invocations(server, cid) for cid in FILES} == {"square": 1, "circle": 1}
    tree = subprocess.run(
        ["git", "-C", str(repo), "ls-tree", done.task_branch, "upper", "dot-git", "a,b:c"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    modes = {line.split("\t")[1]: line.split()[0] for line in tree}
    assert modes == {"upper": "120000", "dot-git": "120000", "a,b:c": "100644"}


def left_running(sandbox: DockerSandbox, command: str) -> str:
    """A container as a killed supervisor leaves it: started, nobody watching."""
    container = sandbox.client.containers.run(IMAGE, ["sh", "-c", command], detach=True)
    return str(container.id)


def test_an_adopted_container_is_read_when_done_and_ended_at_its_time_limit_from_its_start(
    tmp_path: Path,
) -> None:
    import docker.errors

    sandbox = DockerSandbox(IMAGE, "supervisor-egress")
    finished = left_running(sandbox, "echo the answer; sleep 1")
    result = sandbox.adopt(finished, RunSpec(argv=[], worktree=tmp_path, timeout=60))
    assert (result.exit_code, result.stdout) == (0, "the answer\n")

    hung = left_running(sandbox, "sleep 120")
    # The time it ran before the supervisor came back counts: already past its limit, it is
    # ended at once, where a limit counted from the adoption would give it 10 s more (a margin
    # no load eats, unlike the 2 s this spec once had).
    time.sleep(10)
    began = time.monotonic()
    with pytest.raises(CommandTimeoutError, match="time limit of 10 s"):
        sandbox.adopt(hung, RunSpec(argv=[], worktree=tmp_path, timeout=10))
    assert time.monotonic() - began < 9
    for container_id in (finished, hung):
        with pytest.raises(docker.errors.NotFound):
            sandbox.client.containers.get(container_id)
    gone = sandbox.adopt(finished, RunSpec(argv=[], worktree=tmp_path))
    assert gone.exit_code != 0  # a container removed meanwhile is that step's failure


def test_a_worker_whose_model_answer_is_in_flight_at_the_kill_is_adopted_and_paid_once(
    tmp_path: Path, serve: Any
) -> None:
    """The model API proxy lives in its own daemon (sandbox/proxyd.py): the supervisor's
    SIGKILL leaves the open request relaying, the CLI gets its answer and finishes, and `resume`
    adopts the container. The scripted API sees each conversation once, each turn once."""
    from supervisor.sandbox.proxy_client import ProxyClient

    server = serve(*script(thinking=True))
    repo = new_repo(tmp_path, server.url, GATES, cli=CLI)
    write_workflow(repo, WORKFLOW)
    start_and_kill_while_both_work(repo, server, thinking=True)

    wf = tasks.workflows(repo)[0]
    done = tasks.resume(wf.id, repo)

    assert_done_and_clean(repo, done)
    for cid in FILES:
        assert invocations(server, cid) == 1  # one conversation
        assert invocations(server, cid, turn=1) == 1  # the answer in flight, bought once
    with tasks.reading(repo) as store:
        steps = store.steps(done.id)
        adopted = [e.step for e in store.events(done.id) if e.type == "worker_adopted"]
    assert sorted(adopted) == ["implement/circle", "implement/square"]
    for cid in FILES:
        runs = [s["status"] for s in steps if s["name"] == f"implement/{cid}"]
        assert runs == ["succeeded"]
    daemon = ProxyClient.connect()
    try:
        assert daemon.status()["routes"] == {}  # the adopted runs' routes closed with them
    finally:
        daemon.close()
