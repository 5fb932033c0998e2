"""The engine keeps a task's tests: counted once on the base, pinned, raised by a test engineer.

Real engine, SQLite and git with the stand-in sandbox (tests/test_engine_fast.py): the gate is a
host command that prints a unittest-style summary with one test per `def test_` line, so the
counts are what the files hold.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from test_engine_fast import Project, answer, project, warm_packer, writes

if TYPE_CHECKING:
    from collections.abc import Callable

    from supervisor.sandbox.standin import WorkerCall

__all__ = ["project", "warm_packer"]

COUNTING_GATE = {
    "test": "n=$(cat test_*.py | grep -c 'def test_'); printf 'Ran %s tests in 0.0s\\n\\nOK\\n' $n"
}
MORE_TESTS = "def test_three():\n    pass\n\n\ndef test_four():\n    pass\n"
WORKFLOW = """tests
  steps:
    tests: {role: test_engineer, next: accept}
    accept: {gate: test, next: implement, on_fail: tests}
    implement: {role: implementer, next: test, max_retries: 2}
    test: {gate: test, next: commit, on_fail: implement}
    commit: {action: commit}
"""


def deletes(path: str) -> Callable[[WorkerCall], str]:
    """An implementer that deletes `path` and claims a clean change."""

    def do(call: WorkerCall) -> str:
        (call.worktree / path).unlink()
        return answer(
            {
                "status": "SUCCESS",
                "summary": "tidied up",
                "files_created": [],
                "files_modified": [path],
                "tests_written": [],
                "blockers": [],
            }
        )

    return do


def test_tests_a_test_engineer_added_are_pinned_once_the_gate_accepts_them(
    project: Callable[..., Project],
) -> None:
    p = project(
        WORKFLOW,
        COUNTING_GATE,
        ("ROLE: test_engineer", writes({"test_more.py": MORE_TESTS})),
        ("ROLE: implementer", deletes("test_more.py")),
        ("FEEDBACK FROM THE PREVIOUS ATTEMPT", writes({"answer.txt": "right\n"})),
    )

    wf = p.start()

    assert wf.status == "completed"
    assert p.on_branch("test_more.py") == MORE_TESTS
    (refused,) = p.events("tests_weakened")
    assert refused.payload["weakened"] == ["test_more.py (deleted)"]
    floors = [
        (e.status, e.payload["tests"], e.payload["source"]) for e in p.events("gate_baseline")
    ]
    assert floors == [("recorded", 2, "base"), ("raised", 4, "test_engineer")]
    gates = [(e.step, e.payload["tests"], e.payload["base_tests"]) for e in p.events("gate")]
    assert gates == [("accept", 4, 2), ("test", 4, 4)]
    assert "test_pins" in wf.context and wf.context["test_pins"]["test_more.py"] == 2


def test_a_candidate_that_runs_fewer_tests_than_the_base_fails_its_gate_with_both_counts(
    project: Callable[..., Project],
) -> None:
    p = project(
        "implement\n  steps:\n"
        "    implement: {role: implementer, next: test, max_retries: 2}\n"
        "    test: {gate: test, next: commit, on_fail: implement}\n"
        "    commit: {action: commit}\n",
        {"test": "printf 'Ran %s tests in 0.0s\\n\\nOK\\n' $(cat count 2>/dev/null || echo 2)"},
        ("ROLE: implementer", writes({"count": "0\n"})),
        ("ran 0 tests where the task's base commit ran 2", writes({"count": "3\n"})),
    )

    wf = p.start()

    assert wf.status == "completed"
    gates = [(e.status, e.payload["tests"], e.payload["base_tests"]) for e in p.events("gate")]
    assert gates == [("failed", 0, 2), ("passed", 3, 2)]
    assert len(p.events("gate_baseline")) == 1
