"""A component fan-out under the Temporal runner, in the workflow's own code (the real dev
server, scripted activities, no Docker): the step hands its components over, the workflow runs
one activity per component at once, and runs the step again with every component's result; a
component no worker could run comes back as that component's failure, not the task's end.
And the plain data a component's result travels as keeps what the step decides on.

Team-mode parity (issue 50, item 5), through the real submission, workflow and activities of
a worker in this process over the stand-in sandbox (tests/temporal_standin.py), one dev server
for the file: a component split into a sub-plan, a monorepo's per-project gates, the budget,
the state database locked while a step runs, and the Docker engine lost under a step's or a
component's activity, each as the local runner's spec of it."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import standin_cli
from cli_support import supervisor
from monorepo_support import WORKFLOW as MONOREPO_WORKFLOW
from monorepo_support import component as monorepo_component
from monorepo_support import gate_steps, gated
from temporal_standin import (
    Sandbox,
    run_on_temporal,
    submit,
    to_temporal,
    use_sandbox,
    work_until_done,
)
from temporal_support import DevServer
from temporalio import activity
from temporalio.client import Client
from temporalio.exceptions import ApplicationError
from temporalio.worker import Replayer, Worker
from test_decompose_engine import GATE, WORKFLOW, component, subplan, too_large
from test_engine_fast import TASK, Project, plans, project, reviews, warm_packer, writes
from test_machine_faults import WORKFLOW as MACHINE_FAULTS_WORKFLOW
from test_machine_faults import _mount as mount_tmpfs
from test_machine_faults import held, tmpfs
from test_monorepo_e2e import CONFIG as MONOREPO_CONFIG
from test_monorepo_e2e import FILES as MONOREPO_FILES
from test_monorepo_e2e import POINT_3D, POINT_3D_BREAKING, TYPES

from supervisor.core import host_faults
from supervisor.core.config import Settings, StepDef
from supervisor.core.dag import WorkGraph
from supervisor.core.errors import DockerUnavailableError, SpecConflictError, StepFailedError
from supervisor.core.schemas import PlanOutput
from supervisor.lifecycle.demo import make_demo_repo
from supervisor.lifecycle.opening import open_project, reading
from supervisor.policy.recovery import Action, Category, Classification
from supervisor.sandbox import engine_loss
from supervisor.state.busy import BUSY_TIMEOUT_ENV
from supervisor.state.records import Workflow
from supervisor.temporal.workflow import (
    RUN_COMPONENT,
    RUN_STEP,
    WORKFLOW_NAME,
    ComponentInput,
    StepResult,
    TaskInput,
    TaskWorkflow,
)
from supervisor.workflow.steps import dispatched
from supervisor.workflow.steps.base import Outcome, StepContext
from supervisor.workflow.steps.components import ComponentFanOut

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from supervisor.sandbox.standin import WorkerCall

pytestmark = pytest.mark.xdist_group("temporal")
__all__ = ["project", "tmpfs", "warm_packer"]
LOCK_WORKFLOW = MACHINE_FAULTS_WORKFLOW.split("initial_step: ", 1)[1]  # as the `project` takes it


@pytest.fixture(scope="module")
def temporal(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    """One dev server for this file's specs (each runs on a task queue of its own)."""
    server = DevServer(tmp_path_factory.mktemp("temporal"))
    yield server
    server.stop()


def test_handed_over_components_run_at_once_and_come_back_to_the_step(temporal: DevServer) -> None:
    asyncio.run(_scenario(temporal.address))


