"""A gate's history, read for the guess of what follows it (supervisor/state/gate_history.py):
its ended runs of the same name at the same attempt, in any task of the repository's state,
newest first; a worker step of the same name, a running gate and other attempts are not in it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from supervisor.state import gate_history
from supervisor.state.store import Store
from supervisor.workflow import lookahead

if TYPE_CHECKING:
    from pathlib import Path


def task(store: Store) -> int:
    return store.create_workflow(
        description="t",
        cli="claude",
        base_branch="main",
        base_sha="0" * 40,
        branch_for_id=lambda i: f"ai/{i}-t",
        definition={},
        first_step="test",
    ).id


def ran(
    store: Store, wf_id: int, name: str, attempt: int, status: str, role: str | None = None
) -> None:
    step_id = store.start_step(wf_id, name, attempt, role, None)
    if status != "running":
        store.finish_step(step_id, status)


def test_a_gates_runs_at_the_same_attempt_in_every_task_newest_first(tmp_path: Path) -> None:
    store = Store(tmp_path / "state.db")
    first, second = task(store), task(store)
    ran(store, first, "test", 1, "failed")
    ran(store, first, "test", 2, "succeeded")
    ran(store, second, "test", 1, "succeeded")
    ran(store, second, "test", 2, "running")  # not ended: no outcome yet
    ran(store, second, "lint", 1, "failed")  # another gate
    ran(store, second, "test", 1, "failed", role="implementer")  # a worker step, not the gate

    assert gate_history.failed(store, "test", 1, 20) == [False, True]
    assert gate_history.failed(store, "test", 1, 1) == [False]
    assert gate_history.failed(store, "test", 2, 20) == [False]
    assert gate_history.failed(store, "test", 3, 20) == []


def test_a_first_run_that_failed_before_makes_the_fix_up_the_likelier_way(
    tmp_path: Path,
) -> None:
    store = Store(tmp_path / "state.db")
    for _ in range(3):
        wf_id = task(store)
        ran(store, wf_id, "test", 1, "failed")
        ran(store, wf_id, "test", 2, "succeeded")
    first = lookahead.fail_odds(gate_history.failed(store, "test", 1, lookahead.HISTORY))
    after_fix = lookahead.fail_odds(gate_history.failed(store, "test", 2, lookahead.HISTORY))
    assert first > 1 / 2 > after_fix
