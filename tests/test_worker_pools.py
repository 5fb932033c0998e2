"""Worker pools by capability (issue 60), on the real parts: the Temporal dev server, the real
submission, workflow and activities (workers in this process over the stand-in sandbox,
tests/temporal_standin.py, each with an identity of its own), and one real `supervisor worker
--capabilities isolated --max-tasks 1` process, as the CI runner's job starts it, against
PostgreSQL as the shared state.

- a role preferring `large_context` runs only on the worker serving it; with that worker
  stopped, its step falls back after the wait, and an event says so;
- a role requiring `isolated` waits, shown as `queued for isolated workers (none polling)`,
  and runs once such a worker starts;
- a repository's role asking for a pool the user did not allow is refused at task start.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import string
import subprocess
import sys
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import standin_cli
from e2e_support import missing
from temporal_standin import Sandbox, repository_queue, submit, use_sandbox
from temporal_support import DevServer
from temporalio.client import Client
from temporalio.runtime import Runtime, TelemetryConfig
from temporalio.worker import Worker
from test_engine_fast import TASK, Project, project, reviews, warm_packer, writes
from test_machine_faults import WORKFLOW
from test_role_packs import publish, registry, risk_release, user

from supervisor.core.config import user_dir
from supervisor.guard.trust import trust
from supervisor.lifecycle.opening import reading
from supervisor.routing import pools
from supervisor.routing.pools import PoolNotAllowedError
from supervisor.state.runner_view import labels
from supervisor.temporal.activities import StepActivities
from supervisor.temporal.submit import submit_task
from supervisor.temporal.workflow import StepResult, TaskWorkflow
from supervisor.views.detail import workflow_detail

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Iterator

pytestmark = pytest.mark.xdist_group("temporal")
__all__ = ["project", "registry", "user", "warm_packer"]
STEPS = WORKFLOW.split("initial_step: ", 1)[1]  # implement -> review -> commit
CI = Path(__file__).parent.parent / "docs" / "ci"
CI_FILES = [CI / "github-worker.yml", CI / "gitlab-worker.yml"]
WAIT_S = 120.0  # the longest a spec waits for a moment it observes (a bound, never a measure)


@pytest.fixture(scope="module")
def temporal(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    server = DevServer(tmp_path_factory.mktemp("temporal"))
    yield server
    server.stop()


def pooled_project(
    project: Callable[..., Project], server: DevServer, role: str, wait_s: float = 1
) -> tuple[Project, str]:
    """The implement/review/commit project, its implementer's role file `role` (YAML fields
    over the built-in implementer), on a queue of its own; trusted as the spec's own."""
    p = project(
        STEPS,
        None,
        {"when": "ROLE: implementer", "do": writes({"answer.txt": "42\n"}), "repeat": True},
        {"when": "ROLE: reviewer", "do": reviews("APPROVED"), "repeat": True},
    )
    roles = p.root / ".supervisor" / "roles"
    roles.mkdir(parents=True, exist_ok=True)
    (roles / "implementer.yaml").write_text(f"extends: implementer\n{role}\n")
    queue = f"spec-{uuid.uuid4().hex[:8]}"
    with (p.root / ".supervisor" / "config.yaml").open("a") as config:
        config.write(
            f"temporal: {{address: '{server.address}', task_queue: {queue}, "
            f"pool_wait_seconds: {wait_s}}}\n"
        )
    trust(p.root)
    return p, repository_queue(p.root, queue)


@contextlib.asynccontextmanager
async def worker(
    address: str, repo: Path, base: str, identity: str, capabilities: tuple[str, ...] = ()
) -> AsyncIterator[None]:
    """A worker as `supervisor worker --capabilities ...` runs it, in this process (a client,
    and so a runtime, of its own: one runtime registers one worker per queue): the repository's
    queue, and one activity worker per pool it serves."""
    client = await Client.connect(address, runtime=Runtime(telemetry=TelemetryConfig()))
    steps = StepActivities(repo, 2, identity=identity)
    every = steps.activities()
    queues = [pools.queue(base, pool) for pool in pools.served(list(capabilities))]
    async with contextlib.AsyncExitStack() as stack:
        await stack.enter_async_context(
            Worker(client, task_queue=base, workflows=[TaskWorkflow], activities=every)
        )
        for polled in queues:
            await stack.enter_async_context(Worker(client, task_queue=polled, activities=every[:2]))
        yield
    steps.pool.shutdown(wait=True)


def ran_on(p: Project, wf_id: int) -> list[tuple[str, str, str]]:
    """(step, pool, worker) of each `step_worker` event, in order."""
    return [
        (e.payload["step"], e.payload["pool"], e.payload["worker"])
        for e in p.events("step_worker", wf_id)
    ]


def status_of(repo: Path, wf_id: int) -> str:
    with reading(repo) as state:
        wf = state.workflow(wf_id)
        return labels(state, [wf], {}).get(wf_id, wf.status)


