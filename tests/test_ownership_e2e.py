"""File ownership and merge conflicts between components, on real parts: a real `claude` per
component in its own sandbox, worktree and branch, against the scripted model API."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from typing import TYPE_CHECKING, Any

import pytest
from e2e_support import new_repo, planner, require_sandbox, reviewer, write_workflow
from test_components_e2e import (
    CIRCLE,
    GATES,
    SQUARE,
    TASK,
    WORKFLOW,
    branches,
    builds,
    component,
    events,
    git,
    plan,
)

from supervisor.core.errors import StepFailedError
from supervisor.lifecycle import tasks

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.docker
ALLOW = "limits:\n  component_scope: allow\n"


@pytest.fixture(autouse=True)
def real_parts(api_keys: None) -> None:
    require_sandbox()


def repo_for(tmp_path: Path, url: str, extra: str = "") -> Path:
    repo = new_repo(tmp_path, url, GATES + extra)
    write_workflow(repo, WORKFLOW)
    return repo


def release_when_merged(repo: Path, component: str, released: Path) -> None:
    """Create `released` once the task records `component`'s merge (`component_merged`)."""
    while not released.exists():
        with contextlib.suppress(Exception):  # no state yet, or a write in progress
            wfs = tasks.workflows(repo)
            if wfs and any(
                e.type == "component_merged" and e.payload.get("component") == component
                for e in events(repo, wfs[0].id)
            ):
                released.touch()
        time.sleep(0.3)


def prompts_of(server: Any, cid: str) -> list[str]:
    """The first request of each conversation of component `cid`'s workers."""
    bodies = [json.dumps(r.body) for r in server.requests]
    return [b for b in bodies if f"one component of the plan: '{cid}'" in b]


def test_a_component_that_rewrites_another_components_file_is_sent_back_and_the_owner_keeps_it(
    tmp_path: Path, serve: Any
) -> None:
    # circle finishes first and also rewrites square.py, which the plan gives to square: before
    # ownership was checked, circle was merged first and square, the owner, hit the conflict.
    server = serve(
        planner(plan(component("square", ["square.py"]), component("circle", ["circle.py"]))),
        builds("square", ("square.py", SQUARE), delay=4.0),
        builds("circle", ("circle.py", CIRCLE), ("square.py", "SIDE = 2\n")),
        {
            **builds("circle", ("circle.py", CIRCLE)),
            "when": "square.py (belongs to component 'square')",
        },
        reviewer(),
    )
    repo = repo_for(tmp_path, server.url)

    wf = tasks.start_task(TASK, repo)

    assert wf.status == "completed"
    assert git(repo, "show", f"{wf.task_branch}:square.py") == SQUARE  # the owner's work
    assert git(repo, "show", f"{wf.task_branch}:circle.py") == CIRCLE
    log = events(repo, wf.id)
    strayed = [e for e in log if e.type == "component_out_of_scope"]
    assert [(e.step, e.payload["files"]) for e in strayed] == [
        ("implement/circle", {"square.py": ["square"]})
    ]
    assert not [e for e in log if e.type == "component_conflict"]
    merged = [e.payload["component"] for e in log if e.type == "component_merged"]
    assert sorted(merged) == ["circle", "square"]
    # the out-of-scope attempt was never merged: its commit is not in the task branch's history
    assert strayed[0].payload["commit"] not in git(repo, "rev-list", wf.task_branch)
    retried = [p for p in prompts_of(server, "circle") if "outside its declared set" in p]
    assert retried, "circle's second attempt was not told why"
    assert branches(repo) == sorted(["main", wf.task_branch])


