"""Bounded continuations, engine-level (the stand-in sandbox of test_engine_fast.py, whose worker
prints the claude stream with session id `standin-session`): a planner sent back continues its
session (`--resume`, only the feedback as its prompt) at most `max_continuation_turns` times, then
runs fresh; every turn is an event; an implementer can never continue."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
from test_engine_fast import Project, component, plans, project, warm_packer, writes

from supervisor.core.errors import ApprovalRequired, ConfigError, StepFailedError
from supervisor.lifecycle import tasks
from supervisor.sandbox.standin import answer

if TYPE_CHECKING:
    from collections.abc import Callable

    from supervisor.sandbox.standin import WorkerCall

__all__ = ["project", "warm_packer"]  # fixtures, used by name

PLAN_THEN_IMPLEMENT = """plan
  steps:
    plan: {role: planner, next: implement, max_retries: 6}
    implement: {role: implementer, next: commit}
    commit: {action: commit}
"""


def refining(call: WorkerCall) -> str:
    return answer(
        {"status": "NEEDS_REFINEMENT", "summary": "unsure", "phases": [], "estimated_components": 0}
    )


def planner_sent_back(times: int) -> list[dict[str, Any]]:
    return [{"when": "ROLE: planner", "do": refining} for _ in range(times)]


def test_a_planner_sent_back_resumes_its_session_up_to_the_limit_then_runs_fresh(
    project: Callable[..., Project],
) -> None:
    p = project(
        PLAN_THEN_IMPLEMENT,
        None,
        *planner_sent_back(4),
        ("ROLE: planner", plans(component("answer", "answer.txt"))),
        ("ROLE: implementer", writes({"answer.txt": "right\n"})),
    )
    wf = p.start()

    assert wf.status == "completed"
    runs = [c for _, c in p.script.calls if c.role == "planner"]
    resumed = ["--resume" in c.argv for c in runs]
    # Run 1 fresh, runs 2-4 continue the session (3 = max_continuation_turns), run 5 fresh.
    assert resumed == [False, True, True, True, False]
    assert all(c.argv[c.argv.index("--resume") + 1] == "standin-session" for c in runs[1:4])
    # A continued turn sends only the feedback: the task and context are in the session.
    assert "FEEDBACK ON YOUR LAST ANSWER" in runs[1].prompt
    assert "NEEDS_REFINEMENT" in runs[1].prompt
    assert "TASK:" not in runs[1].prompt and "TASK:" in runs[4].prompt
    turns = [e.payload["turn"] for e in p.events("continuation")]
    assert turns == [1, 2, 3]
    (limit,) = p.events("continuation_limit")
    assert limit.payload == {"turns": 3, "max_continuation_turns": 3}
    # The kept home is gone once the step passed.
    assert not list((p.root / ".supervisor" / "homes").glob("wf1-*"))
    assert "sessions" not in p.workflow().context


def test_an_implementer_listed_for_continuation_is_refused_with_a_clear_error(
    project: Callable[..., Project],
) -> None:
    p = project(
        "implement\n  steps:\n    implement: {role: implementer, next: commit}\n"
        "    commit: {action: commit}\n",
        None,
        ("ROLE: implementer", writes({"answer.txt": "right\n"})),
    )
    config = p.root / ".supervisor" / "config.yaml"
    config.write_text(
        config.read_text() + "continuity:\n  continuation_roles: [planner, implementer]\n"
    )
    with pytest.raises(ConfigError, match="lists 'implementer', an implementing role") as info:
        p.start()
    assert "Remove 'implementer' from continuity.continuation_roles" in info.value.hint
    assert p.script.calls == []  # refused before any run
    assert tasks.workflows(p.root) == []  # at the start: no task was created


def test_a_role_not_listed_never_continues(project: Callable[..., Project]) -> None:
    p = project(
        PLAN_THEN_IMPLEMENT,
        None,
        *planner_sent_back(2),
        ("ROLE: planner", plans(component("answer", "answer.txt"))),
        ("ROLE: implementer", writes({"answer.txt": "right\n"})),
    )
    config = p.root / ".supervisor" / "config.yaml"
    config.write_text(config.read_text() + "continuity:\n  continuation_roles: [investigator]\n")
    assert p.start().status == "completed"
    assert not any("--resume" in c.argv for _, c in p.script.calls)
    assert not p.events("continuation")


def test_after_a_failure_resume_starts_the_planner_fresh_and_the_spent_turns_still_count(
    project: Callable[..., Project],
) -> None:
    p = project(
        PLAN_THEN_IMPLEMENT.replace("max_retries: 6", "max_retries: 1"),
        None,
        *planner_sent_back(3),
        ("ROLE: planner", plans(component("answer", "answer.txt"))),
        ("ROLE: implementer", writes({"answer.txt": "right\n"})),
    )
    with pytest.raises(StepFailedError):
        p.start()
    assert p.workflow().context["sessions"]["plan"] == {
        "cli": "claude",
        "session_id": None,
        "turns": 1,
    }
    assert not list((p.root / ".supervisor" / "homes").glob("wf1-*"))

    assert p.resume().status == "completed"

    runs = [c for _, c in p.script.calls if c.role == "planner"]
    assert ["--resume" in c.argv for c in runs] == [False, True, False, True]
    assert [e.payload["turn"] for e in p.events("continuation")] == [1, 2]


def test_abandon_removes_a_kept_home_a_killed_run_left(project: Callable[..., Project]) -> None:
    from supervisor.lifecycle import abandon
    from supervisor.workflow.continuation import home_dir, prepare_home

    p = project(
        PLAN_THEN_IMPLEMENT.replace("max_retries: 6", "max_retries: 6, human_approval: true"),
        None,
        ("ROLE: planner", plans(component("answer", "answer.txt"))),
    )
    with pytest.raises(ApprovalRequired):
        p.start()
    # What a run killed mid-chain leaves: its home, with the session the CLI wrote.
    home = prepare_home(home_dir(p.root / ".supervisor", 1, "plan"), fresh=True)
    (home / ".claude").mkdir()
    (home / ".claude" / "session.jsonl").write_text("{}\n")

    abandon.abandon(1, p.root)

    assert not home.exists()
