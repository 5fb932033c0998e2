"""A monorepo's projects on real parts: a uv workspace of a shared types package and two apps, each
project with its own gate run from its own directory, one real CLI per component (e2e_support.CLI)
in the real sandbox, real git. A change to the shared types is gated by the apps that build on them,
and the app it breaks is named to the worker; a change to one app runs that app's gate and no other
project's (the task's own gate step, after the components, runs every project once); a worker
writing into another project is refused; a plan naming an unknown project goes back to its planner;
projects that depend on each other in a cycle stop the task before anything runs."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import TYPE_CHECKING, Any

import pytest
from e2e_support import new_repo, planner, require_sandbox, write_workflow
from monorepo_support import WORKFLOW, component, gate_steps, gated, git, plan, sent

from supervisor.lifecycle import tasks
from supervisor.lifecycle.demo import fenced

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.docker


def unittest_in(*paths: str) -> str:
    return f"PYTHONPATH={':'.join(paths)} python3 -m unittest discover -s tests"


CONFIG = f"""gates:
  test: "python3 -m unittest discover -s . -p 'test_*.py'"
projects:
  - name: types
    path: packages/types
    gates: {{test: "{unittest_in("src")}"}}
  - name: app-a
    path: apps/a
    gates: {{test: "{unittest_in("src", "../../packages/types/src")}"}}
  - name: app-b
    path: apps/b
    gates: {{test: "{unittest_in("src", "../../packages/types/src")}"}}
cross_project_dependencies:
  app-a: {{depends_on: [types]}}
  app-b: {{depends_on: [types]}}
