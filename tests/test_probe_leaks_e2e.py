"""A supervisor killed during its preflight probe leaves nothing that outlives the next command.

The probe (is the CLI in the sandbox image?) runs before any task is held, so its container and
run folder carry no task label: only its owner, a supervisor named by pid and start time
(supervisor/core/owners.py). `start-task`, `resume` and `abandon` each remove the probes of dead
owners, never a live one's. Real parts: the command line as its own process, SIGKILLed at the
probe by fault injection (SUPERVISOR_KILL_AT=probe: its container made, not yet started), the
real Docker engine, the scripted model API."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import Any

import pytest
from e2e_support import IMAGE, killed_at, new_repo, planner, require_sandbox

from supervisor.core import owners
from supervisor.lifecycle import abandon
from supervisor.lifecycle.opening import open_project, remove_dead_probes
from supervisor.sandbox import probed
from supervisor.sandbox.docker import LABEL_PROBE, LABEL_REPO, RUN_PREFIX, DockerSandbox, repo_label

pytestmark = pytest.mark.docker
TASK = "Plan the work"


@pytest.fixture(autouse=True)
def real_parts(api_keys: None) -> None:
    require_sandbox()


def probes(repo: Path) -> tuple[list[Any], list[str]]:
    """The repository's probe containers and probe run folders."""
    import docker

    label = repo_label(repo)
    found = docker.from_env().containers.list(
        all=True, filters={"label": [f"{LABEL_REPO}={label}", LABEL_PROBE]}
    )
    folders = Path(tempfile.gettempdir()).glob(f"{RUN_PREFIX}{label}-probe*")
    return found, sorted(p.name for p in folders)


def a_resume_killed_at_its_probe(tmp_path: Path, serve: Any) -> Path:
    """A task started (killed as its first step starts), then a resume killed at its probe."""
    server = serve({**planner(), "repeat": True})
    repo = new_repo(tmp_path, server.url)
    assert killed_at("step_started", repo, "start-task", TASK, "--yes").returncode == -9
    probed.forget_all()  # the start-task's probe found the CLI: the resume would not probe
    assert killed_at("probe", repo, "resume", "1").returncode == -9
    containers, folders = probes(repo)
    assert len(containers) == 1 and len(folders) == 1  # what the killed resume left
    pid, _, start = containers[0].labels[LABEL_PROBE].partition(owners.SEPARATOR)
    assert pid.isdigit() and start.isdigit()  # its owner by pid and start time, not a bare pid
    return repo


def test_an_image_found_to_hold_the_cli_is_not_probed_again_by_the_next_command(
    tmp_path: Path, serve: Any
) -> None:
    """An image ID names its content: one probe's answer holds for every later command."""
    server = serve({**planner(), "repeat": True})
    repo = new_repo(tmp_path, server.url)
    probed.forget_all()
    assert killed_at("step_started", repo, "start-task", TASK, "--yes").returncode == -9

    resumed = killed_at("probe", repo, "resume", "1")

    assert resumed.returncode != -9  # it never reached a probe to die at: it ran the task on
    assert "will run again" in resumed.stderr  # past the preflight, to the interrupted step
    assert probes(repo) == ([], [])


def test_the_next_resume_removes_the_probe_a_resume_killed_during_it_left(
    tmp_path: Path, serve: Any
) -> None:
    repo = a_resume_killed_at_its_probe(tmp_path, serve)

    assert killed_at("step_started", repo, "resume", "1").returncode == -9  # past its clean-up

    assert probes(repo) == ([], [])
    abandon.abandon(1, repo)


def test_abandon_removes_the_probe_a_resume_killed_during_it_left(
    tmp_path: Path, serve: Any
) -> None:
    repo = a_resume_killed_at_its_probe(tmp_path, serve)

    abandon.abandon(1, repo)

    assert probes(repo) == ([], [])


def test_a_live_supervisor_s_probe_stays_and_a_reused_pid_does_not_keep_a_dead_one(
    tmp_path: Path,
) -> None:
    """The owner of the second probe had this process's pid but started at another moment: the
    pid was reused, its owner is dead. A folder whose container was never made counts too."""
    import docker

    project = open_project(new_repo(tmp_path, "http://127.0.0.1:9"))
    label = repo_label(project.root)
    client = docker.from_env()
    start = owners.start_time(os.getpid())
    assert start is not None
    live, reused = owners.this_process(), f"{os.getpid()}.{int(start) - 1}"
    made = {
        owner: client.containers.create(
            IMAGE, ["true"], labels={LABEL_REPO: label, LABEL_PROBE: owner}
        )
        for owner in (live, reused)
    }
    folders = {
        owner: Path(tempfile.mkdtemp(prefix=f"{RUN_PREFIX}{label}-probe{owner}-"))
        for owner in (live, reused, f"{os.getpid()}.{int(start) - 2}")
    }
    try:
        sandbox = DockerSandbox(IMAGE, project.settings.sandbox.egress_network, client)
        assert remove_dead_probes(project, sandbox) == [made[reused].id]
        made[live].reload()  # still there: its supervisor is alive
        assert [p for p in folders.values() if p.exists()] == [folders[live]]
    finally:
        for container in made.values():
            with contextlib.suppress(docker.errors.NotFound):
                container.remove(force=True)
        for folder in folders.values():
            with contextlib.suppress(OSError):
                folder.rmdir()
