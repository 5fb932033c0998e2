"""Which container a resume may adopt: only the one whose labels name, in this repository and
workflow, a step the crash left running with that very container (no Docker needed)."""

from __future__ import annotations

import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from supervisor.sandbox import adopt
from supervisor.sandbox import docker as docker_sandbox
from supervisor.sandbox.docker import (
    LABEL_LOWER,
    LABEL_REPO,
    LABEL_STEP,
    LABEL_WORKFLOW,
    LABEL_WORKSPACE,
    RUN_DIR,
    RUN_PREFIX,
)
from supervisor.sandbox.egress import Route
from supervisor.state.store import Store

REPO = "0123456789abcdef"
CONTAINER = "c" * 64
BASE = "b" * 40
ROUTE = Route(url="http://model-api.supervisor.internal:41234/v1", alias="a", gateway="g")


def labels(**changes: str) -> dict[str, str]:
    made = adopt.worker_labels(
        {LABEL_REPO: REPO, LABEL_WORKFLOW: "3", LABEL_STEP: "implement/square"},
        17,
        "implementer",
        BASE,
        ROUTE,
    )
    return {**made, **changes}


def step(**changes: Any) -> dict[str, Any]:
    row = {
        "id": 17,
        "workflow_id": 3,
        "name": "implement/square",
        "role": "implementer",
        "attempt": 2,
        "status": "running",
        "container_id": CONTAINER,
        "worktree": "/repo/.supervisor/worktrees/wf3-implement-square-implementer-2",
    }
    return {**row, **changes}


def test_a_running_step_s_own_container_is_adopted_with_its_worktree_base_and_port() -> None:
    found = adopt.match(CONTAINER, labels(), "running", REPO, 3, [step(id=16), step()])

    assert found is not None
    assert (found.step_id, found.attempt, found.base, found.port) == (17, 2, BASE, 41234)
    assert found.worktree == Path(step()["worktree"])
    assert adopt.match(CONTAINER, labels(), "exited", REPO, 3, [step()]) == found  # done: read it


def test_a_copy_on_write_view_is_adopted_over_the_base_its_container_s_labels_name() -> None:
    lower = "d" * 40
    view = labels(**{LABEL_WORKSPACE: "overlay", LABEL_LOWER: lower})
    found = adopt.match(CONTAINER, view, "running", REPO, 3, [step()])
    assert found is not None
    assert (found.base, found.lower) == (BASE, lower)
    full = adopt.match(CONTAINER, labels(), "running", REPO, 3, [step()])
    assert full is not None and full.lower is None  # a fully written worktree


def test_a_container_advanced_while_it_waited_is_adopted_over_the_commit_it_was_brought_to() -> (
    None
):
    """Its label still names the commit it was made from; the state's record of the advance
    (written before any step took it) names the commit its workspace shows."""
    found = adopt.match(CONTAINER, labels(), "running", REPO, 3, [step()])
    assert found is not None
    later = "e" * 40

    assert adopt.advanced(found, {CONTAINER: (BASE, later)}).base == later
    # Another container's advance, one from another commit, or a malformed record: as labelled.
    assert adopt.advanced(found, {"d" * 64: (BASE, later)}).base == BASE
    assert adopt.advanced(found, {CONTAINER: ("f" * 40, later)}).base == BASE
    assert adopt.advanced(found, {CONTAINER: (BASE, "HEAD~1")}).base == BASE


def case(
    why: str,
    container: str = CONTAINER,
    state: str = "running",
    rows: list[dict[str, Any]] | None = None,
    **label_changes: str,
) -> Any:
    return pytest.param(container, labels(**label_changes), state, rows or [step()], id=why)


GATE_LABELS = {adopt.LABEL_STEP_ID: "", adopt.LABEL_ROLE: "", adopt.LABEL_BASE: ""}


@pytest.mark.parametrize(
    ("container", "container_labels", "state", "rows"),
    [
        case("another repository", **{LABEL_REPO: "f" * 16}),
        case("another workflow", **{LABEL_WORKFLOW: "4"}),
        case("another step's row", **{adopt.LABEL_STEP_ID: "18"}),
        case("a renamed step", **{LABEL_STEP: "implement/circle"}),
        case("another role", **{adopt.LABEL_ROLE: "reviewer"}),
        case("the row names another container", container="d" * 64),
        case("the step already finished", rows=[step(status="failed")]),
        case("no base recorded (an older supervisor)", **{adopt.LABEL_BASE: ""}),
        case("a gate or probe container (no step labels)", **GATE_LABELS),
        case("a dead container", state="dead"),
        case("a paused container", state="paused"),
        case("an overlay view without its base", **{LABEL_WORKSPACE: "overlay"}),
        case(
            "an overlay base that is no commit", **{LABEL_WORKSPACE: "overlay", LABEL_LOWER: "../x"}
        ),
    ],
)
def test_anything_that_does_not_match_exactly_is_not_adopted(
    container: str, container_labels: dict[str, str], state: str, rows: list[dict[str, Any]]
) -> None:
    assert adopt.match(container, container_labels, state, REPO, 3, rows) is None


def test_the_container_s_start_is_read_from_docker_s_nanosecond_timestamps() -> None:
    at = docker_sandbox.started_at({"State": {"StartedAt": "2026-11-23T17:01:38.123456789Z"}})
    assert at == datetime(2026, 11, 23, 17, 1, 38, 123456, tzinfo=UTC).timestamp()
    offset = docker_sandbox.started_at({"State": {"StartedAt": "2026-11-23T18:01:38.5+01:00"}})
    assert offset == datetime(2026, 11, 23, 17, 1, 38, 500000, tzinfo=UTC).timestamp()
    assert (
        docker_sandbox.started_at({"State": {"StartedAt": "0001-01-01T00:00:00Z"}}) is None
    )  # never ran


def test_only_this_repository_s_run_folder_is_kept_for_an_adopted_container() -> None:
    ours = Path(tempfile.gettempdir()) / f"{RUN_PREFIX}{REPO}-x1"
    mounts = [{"Destination": "/workspace", "Source": "/repo/wt"}]
    assert adopt.match(CONTAINER, labels(), "running", REPO, 3, [step()], None) is not None
    found = adopt._run_dir(
        {"Mounts": [*mounts, {"Destination": RUN_DIR, "Source": str(ours)}]}, REPO
    )
    assert found == ours
    elsewhere = {"Mounts": [{"Destination": RUN_DIR, "Source": "/home/user/secrets"}]}
    assert adopt._run_dir(elsewhere, REPO) is None
    other_repo = {"Mounts": [{"Destination": RUN_DIR, "Source": str(ours).replace(REPO, "f" * 16)}]}
    assert adopt._run_dir(other_repo, REPO) is None


def test_resume_keeps_an_adopted_step_running_and_interrupts_the_rest(tmp_path: Path) -> None:
    with Store(tmp_path / "state.db") as store:
        wf = store.create_workflow(
            description="Shapes",
            cli="claude",
            base_branch="main",
            base_sha="a" * 40,
            branch_for_id=lambda i: f"ai/{i}-shapes",
            definition={"initial_step": "implement", "steps": {}},
            first_step="implement",
        )
        kept = store.start_step(wf.id, "implement/square", 1, "implementer", "/tmp/wt1")
        store.start_step(wf.id, "implement/circle", 1, "implementer", "/tmp/wt2")

        assert store.interrupt_running_steps(wf.id, keep={kept}) == ["implement/circle"]

        status = {s["name"]: s["status"] for s in store.steps(wf.id)}
        assert status == {"implement/square": "running", "implement/circle": "interrupted"}