async def _scenario(address: str) -> None:
    steps: list[TaskInput] = []
    started: list[str] = []
    all_started = asyncio.Event()

    @activity.defn(name=RUN_STEP)
    async def step(task: TaskInput) -> StepResult:
        steps.append(task)
        if len(steps) == 1:
            return StepResult("dispatched", components=["a", "b", "c"])
        return StepResult("completed")

    @activity.defn(name=RUN_COMPONENT)
    async def build(task: ComponentInput) -> dict[str, Any]:
        assert task.wf_id == 7
        started.append(task.component)
        if len(started) == 3:
            all_started.set()
        await asyncio.wait_for(all_started.wait(), 20)  # none returns before all have started
        if task.component == "c":
            raise ApplicationError("no Docker engine here", non_retryable=True)
        return {"component": task.component, "entry": {"status": "gated", "sha": "1" * 40}}

    client = await Client.connect(address)
    queue = f"spec-{uuid.uuid4().hex[:8]}"
    async with Worker(
        client,
        task_queue=queue,
        workflows=[TaskWorkflow],
        activities=[step, build],
        max_concurrent_activities=4,
    ):
        handle = await client.start_workflow(
            WORKFLOW_NAME, TaskInput(7, 5.0), id=f"wf-{queue}", task_queue=queue,
            result_type=StepResult,
        )  # fmt: skip
        result = await handle.result()
    assert result.status == "completed"
    assert sorted(started) == ["a", "b", "c"]
    assert steps[0].components is None
    back = {r["component"]: r for r in steps[1].components or []}
    assert back["a"]["entry"]["status"] == back["b"]["entry"]["status"] == "gated"
    failed = dispatched.outcome_from(back["c"]["outcome"])
    assert failed.result == "failed" and isinstance(failed.escalate, StepFailedError)
    assert "Component 'c' could not run on any worker" in failed.escalate.message
    history = await handle.fetch_history()
    await Replayer(workflows=[TaskWorkflow]).replay_workflow(history)  # deterministic


def test_a_components_outcome_survives_the_trip_as_plain_data() -> None:
    waiting = Outcome(
        "failed",
        cli="codex",
        transient=Classification(Category.RESOURCE, Action.WAIT, "429 slow down", 30.0),
    )
    data = dispatched.outcome_to(waiting)
    back = dispatched.outcome_from(data or {})
    assert back.transient == waiting.transient and back.cli == "codex"
    strayed = Outcome("failed", feedback="keep to a.py", context={"out_of_scope": {"b.py": ["b"]}})
    back = dispatched.outcome_from(dispatched.outcome_to(strayed) or {})
    assert back.feedback == "keep to a.py" and back.context == strayed.context
    assert dispatched.outcome_to(Outcome("passed", git_sha="1" * 40)) is None
    conflict = SpecConflictError(
        "contradicts", "decide", step="implement/a", reason="5 vs 6", tests=["test_add"]
    )
    back = dispatched.outcome_from(
        dispatched.outcome_to(Outcome("failed", escalate=conflict)) or {}
    )
    assert isinstance(back.escalate, SpecConflictError)  # a person's decision on any host
    assert back.escalate.record() == conflict.record() and back.escalate.message == "contradicts"
    away = host_faults.docker_unavailable("connection refused", None, waited_s=120)
    back = dispatched.outcome_from(dispatched.outcome_to(Outcome("failed", escalate=away)) or {})
    assert isinstance(back.escalate, DockerUnavailableError)  # the machine's, on any host
    assert (back.escalate.message, back.escalate.fix) == (away.message, away.fix)


