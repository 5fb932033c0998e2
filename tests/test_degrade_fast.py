"""Graceful degradation, engine-level (the stand-in sandbox of test_engine_fast.py): a step that
opts in with `degrade: [simplified, minimal]` gets a simplified run and then a minimal one once
its retries are spent; a degraded result is marked in the state, `status`, the approval screen and
the commit message, and a minimal one (stubs) waits for a person before it is committed."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
import yaml
from rich.console import Console
from test_engine_fast import GATE, Project, component, plans, project, warm_packer, writes

from supervisor.core.config import WorkflowDef
from supervisor.core.errors import ApprovalRequired, StepFailedError
from supervisor.guard.trust import trust
from supervisor.lifecycle import tasks
from supervisor.policy.approvals import pending
from supervisor.views.monitor import step_shown
from supervisor.views.render import workflows_table

if TYPE_CHECKING:
    from collections.abc import Callable

    from supervisor.sandbox.standin import WorkerCall

__all__ = ["project", "warm_packer"]  # fixtures, used by name

DEGRADING = """implement
  steps:
    implement: {role: implementer, next: test, max_retries: 1, degrade: [simplified, minimal]}
    test: {gate: test, next: commit, on_fail: implement}
    commit: {action: commit}
"""
SIMPLIFIED = "REDUCED SCOPE (a simplified attempt"
MINIMAL = "REDUCED SCOPE (a minimal attempt"


def wrong_until(level_marker: str | None) -> dict[str, object]:
    """An implementer whose answer is wrong (a new wrong text each run, so no loop is seen)
    unless its prompt carries `level_marker`."""
    runs = iter(range(100))

    def do(call: WorkerCall) -> str:
        right = level_marker is not None and level_marker in call.prompt
        return writes({"answer.txt": "right\n" if right else f"wrong {next(runs)}\n"})(call)

    return {"when": "ROLE: implementer", "repeat": True, "do": do}


def test_a_minimal_result_is_marked_degraded_and_waits_for_approval_before_its_commit(
    project: Callable[..., Project],
) -> None:
    p = project(DEGRADING, GATE, wrong_until(MINIMAL))

    with pytest.raises(ApprovalRequired, match="waits for approval of step 'test'"):
        p.start()

    prompts = p.script.prompts("implementer")
    # Two primary runs (max_retries 1), one simplified, one minimal; each prompt says its scope.
    assert [SIMPLIFIED in t for t in prompts] == [False, False, True, False]
    assert [MINIMAL in t for t in prompts] == [False, False, False, True]
    assert "TODO" in prompts[3]
    wf = p.workflow()
    assert wf.status == "awaiting_approval"
    assert wf.context["degraded"] == {"implement": "minimal"}
    assert [(e.step, e.status) for e in p.events("degraded")] == [
        ("implement", "simplified"),
        ("implement", "minimal"),
    ]
    # Nothing reached the branch before a person saw it.
    assert p.git("rev-parse", wf.task_branch) == p.git("rev-parse", wf.base_sha)
    # The approval screen (TUI and `status <id>`), the list and the TUI's rows all say so.
    about = pending(wf, p.root)
    assert about[0].startswith("DEGRADED (minimal) result of step 'implement': stubs")
    console = Console(record=True, width=200)
    console.print(workflows_table([wf]))
    assert "awaiting_approval (degraded: minimal (implement))" in console.export_text()
    assert step_shown(wf).endswith("[degraded: minimal]")

    tasks.decide(1, p.root, approve=True)
    wf = p.resume()

    assert wf.status == "completed"
    assert p.on_branch("answer.txt") == "right\n"
    message = p.git("log", "-1", "--format=%B", wf.task_branch)
    assert "DEGRADED (minimal) result of step 'implement'" in message


def test_a_simplified_result_that_passes_is_committed_marked_without_a_minimal_run(
    project: Callable[..., Project],
) -> None:
    p = project(DEGRADING, GATE, wrong_until(SIMPLIFIED))

    wf = p.start()

    assert wf.status == "completed"  # simplified is not stubs: the usual approval rules apply
    assert len(p.script.prompts("implementer")) == 3
    assert wf.context["degraded"] == {"implement": "simplified"}
    assert [e.status for e in p.events("degraded_result")] == ["simplified"]
    message = p.git("log", "-1", "--format=%B", wf.task_branch)
    assert "DEGRADED (simplified) result of step 'implement': core functionality only" in message


def test_without_degrade_the_step_fails_when_its_retries_are_spent_as_before(
    project: Callable[..., Project],
) -> None:
    plain = project(
        DEGRADING.replace(", degrade: [simplified, minimal]", ""), GATE, wrong_until(None)
    )
    with pytest.raises(StepFailedError, match="'implement' of workflow 1 failed 2 times"):
        plain.start()
    assert len(plain.script.calls) == 2 and not plain.events("degraded")


def test_every_level_failing_fails_the_task_after_one_run_per_level(
    project: Callable[..., Project],
) -> None:
    p = project(DEGRADING, GATE, wrong_until(None))
    with pytest.raises(StepFailedError, match="'implement' of workflow 1 failed"):
        p.start()
    assert len(p.script.calls) == 4  # 2 primary + simplified + minimal
    assert p.workflow().status == "failed"
    assert p.workflow().context["degraded"] == {"implement": "minimal"}


def test_a_planned_task_degrades_its_implementer_with_the_plan_in_the_minimal_prompt(
    project: Callable[..., Project],
) -> None:
    p = project(
        "plan\n  steps:\n    plan: {role: planner, next: implement}\n"
        + DEGRADING.split("steps:\n", 1)[1],
        GATE,
        ("ROLE: planner", plans(component("answer", "answer.txt"))),
        wrong_until(MINIMAL),
    )
    with pytest.raises(ApprovalRequired):
        p.start()
    assert "answer.txt" in p.script.prompts("implementer")[-1]


@pytest.mark.parametrize(
    ("step", "problem"),
    [
        ("{gate: test, degrade: [minimal]}", "`degrade` belongs to a step with one `role`"),
        ("{role: implementer, degrade: [minimal, simplified]}", "simplified, then minimal"),
        ("{role: implementer, degrade: [smaller]}", "simplified"),
    ],
)
def test_a_bad_degrade_list_is_a_clear_config_error(step: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        WorkflowDef.model_validate({"initial_step": "s", "steps": {"s": yaml.safe_load(step)}})


def test_a_minimal_result_waits_for_a_decision_even_where_the_policy_would_time_out(
    project: Callable[..., Project],
) -> None:
    p = project(DEGRADING, GATE, wrong_until(MINIMAL))
    (p.root / ".supervisor" / "approval_policy.yaml").write_text(
        "levels:\n  low: {action: notify_and_timeout, timeout_minutes: 0.001}\n"
    )
    trust(p.root)  # a repository policy counts once trusted
    with pytest.raises(ApprovalRequired):  # not approved by the timeout
        p.start()

    wf = p.workflow()
    assert wf.status == "awaiting_approval"
    assert wf.context["risk"]["action"] == "require_approval"
    assert "a minimal (degraded) result" in wf.context["risk"]["reasons"]
    assert not p.events("approval_decided")
