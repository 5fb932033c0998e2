"""A task whose budget is reached while its components run: the running ones finish (their work
is paid for), nothing new is dispatched, and the task pauses with the figures, under its own
event and notification (not an approval); `approve --extend` and `resume` run only the rest.
The real engine, real SQLite and git, a real HTTP webhook receiver; workers scripted by the
stand-in sandbox (each run reports 120 tokens and $0.001)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import pytest
import test_engine_fast
from test_engine_fast import Project, component, plans, writes
from test_notify import Receiver
from test_notify import receiver as receiver  # a fixture

from supervisor.lifecycle import tasks
from supervisor.policy.budgets import BudgetExceeded

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from supervisor.sandbox.standin import WorkerCall

project = test_engine_fast.project  # the stand-in project fixture
warm_packer = test_engine_fast.warm_packer

FAN_OUT = """plan
  steps:
    plan: {role: planner, next: implement}
    implement: {role: implementer, for_each: component, next: commit}
    commit: {action: commit}
"""
# The planner's run (120 tokens) leaves the budget open; the first component's reaches it.
BUDGET = "budgets:\n  task: {tokens: 200}\nlimits:\n  max_parallel_components: 2\n"


def after_merge_of(root: Path, cid: str, then: Callable[[WorkerCall], str]) -> Callable[..., str]:
    """A worker that is still at work when component `cid` is merged: the budget is reached
    while it runs."""

    def do(call: WorkerCall) -> str:
        deadline = time.monotonic() + 240  # however loaded the machine; a merge ends it
        while time.monotonic() < deadline:
            with tasks.reading(root) as store:
                merged = [
                    e.payload["component"] for e in store.events(1) if e.type == "component_merged"
                ]
            if cid in merged:
                return then(call)
            time.sleep(0.05)
        raise AssertionError(f"component {cid} was never merged")

    return do


def fan_out(project: Callable[..., Project]) -> Project:
    p = project(FAN_OUT, None)
    p.script.add(
        "ROLE: planner",
        plans(component("a", "a.txt"), component("b", "b.txt"), component("c", "c.txt")),
    )
    p.script.add("'a'", writes({"a.txt": "a\n"}))
    p.script.add("'b'", after_merge_of(p.root, "a", writes({"b.txt": "b\n"})))
    p.script.add("'c'", writes({"c.txt": "c\n"}))
    with (p.root / ".supervisor" / "config.yaml").open("a") as config:
        config.write(BUDGET)
    return p


def ran(p: Project, cid: str) -> int:
    return sum(f"'{cid}'" in call.prompt for _, call in p.script.calls)


def test_a_budget_reached_mid_fan_out_lets_running_components_finish_and_holds_the_rest(
    project: Callable[..., Project],
    receiver: Receiver,
    tmp_path: Path,
) -> None:
    p = fan_out(project)
    (tmp_path / "user" / "config.yaml").write_text(f"notifications:\n  webhook: {receiver.url}\n")

    with pytest.raises(BudgetExceeded, match=r"spent \$0\.003, 360 of 200 tokens"):
        p.start()

    wf = p.workflow()
    assert (wf.status, wf.current_step) == ("budget_exceeded", "implement")
    merged = sorted(e.payload["component"] for e in p.events("component_merged"))
    assert merged == ["a", "b"]  # b was running when a reached the budget: it finished
    assert (ran(p, "a"), ran(p, "b"), ran(p, "c")) == (1, 1, 0)  # c was never dispatched
    [held] = p.events("components_held")
    assert held.payload["components"] == ["c"]
    assert (held.payload["scope"], held.payload["over"]) == ("task", ["tokens"])
    [paused] = p.events("budget_exceeded")
    assert paused.payload["spent"]["tokens"] == 360
    assert p.events("approval_requested") == []
    assert [b["event"] for b in receiver.bodies] == ["budget"]  # its own notification
    assert "paused at its budget" in receiver.bodies[0]["text"]

    tasks.decide(1, p.root, approve=True, extend_tokens=1000)
    done = p.resume()

    assert done.status == "completed"
    assert (ran(p, "a"), ran(p, "b"), ran(p, "c")) == (1, 1, 1)  # only the held one ran
    assert p.on_branch("c.txt") == "c\n" and p.on_branch("a.txt") == "a\n"


def test_a_fan_out_whose_components_all_started_before_the_budget_was_reached_completes_the_step(
    project: Callable[..., Project],
) -> None:
    """Nothing was held back: the step is done, and the task pauses before the next one."""
    p = fan_out(project)
    config_text = (p.root / ".supervisor" / "config.yaml").read_text()
    (p.root / ".supervisor" / "config.yaml").write_text(
        config_text.replace("max_parallel_components: 2", "max_parallel_components: 3")
    )

    with pytest.raises(BudgetExceeded):
        p.start()

    wf = p.workflow()
    assert (wf.status, wf.current_step) == ("budget_exceeded", "commit")
    assert p.events("components_held") == []
    assert (ran(p, "a"), ran(p, "b"), ran(p, "c")) == (1, 1, 1)


def test_a_step_held_at_its_budget_stays_on_the_same_step_costing_no_retry_nor_breaker() -> None:
    """decide() alone: the held step is neither a failure nor an advance."""
    from test_decide import moved

    from supervisor.policy.budgets import HELD
    from supervisor.workflow.steps.base import Outcome

    context = {"breaker": {"implement": 2}, "attempts": {"implement": 1}}
    move = moved(
        "implement", Outcome(HELD, context={"components": {"c": {"status": "pending"}}}), context
    )

    assert (move.next_step, move.status, move.error) == ("implement", "running", None)
    assert move.state.breaker == {"implement": 2} and move.state.attempts == {"implement": 1}
    assert move.checkpoint_status == HELD and not move.wait and move.sleep_s == 0
    assert move.state.dump()["components"] == {"c": {"status": "pending"}}