def test_components_that_ran_at_once_elsewhere_cannot_both_claim_one_undeclared_file(
    tmp_path: Path,
) -> None:
    """Each host checks its component's files against the claims it saw when it started; two
    components running at once on two hosts both see `shared.py` unclaimed. The step taking
    their results gives it to the first; the second is out of scope, as it would be locally."""

    saved: list[tuple[dict[str, Any], list[Any]]] = []

    def checkpoint(wf_id: int, step: str, context: dict[str, Any], events: list[Any], _: Any):
        saved.append((context, events))

    plan = {
        "status": "COMPLETE",
        "phases": [{"id": "p", "description": "two", "components": [
            {"id": cid, "description": cid, "files": [f"{cid}.py"], "depends_on": []}
            for cid in ("a", "b")
        ]}],
        "estimated_components": 2,
    }  # fmt: skip
    running = {"status": "running", "attempts": 0}
    now = datetime.now(UTC)
    wf = Workflow(
        1, "two", "running", "implement", "claude", "main", "0" * 40, "supervisor/t1", {},
        {"plan": plan, "components": {"a": dict(running), "b": dict(running)}}, None, now, now,
    )  # fmt: skip
    c = StepContext(tmp_path, Settings(), None, None, None, None, checkpoint)  # type: ignore[arg-type]
    fan = ComponentFanOut(c, wf, "implement", StepDef(role="implementer", for_each="component"))
    fan.work = WorkGraph.from_plan(PlanOutput.model_validate(plan))
    gated = {"status": "gated", "sha": "1" * 40, "base": "0" * 40}
    results = [
        {"component": "a", "entry": gated, "claims": ["shared.py"], "outcome": None},
        {"component": "b", "entry": {**gated, "sha": "2" * 40}, "claims": ["shared.py"]},
        {"component": "a", "entry": gated, "claims": [], "outcome": None},  # a repeat: ignored
    ]
    failed = dispatched.take(fan, results)

    assert fan.claims == {"shared.py": "a"}
    assert fan.state["a"]["status"] == "gated"
    assert fan.state["b"]["status"] == "implemented"  # not merged
    [(cid, outcome)] = failed
    assert cid == "b" and outcome.result == "failed"
    assert outcome.context == {"out_of_scope": {"shared.py": ["a"]}}
    assert "shared.py (belongs to component 'a')" in (outcome.feedback or "")
    events = [e for _, evs in saved for e in evs]
    assert [e.type for e in events] == ["component_out_of_scope"]


@pytest.mark.parametrize("runner", ["local", "temporal"])
def test_a_fan_out_at_its_budget_hands_no_component_over_to_the_temporal_workflow(
    tmp_path: Path, runner: str
) -> None:
    """Under the Temporal runner the step hands its ready components over instead of running
    them; past the task's budget it hands over none and holds the step, as the local runner
    does (issue 50, item 5), the same spec on both: the engine then pauses the task with the
    figures."""
    from supervisor.policy import budgets
    from supervisor.state.store import EventSpec, Store

    store = Store(tmp_path / "state.db")
    created = store.create_workflow(
        description="two",
        cli="claude",
        base_branch="main",
        base_sha="0" * 40,
        branch_for_id=lambda i: f"ai/{i}-two",
        definition={},
        first_step="implement",
    )
    store.add_event(created.id, EventSpec("plan", step="plan", input_tokens=150, output_tokens=60))
    plan = {
        "status": "COMPLETE",
        "phases": [{"id": "p", "description": "two", "components": [
            {"id": cid, "description": cid, "files": [f"{cid}.py"], "depends_on": []}
            for cid in ("a", "b")
        ]}],
        "estimated_components": 2,
    }  # fmt: skip
    budget = {"task": {"usd": None, "tokens": 200}, "step": {"usd": None, "tokens": None}}
    context = {"plan": plan, "integrated": "0" * 40, budgets.KEY: budget}
    now = datetime.now(UTC)
    wf = Workflow(
        created.id, "two", "running", "implement", "claude", "main", "0" * 40, "ai/1-two", {},
        context, None, now, now,
    )  # fmt: skip

    def checkpoint(*_: Any) -> None: ...

    relay: list[dict[str, Any]] | None = [] if runner == "temporal" else None
    c = StepContext(tmp_path, Settings(), store, None, None, None, checkpoint, dispatch=relay)  # type: ignore[arg-type]
    fan = ComponentFanOut(c, wf, "implement", StepDef(role="implementer", for_each="component"))

    outcome = fan.run()  # would raise ComponentsDispatched (or start workers) were it not held

    assert outcome.result == budgets.HELD
    [held] = outcome.events
    assert held.type == "components_held" and held.payload["components"] == ["a", "b"]
    assert (held.payload["scope"], held.payload["over"]) == ("task", ["tokens"])
    store.close()