def test_a_preferred_pool_runs_its_roles_steps_and_falls_back_when_its_worker_stops(
    project: Callable[..., Project], temporal: DevServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    p, base = pooled_project(project, temporal, "preferred_worker: large_context")
    use_sandbox(monkeypatch, Sandbox(p.script))

    async def scenario() -> tuple[int, int]:
        client = await Client.connect(temporal.address)
        async with worker(temporal.address, p.root, base, "small"):
            async with worker(temporal.address, p.root, base, "big", ("large_context",)):
                first, wid = submit(p.root, TASK)
                await asyncio.wait_for(client.get_workflow_handle(wid).result(), WAIT_S)
            # The large_context worker stopped: the next task's implementer waits its 1 s, then
            # goes to any worker.
            second, wid = submit(p.root, TASK)
            handle = client.get_workflow_handle(wid, result_type=StepResult)
            assert (await asyncio.wait_for(handle.result(), WAIT_S)).status == "completed"
        return first, second

    first, second = asyncio.run(scenario())

    ran = ran_on(p, first)
    assert [r for r in ran if r[0] == "implement"] == [("implement", "large_context", "big")]
    assert all(pool == "any" for step, pool, _ in ran if step != "implement"), ran
    assert not p.events("pool_fallback", first)
    (fell,) = p.events("pool_fallback", second)
    assert fell.payload["said"] == (
        "fell back from large_context to any worker after 1 s: no large_context worker took "
        "the step"
    )
    assert [r for r in ran_on(p, second) if r[0] == "implement"] == [("implement", "any", "small")]
    assert p.workflow(second).status == "completed"
    with reading(p.root) as state:  # `status <id>`, the TUI's and the web page's detail
        rows = {row.label: row.value for row in workflow_detail(state, first).rows}
    step, pool, by = ran[-1]
    assert rows["ran on"] == f"pool {pool}, worker {by} (step {step})"


def test_a_required_pool_waits_visibly_and_a_ci_runner_worker_runs_it(
    project: Callable[..., Project],
    temporal: DevServer,
    monkeypatch: pytest.MonkeyPatch,
    shared_state: str,
    tmp_path: Path,
) -> None:
    """The CI runner's command (docs/ci/): `supervisor worker --capabilities isolated
    --max-tasks 1`, a process of its own against the team's Temporal and PostgreSQL; it runs
    the step that waited for it, and exits 0."""
    p, base = pooled_project(project, temporal, "requires: [isolated]")
    use_sandbox(monkeypatch, Sandbox(p.script))
    log = tmp_path / "ci-worker.log"

    async def scenario() -> int:
        client = await Client.connect(temporal.address)
        async with worker(temporal.address, p.root, base, "small"):
            wf_id, wid = submit(p.root, TASK)
            shown = await _until(lambda: status_of(p.root, wf_id), "queued for isolated")
            assert shown == "queued for isolated workers (none polling)", shown
            assert not p.events("step_worker", wf_id)  # any worker polls; none took it
            env = {**os.environ, "TEMPORAL_ADDRESS": temporal.address}
            with log.open("w") as out:  # the CI job's command, in the checkout, on the stand-in
                ci = subprocess.Popen(
                    [sys.executable, str(Path(standin_cli.__file__)), *ci_command(env)[1:]],
                    cwd=p.root, stdout=out, stderr=subprocess.STDOUT, env=env,
                )  # fmt: skip
            try:
                handle = client.get_workflow_handle(wid, result_type=StepResult)
                result = await asyncio.wait_for(handle.result(), WAIT_S)
                assert result.status == "completed", (result, log.read_text())
                code = await asyncio.to_thread(ci.wait, WAIT_S)
            finally:
                if ci.poll() is None:
                    ci.kill()
                    ci.wait()
            assert code == 0, log.read_text()
        return wf_id

    wf_id = asyncio.run(scenario())

    implement = [r for r in ran_on(p, wf_id) if r[0] == "implement"]
    assert [(step, pool) for step, pool, _ in implement] == [("implement", "isolated")]
    assert implement[0][2] != "small"  # the CI runner's process: host-pid
    assert p.on_branch("answer.txt") == "right\n"  # the CI runner's stand-in implementer wrote it
    said = log.read_text()
    assert "exiting (--max-tasks)" in said and "Traceback" not in said, said


def ci_command(env: dict[str, str]) -> list[str]:
    """The `supervisor worker ...` line both CI files run (the same in each), its variables
    expanded from `env`."""
    lines = {
        line.strip().removeprefix("- ")
        for path in CI_FILES
        for line in path.read_text().splitlines()
        if line.strip().removeprefix("- ").startswith("supervisor worker ")
    }
    assert len(lines) == 1, lines
    argv = shlex.split(lines.pop())
    return [string.Template(arg).substitute(env) for arg in argv]


def test_the_ci_runner_files_are_valid_github_and_gitlab_ci() -> None:
    """Each against the schema its CI publishes (check-jsonschema's vendored copies; actionlint's
    PyPI wrapper downloads its binary when it installs, which this machine cannot)."""
    tool = Path(sys.executable).parent / "check-jsonschema"
    if not tool.is_file():
        missing("check-jsonschema is not installed (requirements.txt)")
    for path, schema in zip(CI_FILES, ("github-workflows", "gitlab-ci"), strict=True):
        checked = subprocess.run(
            [str(tool), "--builtin-schema", f"vendor.{schema}", str(path)],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        assert checked.returncode == 0, checked.stdout + checked.stderr
    assert ci_command({"TEMPORAL_ADDRESS": "t:7233"}) == [
        "supervisor", "worker", "--capabilities", "isolated", "--max-tasks", "1",
        "--address", "t:7233",
    ]  # fmt: skip


async def _until(read: Callable[[], str], wanted: str) -> str:
    shown = ""
    for _ in range(int(WAIT_S * 10)):
        shown = await asyncio.to_thread(read)
        if wanted in shown:
            return shown
        await asyncio.sleep(0.1)
    raise AssertionError(f"never showed {wanted!r}: {shown}")


def test_a_repositorys_role_routing_to_a_pool_the_user_did_not_allow_is_refused_at_task_start(
    project: Callable[..., Project], temporal: DevServer
) -> None:
    p, _ = pooled_project(project, temporal, "")
    (p.root / ".supervisor" / "roles" / "implementer.yaml").write_text(
        "extends: implementer\npreferred_worker: cloud_gpu\n"
    )  # after `supervisor trust`: the repository's own choice

    with pytest.raises(PoolNotAllowedError) as refused:
        submit_task(TASK, p.root)

    assert "worker pool cloud_gpu" in refused.value.message
    assert "worker_pools: {allowed: [cloud_gpu]}" in refused.value.hint
    with reading(p.root) as state:
        assert state.workflows() == []  # nothing was created
    (user_dir() / "config.yaml").write_text("worker_pools: {allowed: [cloud_gpu]}\n")
    submitted = submit_task(TASK, p.root)  # the user's own config allows it
    (routed,) = p.events("step_routed", submitted.id)
    assert (routed.payload["pool"], routed.payload["required"]) == ("cloud_gpu", False)


def test_a_roles_pool_fields_are_checked_with_the_fix_named(tmp_path: Path) -> None:
    from supervisor.context.roles import resolve_role
    from supervisor.core.config import Settings
    from supervisor.core.errors import ConfigError

    roles = tmp_path / ".supervisor" / "roles"
    roles.mkdir(parents=True)
    for body, said in [
        ("requires: [isolated]\npreferred_worker: large_context", "sets both `requires`"),
        ("fallback_worker: local", "without `preferred_worker`"),
        ("preferred_worker: Large-Context", "not a pool name"),
    ]:
        (roles / "implementer.yaml").write_text(f"extends: implementer\n{body}\n")
        with pytest.raises(ConfigError) as bad:
            pools.role_route(resolve_role("implementer", tmp_path), Settings(), tmp_path)
        assert said in bad.value.message and "docs/worker-pools.md" in bad.value.hint
    assert pools.served(["large_context", "isolated"]) == [
        "isolated",
        "large_context",
        "isolated+large_context",
    ]


def test_status_says_which_pool_a_queued_step_waits_for_and_what_its_fallback_did() -> None:
    from supervisor.state.runner_view import _queued

    preferred = {"pool": "large_context", "required": False, "fallback": None, "wait_s": 60}
    assert _queued("q", preferred, [], 0) == (
        "queued for large_context workers (none polling; falls back to any worker after 60 s)"
    )
    said = "fell back from large_context to any worker after 60 s: no large_context worker took"
    assert _queued("q", {**preferred, "fell_back": said}, [], 0) == (
        f"queued on q (none polling): {said}"
    )
    required = {"pool": "isolated", "required": True, "fallback": None, "wait_s": 0}
    assert _queued("q", required, [], 0) == "queued for isolated workers (none polling)"
    assert _queued("q", None, [], 0) == "queued (no worker on queue q)"


def test_a_role_packs_pool_counts_only_when_the_users_config_allows_it(
    registry: Path, tmp_path: Path
) -> None:
    from supervisor.context.packs.store import Request, install, user_scope
    from supervisor.context.roles import resolve_role
    from supervisor.core.config import Settings

    release = risk_release("1.0.0")
    release["roles/risk_reviewer.yaml"] += "requires: [isolated]\n"
    publish(registry, "audited", {"1.0.0": release})
    install(user_scope(), Request(str(registry / "audited.git")))
    resolved = resolve_role("risk_reviewer", None)

    with pytest.raises(PoolNotAllowedError) as refused:
        pools.role_route(resolved, Settings(), tmp_path)
    assert "from role pack 'risk-reviewers'" in refused.value.message
    allowed = Settings.model_validate({"worker_pools": {"allowed": ["isolated"]}})
    route = pools.role_route(resolved, allowed, tmp_path)
    assert route == pools.Route("risk_reviewer", "isolated", required=True)
