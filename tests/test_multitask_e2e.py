"""Several tasks at once in one repository, on real parts: three `supervisor start-task`
processes side by side (real CLI, real Docker, the claude CLI against the scripted API), one of
them SIGKILLed mid-step; the other two finish, the killed one resumes and finishes too."""

from __future__ import annotations

import json
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
    released_on_adoption,
    require_sandbox,
    write_workflow,
)

from supervisor.lifecycle import tasks
from supervisor.sandbox.docker import LABEL_REPO, repo_label
from supervisor.workspace.worktrees import Workspace

if TYPE_CHECKING:
    from pathlib import Path

    from supervisor.fakeapi import ScriptedModelServer

pytestmark = pytest.mark.docker
NAMES = ("alpha", "beta", "gamma")  # gamma is the one killed
WORKFLOW = (
    "workflow:\n  initial_step: implement\n  steps:\n"
    "    implement: {role: implementer, next: test}\n"
    "    test: {gate: test, next: commit, on_fail: implement}\n"
    "    commit: {action: commit}\n"
)


@pytest.fixture(autouse=True)
def real_parts(api_keys: None) -> None:
    require_sandbox()


def description(name: str) -> str:
    return f"{name}: implement add and multiply"


def asked(server: ScriptedModelServer, name: str) -> bool:
    """Whether task `name`'s implementer has sent its first request to the model API."""
    return any(description(name) in json.dumps(r.body) for r in server.requests)


def supervisor(repo: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "supervisor", *args, "--repo", str(repo)],
        env={**os.environ, "PYTHONUNBUFFERED": "1", "COLUMNS": "200"},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def finished(proc: subprocess.Popen[str], timeout: float = 400) -> str:
    output, _ = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, output
    return output


def on_branch(repo: Path, branch: str, path: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), "show", f"{branch}:{path}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def test_three_tasks_at_once_one_killed_the_others_finish_and_it_resumes(
    tmp_path: Path, serve: Any
) -> None:
    # Every answer waits for a file: the three are mid-step together at the kill whatever the
    # load, and the killed one's answer is still in flight when its resume adopts it.
    others, release = tmp_path / "others", tmp_path / "release"
    server = serve(
        implementer(GOOD_CALC, when=description("alpha"), after=others),
        implementer(GOOD_CALC, when=description("beta"), after=others),
        implementer(GOOD_CALC, when=description("gamma"), after=release),  # killed while it waits
        implementer(GOOD_CALC, when=description("gamma")),  # the resumed attempt
    )
    repo = new_repo(tmp_path, server.url)
    write_workflow(repo, WORKFLOW)
    before = Workspace(repo).user_checkout_fingerprint()
    started = time.monotonic()
    procs = {n: supervisor(repo, "start-task", description(n), "--yes") for n in NAMES}
    try:
        deadline = time.monotonic() + 300
        while not all(asked(server, n) for n in NAMES):
            for name, proc in procs.items():
                assert proc.poll() is None, f"{name} ended early: {proc.communicate()[0]}"
            assert time.monotonic() < deadline, "the three implementers never all started"
            time.sleep(0.2)
        # All three are mid-step: the kill of one happens while the other two run.
        assert procs["alpha"].poll() is None and procs["beta"].poll() is None
        procs["gamma"].send_signal(signal.SIGKILL)
        procs["gamma"].wait()
        others.touch()
        for name in ("alpha", "beta"):
            finished(procs[name])
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    side_by_side = time.monotonic() - started

    found = {wf.description.split(":")[0]: wf for wf in tasks.workflows(repo)}
    assert sorted(found) == sorted(NAMES)
    assert found["gamma"].status == "running" and found["gamma"].current_step == "implement"
    listed = json.loads(finished(supervisor(repo, "status", "--json")))
    assert {w["id"]: w["supervisor_pid"] for w in listed}[found["gamma"].id] is None

    resumed = time.monotonic()
    with released_on_adoption(repo, release, found["gamma"].id):
        finished(supervisor(repo, "resume", str(found["gamma"].id)))
    resumed = time.monotonic() - resumed

    with tasks.reading(repo) as store:
        assert store.integrity_ok()
        for name in NAMES:
            wf = store.workflow(found[name].id)
            assert wf.status == "completed", (name, wf.status, wf.error)
            assert on_branch(repo, wf.task_branch, "calc.py") == GOOD_CALC
            gates = [e for e in store.events(wf.id) if e.type == "gate"]
            assert gates and gates[-1].status == "passed", (name, [e.status for e in gates])
        gamma_steps = [(s["name"], s["status"]) for s in store.steps(found["gamma"].id)]
        # Its implementer was running at the kill: the proxy daemon kept its model request alive,
        # so the resume adopted it and the step ran once.
        assert [n for n, _ in gamma_steps].count("implement") == 1
        assert ("implement", "succeeded") in gamma_steps
    assert Workspace(repo).user_checkout_fingerprint() == before
    assert _leftovers(repo) == ([], [])
    print(f"\nthree tasks at once: {side_by_side:.1f} s; the killed one's resume: {resumed:.1f} s")


def _leftovers(repo: Path) -> tuple[list[str], list[str]]:
    import docker

    client = docker.from_env()
    containers = client.containers.list(
        all=True, filters={"label": f"{LABEL_REPO}={repo_label(repo)}"}
    )
    worktrees = repo / ".supervisor" / "worktrees"
    return [c.id for c in containers], sorted(p.name for p in worktrees.iterdir())