def test_a_component_split_under_the_temporal_runner_runs_its_parts_as_activities_and_merges(
    project: Callable[..., Project], temporal: DevServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Recursive decomposition under the Temporal runner (issue 50, item 5), as locally
    (tests/test_decompose_engine.py, the same script): the component's activity comes back
    TOO_LARGE, the engine splits it, its sub-plan's parts run as activities of their own from
    its branch, merge into it, its QA gate judges them, and it merges upward."""
    p = project(
        WORKFLOW,
        GATE,
        (
            "SUB-PLAN OF COMPONENT 'big'",
            subplan(component("x", "b1.txt"), component("y", "b2.txt")),
        ),
        ("ROLE: planner", plans(component("a", "a.txt"), component("big", "b1.txt", "b2.txt"))),
        ("'a'", writes({"a.txt": "a\n"})),
        ("'big'", too_large("two modules, each a day's work")),
        ("'big.1'", writes({"b1.txt": "one\n"})),
        ("'big.2'", writes({"b2.txt": "two\n"})),
        ("ROLE: reviewer", reviews("APPROVED")),
    )
    queue = to_temporal(p.root, temporal)
    use_sandbox(monkeypatch, Sandbox(p.script))

    wf = run_on_temporal(p.root, temporal, queue, TASK)

    assert wf.status == "completed", wf.error
    assert {p.on_branch(f) for f in ("a.txt", "b1.txt", "b2.txt")} == {"a\n", "one\n", "two\n"}
    ran = {e.payload["component"] for e in p.events("component_ran")}
    assert ran == {"a", "big", "big.1", "big.2"}  # each part an activity of its own
    (expanded,) = p.events("component_expanded")
    assert expanded.payload["children"] == ["big.1", "big.2"]
    assert expanded.payload["trigger"] == "too_large"
    merged = [
        (e.payload["component"], e.payload.get("parent")) for e in p.events("component_merged")
    ]
    assert {m for m in merged[:-1] if m[1]} == {("big.1", "big"), ("big.2", "big")}
    assert merged[-1] == ("big", None)
    assert "implement/big/test" in [e.step for e in p.events("gate")]  # the QA pass


def test_a_monorepo_task_runs_through_the_temporal_dispatch_as_locally(
    project: Callable[..., Project], temporal: DevServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The monorepo's projects under the Temporal runner (issue 50, item 5): the uv workspace
    and script of tests/test_monorepo_e2e.py's first spec, its component an activity of its own.
    A change to the shared types is gated by the apps that build on them, in their own
    directories; the app it breaks is named to the worker's next attempt; the task completes."""
    p = project(
        WORKFLOW,  # replaced by the monorepo specs' below
        None,
        ("gated because: depends on types", writes({TYPES: POINT_3D})),
        ("ROLE: planner", plans(monorepo_component("point-z", "types", [TYPES]))),
        ("one component of the plan: 'point-z'", writes({TYPES: POINT_3D_BREAKING})),
    )
    for path, content in MONOREPO_FILES.items():
        (p.root / path).parent.mkdir(parents=True, exist_ok=True)
        (p.root / path).write_text(content)
    (p.root / ".supervisor" / "workflow.yaml").write_text(MONOREPO_WORKFLOW)
    with (p.root / ".supervisor" / "config.yaml").open("a") as config:
        config.write(MONOREPO_CONFIG)
    p.git("add", "-A")
    p.git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "a uv workspace")
    queue = to_temporal(p.root, temporal)
    use_sandbox(monkeypatch, Sandbox(p.script))

    wf = run_on_temporal(p.root, temporal, queue, "Give Point a z coordinate")

    assert wf.status == "completed", wf.error
    assert p.on_branch(TYPES) == POINT_3D
    assert {e.payload["component"] for e in p.events("component_ran")} == {"point-z"}
    first, second = gated(p.root, wf.id)
    assert first == [
        ("types", f"changed ({TYPES})", True),
        ("app-a", "depends on types", False),
        ("app-b", "depends on types", False),
    ]
    assert second == [(name, why, True) for name, why, _ in first]
    steps = gate_steps(p.root, wf.id)
    assert ("implement/point-z/test@app-b", "failed") in steps
    assert ("implement/point-z/test@app-b", "passed") in steps
    retry = next(prompt for prompt in p.script.prompts("implementer") if "gated because" in prompt)
    assert "Project 'app-b' (apps/b/" in retry
    shown = wf.context["components"]["point-z"]["projects_gated"]  # what `status` shows
    assert set(shown) == {"implement/point-z/test"}


