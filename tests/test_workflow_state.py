"""The workflow's stored progress is a typed, versioned model; what older versions wrote resumes.

The end-to-end half (a database written the old way, then resumed by the engine) is in
tests/test_engine_fast.py; these pin the model's own rules."""

from __future__ import annotations

import pytest

from supervisor.core.errors import StateError
from supervisor.workflow.state import VERSION, WorkflowState

OLD = {  # a context as the supervisor wrote it before the model existed: no version key
    "plan": {"status": "COMPLETE", "phases": []},
    "planned_by": "plan",
    "components": {"a": {"status": "merged", "attempts": 0}},
    "integrated": "c0ffee",
    "candidate": None,
    "breaker": {"test": 2},
    "attempts": {"implement": 1},
    "feedback": {"implement": ["the gate failed"]},
    "pinned": {"gates": {"test": "make test"}},
}


def test_a_context_without_a_version_is_migrated_and_keeps_every_value() -> None:
    state = WorkflowState.load(OLD)

    assert state.version == VERSION
    assert state.breaker == {"test": 2} and state.attempts == {"implement": 1}
    stored = state.dump()
    assert stored["version"] == VERSION
    # Keys at their default are not stored; every other key is, unchanged.
    assert {k: v for k, v in OLD.items() if v is not None} == {
        k: v for k, v in stored.items() if k != "version"
    }


def test_a_key_the_model_does_not_name_is_kept() -> None:
    assert WorkflowState.load({"something_new": [1, 2]}).dump()["something_new"] == [1, 2]


def test_a_wrong_shape_is_refused_with_the_key_named() -> None:
    with pytest.raises(StateError, match="attempts"):
        WorkflowState.load({"attempts": {"implement": "many"}})


def test_a_context_from_a_newer_supervisor_is_refused() -> None:
    with pytest.raises(StateError, match="newer supervisor"):
        WorkflowState.load({"version": VERSION + 1})


def test_a_change_counted_in_place_is_stored() -> None:
    state = WorkflowState.load({})
    state.breaker["review"] = 1
    assert state.dump() == {"breaker": {"review": 1}, "version": VERSION}