"""
TYPES = "packages/types/src/shapes_types/__init__.py"
POINT = "from typing import NamedTuple\n\n\nclass Point(NamedTuple):\n    x: float\n    y: float\n"
POINT_3D_BREAKING = POINT + "    z: float\n"
POINT_3D = POINT + "    z: float = 0.0\n"
APP_B = "apps/b/src/app_b/__init__.py"
FLIP = "from shapes_types import Point\n\n\ndef flip(p):\n    return Point(p.y, p.x)\n"
FLIP_AND_SCALE = FLIP + "\n\ndef scale(p, k):\n    return Point(p.x * k, p.y * k)\n"
FILES = {
    "pyproject.toml": '[project]\nname = "shapes"\nversion = "0"\n\n'
    '[tool.uv.workspace]\nmembers = ["packages/*", "apps/*"]\n',
    "packages/types/pyproject.toml": '[project]\nname = "shapes-types"\nversion = "0"\n',
    TYPES: POINT,
    "packages/types/tests/test_point.py": "import unittest\n\nfrom shapes_types import Point\n\n\n"
    "class T(unittest.TestCase):\n    def test_point(self):\n"
    "        self.assertEqual(Point._fields[:2], ('x', 'y'))\n",
    "apps/a/pyproject.toml": '[project]\nname = "app-a"\nversion = "0"\n'
    'dependencies = ["shapes-types"]\n\n[tool.uv.sources]\nshapes-types = {workspace = true}\n',
    "apps/a/src/app_a/__init__.py": "def norm(p):\n    return abs(p.x) + abs(p.y)\n",
    "apps/a/tests/test_norm.py": "import unittest\n\nfrom app_a import norm\n"
    "from shapes_types import Point\n\n\nclass T(unittest.TestCase):\n"
    "    def test_norm(self):\n        self.assertEqual(norm(Point(3, -4)), 7)\n",
    "apps/b/pyproject.toml": '[project]\nname = "app-b"\nversion = "0"\n'
    'dependencies = ["shapes-types"]\n\n[tool.uv.sources]\nshapes-types = {workspace = true}\n',
    APP_B: FLIP,
    "apps/b/tests/test_flip.py": "import unittest\n\nfrom app_b import flip\n"
    "from shapes_types import Point\n\n\nclass T(unittest.TestCase):\n"
    "    def test_flip(self):\n        self.assertEqual(flip(Point(1, 2)), Point(2, 1))\n",
}


@pytest.fixture(autouse=True)
def real_parts(api_keys: None) -> None:
    require_sandbox()


def workspace(tmp_path: Path, url: str, config: str = CONFIG, workflow: str = WORKFLOW) -> Path:
    repo = new_repo(tmp_path, url, config)
    write_workflow(repo, workflow)
    for path, content in FILES.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(content)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "a uv workspace: shared types and two apps")
    return repo


def rewrites(when: str, path: str, content: str) -> dict[str, Any]:
    report = {"status": "SUCCESS", "summary": f"changed {path}", "files_modified": [path]}
    return {
        "when": when,
        "turns": [
            {"tool_use": {"name": "Read", "input": {"file_path": path}}},
            {"tool_use": {"name": "Write", "input": {"file_path": path, "content": content}}},
            {"text": "Done.\n" + fenced(report)},
        ],
    }


def test_a_change_to_shared_types_that_breaks_an_app_is_caught_by_that_apps_gate(
    tmp_path: Path, serve: Any
) -> None:
    server = serve(
        planner(plan(component("point-z", "types", [TYPES]))),
        # the second attempt (the breakage fed back) keeps the apps' two-argument Points
        rewrites("gated because: depends on types", TYPES, POINT_3D),
        rewrites("one component of the plan: 'point-z'", TYPES, POINT_3D_BREAKING),
    )
    repo = workspace(tmp_path, server.url)

    wf = tasks.start_task("Give Point a z coordinate", repo)

    assert wf.status == "completed"
    assert git(repo, "show", f"{wf.task_branch}:{TYPES}") == POINT_3D
    first, second = gated(repo, wf.id)
    assert first == [
        ("types", f"changed ({TYPES})", True),  # its own tests build Points of two
        ("app-a", "depends on types", False),
        ("app-b", "depends on types", False),
    ]
    assert second == [(p, r, True) for p, r, _ in first]
    steps = gate_steps(repo, wf.id)
    assert ("implement/point-z/test@app-b", "failed") in steps
    assert ("implement/point-z/test@app-b", "passed") in steps
    retry = next(text for text in sent(server) if "gated because" in text)
    assert "missing 1 required positional argument: 'z'" in retry
    assert "Project 'app-b' (apps/b/" in retry
    status = subprocess.run(
        [sys.executable, "-m", "supervisor", "status", str(wf.id), "--repo", str(repo)],
        capture_output=True,
        text=True,
        check=True,
        stdin=subprocess.DEVNULL,
    ).stdout  # a pipe: the plain form
    assert "implement/point-z/test: types passed (changed" in status
    assert "app-b passed (depends on types)" in status
    assert "  project types complete  gates passed" in status


def test_a_change_to_one_app_runs_that_apps_gate_and_no_other_projects(
    tmp_path: Path, serve: Any
) -> None:
    server = serve(
        {  # the planner's session goes on after its plan is sent back with the reason
            "when": "ROLE: planner",
            "turns": [
                {"text": plan(component("scale", "app-bee", [APP_B]))},
                {"text": plan(component("scale", "app-b", [APP_B]))},
            ],
        },
        rewrites("one component of the plan: 'scale'", APP_B, FLIP_AND_SCALE),
    )
    repo = workspace(tmp_path, server.url)

    wf = tasks.start_task("Add scale to app b", repo)

    assert wf.status == "completed"
    assert gated(repo, wf.id) == [[("app-b", f"changed ({APP_B})", True)]]
    assert [step for step, _ in gate_steps(repo, wf.id)] == ["implement/scale/test@app-b"]
    replanned = next(text for text in sent(server) if "not one of this" in text)
    assert "project 'app-bee'" in replanned and "(types, app-a, app-b)" in replanned


@pytest.mark.cli
def test_projects_that_depend_on_each_other_in_a_cycle_stop_the_task_before_it_starts(
    tmp_path: Path, serve: Any
) -> None:
    server = serve()
    cycle = CONFIG.replace(
        "  app-b: {depends_on", "  types: {depends_on: [app-b]}\n  app-b: {depends_on"
    )
    repo = workspace(tmp_path, server.url, cycle)

    ran = subprocess.run(
        [
            sys.executable,
            "-m",
            "supervisor",
            "start-task",
            "anything",
            "--yes",
            "--repo",
            str(repo),
        ],
        capture_output=True,
        text=True,
        env=os.environ.copy(),
        stdin=subprocess.DEVNULL,
        timeout=300,
    )

    assert ran.returncode != 0
    said = " ".join((ran.stdout + ran.stderr).split())  # folded to the terminal's width
    assert "cycle" in said
    assert "types -> app-b -> types" in said or "app-b -> types -> app-b" in said
    assert server.requests == []  # no worker ran
    assert git(repo, "branch", "--format=%(refname:short)").split() == ["main"]


def test_attack_a_worker_writing_into_another_project_is_refused_and_told_whose_it_is(
    tmp_path: Path, serve: Any
) -> None:
    # The app's worker "fixes" the shared types behind their owners' backs (a field only it
    # needs): out of its component's project, refused before its gates; told, it keeps to app-b.
    sneaky = rewrites("one component of the plan: 'scale'", APP_B, FLIP_AND_SCALE)
    sneaky["turns"][2:2] = [
        {"tool_use": {"name": "Read", "input": {"file_path": TYPES}}},
        {"tool_use": {"name": "Write", "input": {"file_path": TYPES, "content": POINT_3D}}},
    ]
    server = serve(
        planner(plan(component("scale", "app-b", [APP_B]))),
        rewrites("(belongs to project types)", APP_B, FLIP_AND_SCALE),
        sneaky,
    )
    final = WORKFLOW.replace("next: commit,", "next: test,") + (
        "    test: {gate: test, next: commit, on_fail: implement}\n"
    )
    repo = workspace(tmp_path, server.url, workflow=final)

    wf = tasks.start_task("Add scale to app b", repo)

    assert wf.status == "completed"
    assert git(repo, "show", f"{wf.task_branch}:{TYPES}") == POINT  # the types untouched
    with tasks.reading(repo) as store:
        refused = [e.payload for e in store.events(wf.id) if e.type == "component_out_of_scope"]
    assert refused == [
        {"component": "scale", "commit": refused[0]["commit"], "files": {TYPES: ["project types"]}}
    ]
    every = "the task's final gate runs every project"
    assert gated(repo, wf.id) == [
        [("app-b", f"changed ({APP_B})", True)],  # the component's gate: its project only
        [("types", every, True), ("app-a", every, True), ("app-b", f"changed ({APP_B})", True)],
    ]