@pytest.mark.parametrize("fault", ["locked", "full"])
def test_a_state_database_that_refuses_a_temporal_steps_end_has_temporal_run_the_step_again(
    fault: str,
    project: Callable[..., Project],
    temporal: DevServer,
    monkeypatch: pytest.MonkeyPatch,
    tmpfs: None,
) -> None:
    """Two rows of docs/fault-matrix.md under the Temporal runner (issue 50, items 3 and 5):
    the state database held locked by another program past the busy timeout, and the file
    system it is on filled by another program, while the implementer works. Locally the
    command stops with one line and `resume` continues (test_machine_faults.py); here the
    step's activity fails with that line (the database heard of neither the step's end nor its
    failure) and Temporal runs the step again: once the fault is gone the task completes, no
    move half-made."""
    monkeypatch.setenv(BUSY_TIMEOUT_ENV, "0.5")
    p = project(
        LOCK_WORKFLOW,
        None,
        {"when": "ROLE: implementer", "do": writes({"answer.txt": "42\n"}), "repeat": True},
        ("ROLE: reviewer", reviews("APPROVED")),
    )
    state = p.root / ".supervisor"
    if fault == "full":
        on_a_small_file_system(state)
    striking: list[contextlib.ExitStack] = []

    def strikes_then_answers(call: WorkerCall) -> str:
        answered = p.script(call)
        if call.role == "implementer" and not striking:  # another program strikes
            stack = contextlib.ExitStack()
            if fault == "locked":
                stack.enter_context(held(state / "state.db"))
            else:
                stack.callback(fill(state / "ballast").unlink)
            striking.append(stack)
        return answered

    failures: list[str] = []

    async def mends_after_a_failed_attempt(handle: Any) -> None:
        while not failures:
            described = await handle.describe()
            for pending in described.raw_description.pending_activities:
                if pending.last_failure.message:
                    failures.append(pending.last_failure.message)
            await asyncio.sleep(0.2)
        for stack in striking:
            stack.close()

    queue = to_temporal(p.root, temporal)
    use_sandbox(monkeypatch, Sandbox(strikes_then_answers))
    try:
        wf = run_on_temporal(p.root, temporal, queue, TASK, mends_after_a_failed_attempt)
    finally:
        for stack in striking:
            stack.close()

    said = {
        "locked": "is locked by another program (pid ",
        "full": f"No space left on the file system mounted at {state} (0 B",
    }
    assert said[fault] in failures[0], failures
    assert "\n" not in failures[0]
    assert wf.status == "completed", wf.error
    assert p.on_branch("answer.txt") == "42\n"
    events = [e.type for e in p.events()]
    assert "workflow_failed" not in events and "step_crashed" not in events
    with reading(p.root) as store:
        moves = [(c["step"], c["next_step"]) for c in store.checkpoints(1)]
    assert moves == [("implement", "review"), ("review", "commit"), ("commit", None)], moves


def on_a_small_file_system(folder: Path) -> None:
    """`folder` (the repository's `.supervisor/`, its files kept) made a 4 MB tmpfs."""
    kept = {f.name: f.read_text() for f in folder.iterdir() if f.is_file()}
    mount_tmpfs(folder, "size=4m")
    for name, text in kept.items():
        (folder / name).write_text(text)


def fill(ballast: Path) -> Path:
    """Another program's file, grown until the file system it is on is full."""
    with contextlib.suppress(OSError), ballast.open("wb", buffering=0) as f:
        while True:
            f.write(b"\0" * (1 << 16))
    return ballast