def test_resume_after_a_conflict_keeps_the_branch_and_hands_the_conflict_to_the_component(
    tmp_path: Path, serve: Any
) -> None:
    # With ownership unchecked (`allow`), circle also writes square.py and its merge conflicts
    # with square's. The resumed circle is shown both sides and redoes its change on top.
    # circle's first write waits until square is merged on the task branch (seen by a thread
    # watching the task's events), so circle's is always the merge that conflicts.
    both = SQUARE + "SIDE = 2\n"
    released = tmp_path / "square-merged"
    circle = builds("circle", ("circle.py", CIRCLE), ("square.py", "SIDE = 2\n"))
    circle["turns"][0]["after"] = str(released)
    server = serve(
        planner(plan(component("square", ["square.py"]), component("circle", ["circle.py"]))),
        builds("square", ("square.py", SQUARE)),
        circle,
        {
            **builds("circle", ("circle.py", CIRCLE), ("square.py", both), reads=("square.py",)),
            "when": "MERGE CONFLICT",
        },
        reviewer(),
    )
    repo = repo_for(tmp_path, server.url, ALLOW)
    watcher = threading.Thread(target=release_when_merged, args=(repo, "square", released))
    watcher.start()

    with pytest.raises(StepFailedError) as failure:
        tasks.start_task(TASK, repo)
    released.touch()  # the watcher ends either way
    watcher.join()

    wf = tasks.workflows(repo)[0]
    kept = f"{wf.task_branch}--circle"
    assert f"Their branches are kept: {kept}" in failure.value.hint
    kept_commit = git(repo, "rev-parse", kept).strip()
    assert git(repo, "show", f"{kept}:square.py") == "SIDE = 2\n"

    done = tasks.resume(wf.id, repo)

    assert done.status == "completed"
    # what the user was told is kept is still there, unmoved
    assert kept in branches(repo)
    assert git(repo, "rev-parse", kept).strip() == kept_commit
    # both intended changes are on the task branch
    assert git(repo, "show", f"{done.task_branch}:square.py") == both
    assert git(repo, "show", f"{done.task_branch}:circle.py") == CIRCLE
    # the resumed worker was given the conflict: the files, the kept branch, both sides' lines
    resumed = [p for p in prompts_of(server, "circle") if "MERGE CONFLICT" in p]
    assert resumed, "the resumed circle was not told about the conflict"
    assert all(x in resumed[0] for x in ("square.py", kept, "side * side", "SIDE = 2"))
    log = events(repo, done.id)
    resolving = [e for e in log if e.type == "component_conflict_resolving"]
    assert [(e.step, e.payload["resolved_by"], e.payload["kept_branch"]) for e in resolving] == [
        ("implement/circle", "implement/circle", kept)
    ]
    assert resolving[0].payload["kept_commit"] == kept_commit
    merged = {e.payload["component"]: e.payload for e in log if e.type == "component_merged"}
    assert merged["circle"]["resolves_conflict"]["commit"] == kept_commit
    assert merged["circle"]["branch"] == f"{kept}--2"  # the resolution had a branch of its own
    assert branches(repo) == sorted(["main", done.task_branch, kept])


def test_with_component_scope_replan_the_plan_goes_back_to_its_planner_naming_the_files(
    tmp_path: Path, serve: Any
) -> None:
    both = SQUARE + "SIDE = 2\n"
    server = serve(
        planner(plan(component("square", ["square.py"]), component("circle", ["circle.py"]))),
        builds("square", ("square.py", SQUARE), delay=4.0),
        builds("circle", ("circle.py", CIRCLE), ("square.py", "SIDE = 2\n")),
        # the planner, told who changed whose file, gives square.py to circle as well
        planner(
            plan(component("circle", ["circle.py", "square.py"])),
            when="component 'circle' changed square.py, which the plan gives to square",
        ),
        builds("circle", ("circle.py", CIRCLE), ("square.py", both), reads=("square.py",)),
        reviewer(),
    )
    repo = repo_for(tmp_path, server.url, "limits:\n  component_scope: replan\n")

    wf = tasks.start_task(TASK, repo)

    assert wf.status == "completed"
    assert git(repo, "show", f"{wf.task_branch}:square.py") == both  # square's work kept
    assert git(repo, "show", f"{wf.task_branch}:circle.py") == CIRCLE
    log = events(repo, wf.id)
    replans = [e for e in log if e.type == "replan_requested"]
    assert [(e.payload["to"], e.payload["files"]) for e in replans] == [
        ("plan", {"circle": {"square.py": ["square"]}})
    ]
    retries = [e for e in log if e.type == "retry" and e.payload["from_step"] == "implement"]
    assert [e.step for e in retries] == ["plan"]
