"""Every step of the shipped workflow templates, end to end on a real TypeScript project, delivers
the fix (the templates whose steps differ: see TEMPLATES).

The pnpm/vitest fixture (tests/fixtures/ts_vitest) with `clamp` broken, set up as a user would:
`init` detects it, builds its project image from the lock file (pnpm, offline afterwards) and
keeps the gates that pass on the untouched project (`pnpm test`, `pnpm run typecheck`); the
templates' `lint` step runs the compiler. Scripted workers (the implementer fixes clamp, the tech
lead adds a type, the test engineer a vitest test, every reviewer approves) drive the real CLI
of the pipeline specs (e2e_support.CLI: which CLI runs is not what these specify) in the real
sandbox. Whatever the template's steps, the project's own default test command (`pnpm test`,
i.e. `vitest run --typecheck`) passes on the final branch tip, run offline in the project's
image, and the branch holds one commit, of a tree that passed every gate. Each template's wall
time is printed (run with `-s` to see it)."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import pytest
import run_once
from e2e_support import (
    API_PATH,
    CLI,
    IMAGE,
    planner,
    remove_project_image,
    require_sandbox,
    reviewer,
    run_to_the_end,
    writes,
)

from supervisor.core.config import Limits
from supervisor.gates.run import GateResult, run_gate
from supervisor.guard.trust import trust
from supervisor.lifecycle import image_commands, tasks
from supervisor.lifecycle.demo import fenced
from supervisor.lifecycle.gate_check import check_gates
from supervisor.lifecycle.initialize import initialize
from supervisor.project import project_image
from supervisor.sandbox.docker import DockerSandbox

if TYPE_CHECKING:
    from collections.abc import Iterator

pytestmark = pytest.mark.docker
# The template specs and test_attacks_gates_ts share one project image, built once per run (see
# `project`), and run in two xdist groups of about equal length (benchmarks/test-durations.md), so
# two processes share the work: one builds the image while the other waits for it.
GROUP_A = pytest.mark.xdist_group("ts_project")
GROUP_B = pytest.mark.xdist_group("ts_project_2")
FIXTURE = Path(__file__).parent / "fixtures" / "ts_vitest"
TASK = "Fix clamp in src/index.ts"
TEMPLATES = [
    pytest.param("_base", marks=GROUP_B),
    pytest.param("mvp", marks=GROUP_B),
    pytest.param("security_critical", marks=GROUP_A),
]
"""Every template whose steps differ: security_critical extends enterprise, which extends
open_source, so its run has every step of theirs (the test engineer, the lint gate, the security
review, the interfaces) and more. All five run on the Python project
(tests/test_templates_e2e.py); here each of the other two cost about as much again as
security_critical on the 2-core machine, whose CPU bounds the suite
(benchmarks/test-durations.md)."""
SOURCE = "src/index.ts"
FIXED = (FIXTURE / SOURCE).read_text()
CORRECT = "return Math.min(Math.max(value, range.start), range.end);"
BROKEN = FIXED.replace(CORRECT, "return Math.max(Math.min(value, range.start), range.end);")
TYPES = "export type Bounds = readonly [start: number, end: number];\n"
MORE_TESTS = """import { expect, it } from "vitest";
import { clamp } from "../src/index";

it("keeps a value that is already an end of the range", () => {
  expect(clamp(10, { start: 0, end: 10 })).toBe(10);
});
"""
PLAN = {
    "status": "COMPLETE",
    "summary": "Fix clamp; the existing vitest suite covers it.",
    "phases": [
        {
            "id": "p1",
            "description": "Fix clamp",
            "components": [{"id": "clamp", "description": "clamp a value", "files": [SOURCE]}],
        }
    ],
    "dependencies": [],
    "estimated_components": 1,
    "risks": [],
}
WALL_SECONDS: dict[str, float] = {}


class Project(NamedTuple):
    repo: Path
    pristine: Path
    image: str
    test_command: str


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def build_shared(shared: Path, sandbox: DockerSandbox) -> None:
    """What the first process of the run makes, under the run's lock: `init` run on the
    fixture (image built, gates checked on the untouched project), then clamp broken by a
    commit, its tests failing in the image; kept as a pristine copy, marked done."""
    shutil.rmtree(shared / "repo", ignore_errors=True)
    shutil.rmtree(shared / "pristine", ignore_errors=True)
    repo = shared / "repo"
    shutil.copytree(FIXTURE, repo)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "upstream")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SUPERVISOR_USER_DIR", str(shared / "user"))
        report = initialize(repo, check=check_gates)
        assert report.gate_checks["test"].passed, report.gate_checks
        (repo / SOURCE).write_text(BROKEN)  # then a regression lands upstream
        git(repo, "commit", "-qam", "break clamp")
        image, _ = image_commands.sandbox_build(repo)
        test_command = tasks.open_project(repo).settings.gates["test"]
    assert test_command == "pnpm test"  # the project's own default, found by init
    before = project_tests_on(sandbox, repo, "main", test_command, image)
    assert not before.passed and "Tests  1 failed | 1 passed" in before.output, before.output
    shutil.copytree(repo, shared / "pristine", symlinks=True)
    (shared / "done").write_text(image)


def shared_image(shared: Path) -> str:
    """The run's project image, built again if the last process using it removed it and this
    one came later (the same lock file, so the same image)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SUPERVISOR_USER_DIR", str(shared / "user"))
        image, _ = image_commands.sandbox_build(shared / "repo")
    return image