def test_a_component_planned_too_big_is_split_not_handed_over_to_the_temporal_workflow(
    tmp_path: Path,
) -> None:
    """A component whose planned scope is over the limits is split before any worker starts
    on it, under the Temporal runner as locally (steps/subplan.py `over_scope`): the fan-out
    hands over only the others, and the split waits for the engine in the saved tree."""
    saved: list[dict[str, Any]] = []

    def checkpoint(wf_id: int, step: str, context: dict[str, Any], *_: Any) -> None:
        saved.append(context)

    big = [f"b{i}.py" for i in range(13)]  # over limits.decomposition.max_files (12)
    plan = {
        "status": "COMPLETE",
        "phases": [{"id": "p", "description": "two", "components": [
            {"id": "a", "description": "a", "files": ["a.py"], "depends_on": []},
            {"id": "big", "description": "big", "files": big, "depends_on": []},
        ]}],
        "estimated_components": 2,
    }  # fmt: skip
    repo = make_demo_repo(tmp_path / "repo")  # the other one's pack is measured on its base
    ws = open_project(repo).workspace
    base = ws.branch_tip("main")
    now = datetime.now(UTC)
    wf = Workflow(
        1, "two", "running", "implement", "claude", "main", base, "ai/1-two", {},
        {"plan": plan, "integrated": base}, None, now, now,
    )  # fmt: skip
    c = StepContext(repo, Settings(), None, ws, None, None, checkpoint, dispatch=[])  # type: ignore[arg-type]
    step = StepDef(role="implementer", for_each="component")
    fan = ComponentFanOut(c, wf, "implement", step)

    with pytest.raises(dispatched.ComponentsDispatched) as handed:
        fan.run()

    assert handed.value.ids == ["a"]
    node = saved[-1]["decomposition"]["nodes"]["big"]
    assert (node["status"], node["trigger"]) == ("requested", "scope")
    assert "13 files" in node["reason"]
    assert saved[-1]["components"]["big"]["status"] == "expanding"


