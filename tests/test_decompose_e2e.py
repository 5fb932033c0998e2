"""Recursive decomposition on the real parts: the real `claude` CLI in the real sandbox against
the scripted model API, real git and SQLite. A component its worker reports too large, or that
fails its gates after its retries, is split into a sub-plan whose parts run, merge into it, pass
its QA gate, and the tip passes the project's tests; a sub-plan reaching outside its component
is sent back with the reason; past the depth bound a person decides (exit 10) with the reasons
in `status`."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import TYPE_CHECKING, Any

import pytest
from e2e_support import GOOD_CALC, new_repo, planner, require_sandbox, write_workflow, writes

from supervisor.core.errors import ApprovalRequired
from supervisor.lifecycle import tasks
from supervisor.lifecycle.demo import fenced

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.docker
TASK = "Implement calc and add a shapes module"
WORKFLOW = """workflow:
  initial_step: plan
  steps:
    plan: {role: planner, next: implement}
    implement: {role: implementer, for_each: component, gates: [compile], next: test,
                max_retries: 1}
    test: {gate: test, next: commit, on_fail: implement}
    commit: {action: commit}
"""
GATES = 'gates:\n  test: make test\n  compile: "python3 -m py_compile *.py"\n'
SHAPES = "def square(side):\n    return side * side\n"


@pytest.fixture(autouse=True)
def real_parts(api_keys: None) -> None:
    require_sandbox()


def plan(*components: dict[str, Any]) -> str:
    return fenced(
        {
            "status": "COMPLETE",
            "phases": [{"id": "p1", "description": "all", "components": list(components)}],
            "estimated_components": len(components),
        }
    )


def component(cid: str, *files: str) -> dict[str, Any]:
    return {"id": cid, "description": f"the {cid} work", "files": list(files), "depends_on": []}


def too_large(cid: str, reason: str) -> dict[str, Any]:
    answer = {"status": "TOO_LARGE", "summary": "too big for one worker", "reason": reason}
    return {"when": f"one component of the plan: '{cid}'", "turns": [{"text": fenced(answer)}]}


def split_into_calc_and_shapes(parent: str) -> dict[str, Any]:
    return planner(
        plan(component("calc", "calc.py"), component("shapes", "shapes.py")),
        when=f"SUB-PLAN OF COMPONENT '{parent}'",
    )


def the_parts(parent: str) -> list[dict[str, Any]]:
    return [
        writes(f"one component of the plan: '{parent}.1'", "calc.py", GOOD_CALC, read=True),
        writes(f"one component of the plan: '{parent}.2'", "shapes.py", SHAPES),
    ]


def repo_for(tmp_path: Path, url: str, extra: str = "") -> Path:
    repo = new_repo(tmp_path, url, GATES + extra)
    write_workflow(repo, WORKFLOW)
    return repo


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=True
    ).stdout


def kinds(repo: Path, wf_id: int) -> list[tuple[str, Any]]:
    with tasks.reading(repo) as store:
        return [(e.type, e.payload.get("component")) for e in store.events(wf_id)]


def test_a_component_reported_too_large_is_split_in_two_that_pass_and_the_tip_passes_the_tests(
    tmp_path: Path, serve: Any
) -> None:
    # The attack: the sub-planner's first answer hands a part the project's own configuration.
    grab = plan(component("calc", "calc.py"), component("config", ".supervisor/config.yaml"))
    server = serve(
        planner(grab, when="SUB-PLAN OF COMPONENT 'all'"),
        split_into_calc_and_shapes("all"),
        planner(plan(component("all", "calc.py", "shapes.py"))),
        too_large("all", "calc and shapes are two separate jobs"),
        *the_parts("all"),
    )
    repo = repo_for(tmp_path, server.url)

    wf = tasks.start_task(TASK, repo)

    assert wf.status == "completed"
    with tasks.reading(repo) as store:
        (refused,) = [e for e in store.events(wf.id) if e.type == "subplan_rejected"]
    assert ".supervisor/config.yaml" in refused.payload["problem"]
    assert git(repo, "diff", "--stat", wf.base_sha, wf.task_branch, "--", ".supervisor") == ""
    assert git(repo, "show", f"{wf.task_branch}:calc.py") == GOOD_CALC
    assert git(repo, "show", f"{wf.task_branch}:shapes.py") == SHAPES
    seen = kinds(repo, wf.id)
    assert ("component_expanded", "all") in seen
    assert {c for k, c in seen if k == "component_merged"} == {"all.1", "all.2", "all"}
    with tasks.reading(repo) as store:
        gates = [(e.step, e.status) for e in store.events(wf.id) if e.type == "gate"]
    assert ("implement/all/compile", "passed") in gates  # the QA pass on the merged parts
    assert ("test", "passed") in gates  # the project's tests on the tip
    work = subprocess.run(
        [sys.executable, "-m", "supervisor", "status", str(wf.id), "--json", "--repo", str(repo)],
        capture_output=True,
        text=True,
        check=True,
    )
    shown = {c["id"]: (c["depth"], c["parent"]) for c in json.loads(work.stdout)["components"]}
    assert shown == {"all": (0, None), "all.1": (1, "all"), "all.2": (1, "all")}


def test_a_component_that_fails_its_gates_twice_is_split_and_then_passes(
    tmp_path: Path, serve: Any
) -> None:
    broken = "def add(a, b):\n    return a +\n"
    server = serve(
        split_into_calc_and_shapes("all"),
        planner(plan(component("all", "calc.py", "shapes.py"))),
        writes("one component of the plan: 'all'", "calc.py", broken, read=True),
        writes("one component of the plan: 'all'", "calc.py", broken + "\n", read=True),
        *the_parts("all"),
    )
    repo = repo_for(tmp_path, server.url)

    wf = tasks.start_task(TASK, repo)

    assert wf.status == "completed"
    assert git(repo, "show", f"{wf.task_branch}:calc.py") == GOOD_CALC
    with tasks.reading(repo) as store:
        (expanding,) = [e for e in store.events(wf.id) if e.type == "component_expanding"]
    assert expanding.payload["trigger"] == "failed"


def test_past_the_depth_bound_the_task_waits_for_a_person_with_the_reasons_in_status(
    tmp_path: Path, serve: Any
) -> None:
    server = serve(
        split_into_calc_and_shapes("all"),
        planner(plan(component("all", "calc.py", "shapes.py"))),
        too_large("all", "two jobs"),
        too_large("all.1", "calc alone is still too much"),
        the_parts("all")[1],
    )
    repo = repo_for(tmp_path, server.url, "limits:\n  decomposition:\n    max_depth: 1\n")

    with pytest.raises(ApprovalRequired) as stopped:
        tasks.start_task(TASK, repo)

    assert stopped.value.exit_code == 10
    wf = tasks.workflows(repo)[0]
    assert wf.status == "awaiting_approval"
    shown = subprocess.run(
        [sys.executable, "-m", "supervisor", "status", str(wf.id), "--repo", str(repo)],
        capture_output=True,
        text=True,
        env={"COLUMNS": "200", "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
    )
    text = " ".join(shown.stdout.split())
    assert "component all.1 (depth 2)" in text
    assert "max_depth 1" in text and "calc alone is still too much" in text
    assert "sub-component all.1" in text  # the tree, with the parts under their parent