@pytest.fixture(scope="session")
def project(tmp_path_factory: pytest.TempPathFactory, sandbox: DockerSandbox) -> Iterator[Project]:
    """The pnpm project with clamp broken, made once per run (tests/run_once.py) and copied into
    this process's own directory, where its image is the run's image under this checkout's
    name (a tag, not a build): the image is named after the checkout's path and its lock file.
    So the template specs and test_attacks_gates_ts run on several xdist processes, and the
    image is built once, however many of them there are. Each test works on a fresh copy of
    the pristine project at this process's path."""
    require_sandbox()
    shared = run_once.shared_dir(tmp_path_factory, "ts_project")
    with run_once.locked(shared):
        if not (shared / "done").is_file():
            build_shared(shared, sandbox)
        built = shared_image(shared)
        user = run_once.join(shared)
    try:
        root = tmp_path_factory.mktemp("ts_templates")
        repo, pristine = root / "repo", root / "pristine"
        shutil.copytree(shared / "pristine", pristine, symlinks=True)
        shutil.copytree(pristine, repo, symlinks=True)
        base = sandbox.client.images.get(IMAGE)
        wanted = project_image.image_for(repo, repo, str(base.id))
        assert wanted is not None
        name, tag = wanted.tag.split(":")
        assert tag == built.split(":")[1]  # the same Dockerfile and lock file, another path
        sandbox.client.images.get(built).tag(name, tag)
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("SUPERVISOR_USER_DIR", str(root / "user"))
            trust(repo)
            assert image_commands.sandbox_build(repo) == (wanted.tag, None)  # found, not built
        yield Project(repo, pristine, wanted.tag, "pnpm test")
        sandbox.client.images.remove(wanted.tag, noprune=True)
    finally:
        with run_once.locked(shared):
            if run_once.leave(shared, user):  # the last user: the run's image goes too
                remove_project_image(built)
    print(f"\nTypeScript project, wall time per template: {WALL_SECONDS}")


@pytest.fixture(scope="session")
def sandbox() -> Iterator[DockerSandbox]:
    box = DockerSandbox(IMAGE, "supervisor-egress-test")
    yield box
    box.close()


@pytest.fixture(autouse=True)
def real_parts(api_keys: None) -> None:
    require_sandbox()


def workers() -> list[dict[str, Any]]:
    return [
        planner("Plan:\n" + fenced(PLAN)),
        writes("ROLE: tech_lead", "src/types.ts", TYPES),
        writes("ROLE: implementer", SOURCE, FIXED, read=True),
        writes("ROLE: test_engineer", "test/more.test.ts", MORE_TESTS),
        {**reviewer(), "repeat": True},
        {**reviewer(when="ROLE: security_auditor"), "repeat": True},
    ]


def project_tests_on(
    sandbox: DockerSandbox, repo: Path, branch: str, command: str, image: str
) -> GateResult:
    """The project's own test command on `branch`, checked out by git into a fresh directory and
    run in the project's image with no network, as the gate runs it."""
    archive = subprocess.run(
        ["git", "-C", str(repo), "archive", branch], capture_output=True, check=True
    ).stdout
    with tempfile.TemporaryDirectory(prefix="tip-") as tmp:
        subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
        labels = {"supervisor.test": "1"}
        return run_gate(sandbox, "test", command, Path(tmp), Limits(), labels, image=image)


@pytest.mark.parametrize("template", TEMPLATES)
def test_each_template_s_steps_deliver_the_fix_on_the_typescript_project(
    serve: Any, project: Project, sandbox: DockerSandbox, template: str
) -> None:
    repo, pristine = project.repo, project.pristine
    shutil.rmtree(repo, ignore_errors=True)
    shutil.copytree(pristine, repo, symlinks=True)
    server = serve(*workers())
    config = repo / ".supervisor" / "config.yaml"
    text = config.read_text().replace("gates:\n", "gates:\n  lint: pnpm run typecheck\n", 1)
    url = server.url + API_PATH.get(CLI, "")
    text = f"cli: {CLI}\n{text}clis:\n  {CLI}: {{base_url: '{url}'}}\n"
    config.write_text(text + f"workflow: {{template: {template}}}\n")
    trust(repo)
    image, test_command = project.image, project.test_command
    assert image_commands.sandbox_build(repo) == (image, None)  # same lock file: image reused

    started = time.monotonic()
    wf = run_to_the_end(TASK, repo)
    WALL_SECONDS[template] = round(time.monotonic() - started, 1)
    print(f"\ntemplate {template} on the TypeScript project: {WALL_SECONDS[template]} s wall time")

    assert wf.status == "completed"
    after = project_tests_on(sandbox, repo, wf.task_branch, test_command, image)
    assert after.passed, after.output
    if template in ("open_source", "enterprise", "security_critical"):
        assert "Tests  3 passed" in after.output, after.output  # the test engineer's test too
        assert git(repo, "show", f"{wf.task_branch}:test/more.test.ts") == MORE_TESTS
    else:
        assert "Tests  2 passed" in after.output, after.output
    assert git(repo, "show", f"{wf.task_branch}:{SOURCE}") == FIXED
    # One commit on the branch, of a tree every gate passed, naming them and the reviewers.
    commits = git(repo, "rev-list", f"{wf.base_sha}..{wf.task_branch}").split()
    assert len(commits) == 1
    message = git(repo, "log", "-1", "--format=%B", wf.task_branch)
    assert "Gates passed: test" in message
    assert "reviewer" in message
    with tasks.reading(repo) as store:
        events = store.events(wf.id)
    gates = [e for e in events if e.type == "gate" and e.step in ("test", "lint")]
    assert gates and all(e.payload.get("command") != "" for e in gates)
    assert gates[-1].status == "passed"
    committed = [e for e in events if e.type == "commit"][-1]
    assert committed.payload["tree"] == git(repo, "rev-parse", f"{wf.task_branch}^{{tree}}").strip()
