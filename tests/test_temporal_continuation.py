"""Under the Temporal runner a task goes on from what it recorded, and every conversation's spend
is recorded whichever worker had it (issue 58, item 5), as the embedded runner does.

- A budget reached while a fan-out's components run as activities: their results come back to
  their step, which applies them before it asks the budget (steps/dispatched.py), so the task
  pauses after them; `approve --extend` and `resume` (a new run of its workflow) continue from
  the recorded components, running none of them again (tests/test_budget_fanout.py is the
  embedded runner's spec).
- A component reported TOO_LARGE asks for a sub-plan, is not tried again as it was, and every
  conversation of the task, the component activities' and a retried one's included, is in the
  task's usage.

The real dev server (one per file), the real submission, workflow and activities of a worker in
this process over the stand-in sandbox (tests/temporal_standin.py; each run reports 120 tokens
and $0.001), real git and SQLite.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

import pytest
import test_engine_fast
from temporal_standin import Sandbox, repository_queue, run_on_temporal, submit, to_temporal
from temporal_standin import use_sandbox as use_sandbox
from temporal_support import DevServer
from test_decompose_engine import GATE, WORKFLOW, subplan, too_large
from test_decompose_engine import component as component_of
from test_engine_fast import TASK, Project, component, plans, reviews, writes

from supervisor.core.errors import WorkflowBusyError
from supervisor.lifecycle.opening import open_project, reading
from supervisor.lifecycle.task_state import decide
from supervisor.temporal.client import hand_back

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path

pytestmark = pytest.mark.xdist_group("temporal")
project = test_engine_fast.project  # the stand-in project fixture
warm_packer = test_engine_fast.warm_packer

FAN_OUT = """plan
  steps:
    plan: {role: planner, next: implement}
    implement: {role: implementer, for_each: component, next: commit}
    commit: {action: commit}
"""
# The planner's run (120 tokens) leaves the budget open; the two components' reach it.
BUDGET = "budgets:\n  task: {tokens: 200}\nlimits:\n  max_parallel_components: 2\n"
TOKENS, USD = 120, 0.001  # what each stand-in conversation reports


@pytest.fixture(scope="module")
def temporal(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    server = DevServer(tmp_path_factory.mktemp("temporal"))
    yield server
    server.stop()


def ran(p: Project, cid: str) -> int:
    """The implementer conversations of component `cid`."""
    return sum(f"'{cid}'" in c.prompt and "SUB-PLAN" not in c.prompt for _, c in p.script.calls)


def spent(repo: Path, wf_id: int) -> tuple[int, float]:
    with reading(repo) as store:
        totals = store.usage_totals(wf_id)
    return int(totals["input_tokens"]) + int(totals["output_tokens"]), float(totals["cost_usd"])


def status(repo: Path, wf_id: int) -> str:
    with reading(repo) as store:
        return store.workflow(wf_id).status


def resume(repo: Path, wf_id: int) -> None:
    """`supervisor resume` of a task Temporal owns (a new run of its workflow), once the step
    that paused it has let the task go (its lease, released as its activity ends)."""
    while True:
        try:
            hand_back(open_project(repo), wf_id)
            return
        except WorkflowBusyError:
            time.sleep(0.1)


async def pause_extend_resume(repo: Path, address: str, queue: str, wf_id: int, wid: str) -> None:
    """A worker of the queue in this process; at the budget's pause, `approve --extend` and
    `resume` as a person would; until the task's new workflow run ends."""
    from temporalio.client import Client
    from temporalio.worker import Worker

    from supervisor.temporal.activities import StepActivities
    from supervisor.temporal.workflow import StepResult, TaskWorkflow

    client = await Client.connect(address)
    steps = StepActivities(repo, 4)
    async with Worker(
        client,
        task_queue=repository_queue(repo, queue),
        workflows=[TaskWorkflow],
        activities=[steps.run_step, steps.run_component, steps.record_failure],
        max_concurrent_activities=4,
    ):
        deadline = time.monotonic() + 240
        while await asyncio.to_thread(status, repo, wf_id) != "budget_exceeded":
            assert time.monotonic() < deadline, "the task never paused at its budget"
            await asyncio.sleep(0.1)
        await asyncio.to_thread(decide, wf_id, repo, approve=True, extend_tokens=1000)
        await asyncio.to_thread(resume, repo, wf_id)
        handle = client.get_workflow_handle(wid, result_type=StepResult)
        await asyncio.wait_for(handle.result(), 240)
    steps.pool.shutdown(wait=True)


def test_a_task_paused_at_its_budget_under_temporal_resumes_from_its_recorded_components(
    project: Callable[..., Project], temporal: DevServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    p = project(FAN_OUT, None)
    p.script.add("ROLE: planner", plans(component("a", "a.txt"), component("b", "b.txt")))
    p.script.add("'a'", writes({"a.txt": "a\n"}), repeat=True)  # a second run would be counted
    p.script.add("'b'", writes({"b.txt": "b\n"}), repeat=True)
    with (p.root / ".supervisor" / "config.yaml").open("a") as config:
        config.write(BUDGET)
    queue = to_temporal(p.root, temporal)
    use_sandbox(monkeypatch, Sandbox(p.script))
    wf_id, wid = submit(p.root, TASK)

    asyncio.run(pause_extend_resume(p.root, temporal.address, queue, wf_id, wid))

    wf = p.workflow(wf_id)
    assert wf.status == "completed", wf.error
    assert (ran(p, "a"), ran(p, "b")) == (1, 1)  # none of the recorded components again
    assert p.on_branch("a.txt") == "a\n" and p.on_branch("b.txt") == "b\n"
    paused = p.events("budget_exceeded", wf_id)
    assert [e.step for e in paused] == ["commit"]  # after the components it had paid for
    assert paused[0].payload["spent"]["tokens"] == 3 * TOKENS
    assert spent(p.root, wf_id) == (3 * TOKENS, pytest.approx(3 * USD))


def test_a_component_too_large_under_temporal_is_split_and_every_conversation_is_paid_for(
    project: Callable[..., Project], temporal: DevServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    p = project(
        WORKFLOW,
        GATE,
        (
            "SUB-PLAN OF COMPONENT 'big'",
            subplan(component_of("x", "b1.txt"), component_of("y", "b2.txt")),
        ),
        (
            "ROLE: planner",
            plans(component_of("a", "a.txt"), component_of("big", "b1.txt", "b2.txt")),
        ),
        ("'a'", writes({"a.txt": "x\n"})),  # fails its gate: a retried conversation
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
    assert (ran(p, "a"), ran(p, "big")) == (2, 1)  # a retried; big asked for a sub-plan at once
    (expanded,) = p.events("component_expanded", wf.id)
    assert expanded.payload["trigger"] == "too_large"
    conversations = len(p.script.calls)  # planner, a twice, big, its sub-planner, 2 parts, reviewer
    assert conversations == 8
    assert spent(p.root, wf.id) == (conversations * TOKENS, pytest.approx(conversations * USD))