def test_sigterm_to_a_temporal_worker_while_its_step_works_gives_the_step_to_another(
    project: Callable[..., Project],
    temporal: DevServer,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """The SIGTERM row under the Temporal runner (issue 50, items 4 and 5): locally the command
    stops with the resume line and exit 143 (test_machine_faults.py); a `supervisor worker`
    (systemd, `docker stop`) stops polling, gives its running step back to Temporal, says so in
    one line and exits 143, and another worker of the queue runs the step and the task."""
    p = project(
        LOCK_WORKFLOW,
        None,
        ("ROLE: implementer", writes({"answer.txt": "42\\n"})),
        ("ROLE: reviewer", reviews("APPROVED")),
    )
    queue = to_temporal(p.root, temporal, heartbeat_s=4)
    wf_id, wid = submit(p.root, TASK)
    mark = tmp_path / "working"
    log = tmp_path / "worker.log"
    with log.open("w") as out:
        first = subprocess.Popen(
            [sys.executable, str(Path(standin_cli.__file__)), "worker", "--repo", str(p.root),
             "--address", temporal.address, "--queue", queue, "--max-parallel", "1"],
            stdout=out, stderr=subprocess.STDOUT,
            env={**os.environ, "STANDIN_IMPLEMENTER": "blocks", "STANDIN_MARK": str(mark)},
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while not mark.exists() and first.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert mark.exists(), log.read_text()  # its implementer works
        first.send_signal(signal.SIGTERM)
        assert first.wait(timeout=60) == 143, log.read_text()
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    said = log.read_text()
    assert "stopped (SIGTERM)" in said and "Traceback" not in said, said

    use_sandbox(monkeypatch, Sandbox(p.script))
    wf = work_until_done(p.root, temporal, queue, wf_id, wid)

    assert wf.status == "completed", wf.error
    assert p.on_branch("answer.txt") == "42\\n"  # this worker's run of the step
    with reading(p.root) as store:
        runs = [(s["name"], s["status"]) for s in store.steps(wf_id)]
    assert runs[0] == ("implement", "interrupted") and runs[1] == ("implement", "succeeded")


ONE_STEP = """implement
  steps:
    implement: {role: implementer, next: commit, max_retries: 0}
    commit: {action: commit}
"""
ONE_COMPONENT = """plan
  steps:
    plan: {role: planner, next: implement}
    implement: {role: implementer, for_each: component, next: commit, max_retries: 0}
    commit: {action: commit}
"""


def loses_its_engine_once(engine: str, script: Callable[[WorkerCall], str]) -> Any:
    """An implementer whose first run half-writes its work and meets the Docker engine's loss as
    DockerSandbox raises it (tests/test_engine_loss.py): `restarted`, its container died with an
    engine that is back; `away`, the engine stayed away past the wait. Its next run, in a fresh
    worktree, does the work as `script` says. The roles it ran, in order, in `.calls`."""
    calls: list[str] = []

    def worker(call: WorkerCall) -> str:
        if call.role == "implementer":
            calls.append(call.role)
            if len(calls) == 1:
                call.write("half.txt", "left by the run the engine took\n")
                if engine == "restarted":
                    raise engine_loss.RunLost("The container died with the Docker engine.")
                raise host_faults.docker_unavailable("connection refused", None, waited_s=120)
            assert not (call.worktree / "half.txt").exists()  # a fresh worktree
        return script(call)

    worker.calls = calls  # type: ignore[attr-defined]
    return worker


@pytest.mark.parametrize("moment", ["step", "component"])
@pytest.mark.parametrize("engine", ["restarted", "away"])
def test_a_docker_engine_lost_under_a_temporal_activity_runs_only_the_lost_run_again(
    engine: str,
    moment: str,
    project: Callable[..., Project],
    temporal: DevServer,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    """The restarted Docker engine's rows of docs/fault-matrix.md under the Temporal runner, as
    locally (tests/test_engine_loss.py), in a step's activity and in a component's: an engine
    back within the wait has the lost run go again in the same activity, in a fresh worktree,
    spending no retry (max_retries 0); one away past the wait fails the task in the state, said
    as the local runner says it (never a workflow ended with the state saying `running`), and
    `resume` hands it back to Temporal, which runs the lost step again and completes."""
    monkeypatch.setenv("DOCKER_HOST", "unix:///run/gone/docker.sock")
    p = project(
        ONE_STEP if moment == "step" else ONE_COMPONENT,
        None,
        ("ROLE: planner", plans(component("a", "answer.txt"))),
        {"when": "ROLE: implementer", "do": writes({"answer.txt": "42\n"}), "repeat": True},
    )
    worker = loses_its_engine_once(engine, p.script)
    queue = to_temporal(p.root, temporal)
    use_sandbox(monkeypatch, Sandbox(worker))
    wf_id, wid = submit(p.root, TASK)

    wf = work_until_done(p.root, temporal, queue, wf_id, wid)

    if engine == "away":
        said = (
            "The Docker engine at unix:///run/gone/docker.sock stopped answering (connection "
            "refused); waited 120 s for it to come back."
        )
        assert (wf.status, wf.error) == ("failed", said)  # as the local runner says it
        shown = supervisor("status", str(wf_id), "--repo", str(p.root))
        assert said in " ".join(shown.stdout.split()), shown.stdout
        assert worker.calls == ["implementer"]
        resumed = supervisor("resume", str(wf_id), "--repo", str(p.root))
        assert resumed.returncode == 0, resumed.stderr
        assert "handed back to Temporal" in resumed.stderr
        wf = work_until_done(p.root, temporal, queue, wf_id, wid)
    assert wf.status == "completed", wf.error
    assert worker.calls == ["implementer", "implementer"]
    assert p.on_branch("answer.txt") == "42\n"
    assert "half.txt" not in p.git("ls-tree", "-r", "--name-only", wf.task_branch).split()
    assert "worker_failed" not in [e.type for e in p.events(wf_id=wf_id)]
    runs = [s["status"] for s in p.steps(wf_id) if s["role"] == "implementer"]
    assert runs == ["interrupted", "succeeded"], runs
    assert "Traceback" not in capfd.readouterr().err
