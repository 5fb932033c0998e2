"""Real projects, as a new user brings them: a setup.py package with a PyPI dependency and a pnpm
TypeScript project with a vitest suite (tests/fixtures). Detection, the project image (every
declared dependency, the exact lock file, the import smoke test), the project's own default test
command passing offline in the gate, and the interface check by the project's tsc in its image.

The images are built once per module (builds take tens of seconds on a shared machine) and
removed at the end; `BUILD_SECONDS` collects the measured build times (printed with -s)."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from e2e_support import pointed_at, remove_project_images, require_sandbox

from supervisor.context import interfaces
from supervisor.core.config import Limits
from supervisor.core.errors import SandboxError, ToolMissingError
from supervisor.gates.run import run_gate
from supervisor.lifecycle import image_commands, tasks
from supervisor.lifecycle.gate_check import check_gates
from supervisor.lifecycle.initialize import InitReport, initialize
from supervisor.sandbox.docker import DockerSandbox

if TYPE_CHECKING:
    from collections.abc import Iterator

# One xdist process for the whole file: its module fixtures build two project images, and its
# last spec commits to the shared fixture repository.
pytestmark = [pytest.mark.docker, pytest.mark.xdist_group("real_projects")]
FIXTURES = Path(__file__).parent / "fixtures"
IMAGE = "supervisor-sandbox:latest"
BUILD_SECONDS: dict[str, float] = {}


def checkout(fixture: str, root: Path) -> Path:
    """The fixture as a fresh git repository (one commit), as a user's clone would be."""
    repo = root / fixture
    shutil.copytree(FIXTURES / fixture, repo)
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q", "-b", "main"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "upstream"], check=True)
    return repo


def commit_all(repo: Path, message: str) -> None:
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "commit", "-qam", message], check=True)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    require_sandbox()
    root = tmp_path_factory.mktemp("real")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SUPERVISOR_USER_DIR", str(root / "user"))
        yield root
    remove_project_images(root)
    print(f"\nproject image build times: {BUILD_SECONDS}")


def built(repo: Path, name: str) -> tuple[str, InitReport]:
    """`init` as a user runs it: detection, the Dockerfile, the image build (with its smoke
    test) and each detected gate run once on the untouched project, then the config."""
    started = time.monotonic()
    report = initialize(repo, check=check_gates)
    BUILD_SECONDS[name] = round(time.monotonic() - started, 1)
    tag, seconds = image_commands.sandbox_build(repo)
    assert seconds is None  # init built it; unchanged, so reused
    return tag, report


@pytest.fixture(scope="module")
def slugger(workdir: Path) -> tuple[Path, str]:
    repo = checkout("py_slugger", workdir)
    tag, report = built(repo, "py_slugger init (build + gates)")
    assert report.gate_checks["test"].passed, report.gate_checks
    return repo, tag


@pytest.fixture(scope="module")
def ts_init(workdir: Path) -> tuple[Path, str, InitReport]:
    repo = checkout("ts_vitest", workdir)
    return (repo, *built(repo, "ts_vitest init (build + gates)"))


@pytest.fixture(scope="module")
def tiny_ts(ts_init: tuple[Path, str, InitReport]) -> tuple[Path, str]:
    return ts_init[0], ts_init[1]


@pytest.fixture(scope="module")
def sandbox() -> Iterator[DockerSandbox]:
    box = DockerSandbox(IMAGE, "supervisor-egress-test")
    yield box
    box.close()


def gate(sandbox: DockerSandbox, repo: Path, command: str, image: str) -> Any:
    """The gate on a copy of the checkout, as the engine runs it on a worktree: a sandbox gets
    ownership of what it mounts, and a repository's own root and .git must keep their owner."""
    with tempfile.TemporaryDirectory(prefix="gate-") as tmp:
        tree = Path(tmp) / "tree"
        shutil.copytree(repo, tree, symlinks=True, ignore=shutil.ignore_patterns(".git"))
        labels = {"supervisor.test": "1"}
        return run_gate(sandbox, "test", command, tree, Limits(), labels, image=image)


def configured_gates(repo: Path) -> dict[str, str]:
    return tasks.open_project(repo).settings.gates


def test_setup_py_dependencies_are_installed_and_the_default_gate_passes_offline(
    slugger: tuple[Path, str], sandbox: DockerSandbox
) -> None:
    repo, tag = slugger
    assert configured_gates(repo) == {"test": "python3 -m pytest -q"}  # detected by init
    result = gate(sandbox, repo, configured_gates(repo)["test"], tag)
    assert result.passed, result.output
    assert "2 passed" in result.output
    # the dependency came from setup.py's install_requires, read without running setup.py
    probe = gate(sandbox, repo, "python3 -c 'import text_unidecode, unidecode'", tag)
    assert probe.passed, probe.output


def test_a_dependency_missing_from_setup_py_fails_the_build_naming_the_module(
    workdir: Path,
) -> None:
    repo = checkout("py_slugger", workdir / "undeclared")
    setup = repo / "setup.py"
    setup.write_text(setup.read_text().replace('["text-unidecode>=1.3"]', "[]"))
    commit_all(repo, "forget the dependency")
    image_commands.sandbox_init(repo)
    with pytest.raises(SandboxError, match="lacks the module 'text_unidecode'") as info:
        image_commands.sandbox_build(repo)
    assert "import slugger" in info.value.message
    assert "install_requires" in info.value.hint
    import docker

    leftover = docker.from_env().images.list(filters={"label": f"supervisor.project={repo}"})
    assert leftover == []  # the failed image is dropped, so the next build tries again


def test_the_pnpm_project_installs_its_lock_file_and_its_default_test_passes_offline(
    tiny_ts: tuple[Path, str], sandbox: DockerSandbox
) -> None:
    repo, tag = tiny_ts
    assert configured_gates(repo)["test"] == "pnpm test"
    dockerfile = (repo / ".supervisor" / "sandbox" / "Dockerfile").read_text()
    assert "pnpm@9.15.0" in dockerfile and "--frozen-lockfile" in dockerfile
    result = gate(sandbox, repo, "pnpm test", tag)
    assert result.passed, result.output
    assert "Tests  2 passed" in result.output
    locked = gate(
        sandbox, repo, "node -p \"require('/node_modules/vitest/package.json').version\"", tag
    )
    assert locked.output.strip() == "2.1.8"  # exactly the lock file's version


def test_tools_may_write_next_to_their_packages_in_the_gate_and_nothing_persists(
    tiny_ts: tuple[Path, str], sandbox: DockerSandbox
) -> None:
    repo, tag = tiny_ts
    writes = (
        "touch /node_modules/vitest/dist/tsconfig.tmp.tsbuildinfo && "
        'mkdir -p "$XDG_CACHE_HOME/x" "$npm_config_cache" && echo wrote'
    )
    first = gate(sandbox, repo, writes, tag)
    assert first.passed, first.output
    second = gate(
        sandbox, repo, "test ! -e /node_modules/vitest/dist/tsconfig.tmp.tsbuildinfo", tag
    )
    assert second.passed, "a gate's writes must not outlive its container"
    offline = gate(
        sandbox,
        repo,
        "node -e \"fetch('https://registry.npmjs.org').then(()=>process.exit(0),()=>process.exit(3))\"",
        tag,
    )
    assert offline.exit_code == 3  # still no network


def test_the_interface_check_runs_the_projects_tsc_in_its_image(
    tiny_ts: tuple[Path, str], sandbox: DockerSandbox
) -> None:
    repo, tag = tiny_ts
    api = repo / "src" / "api.ts"
    try:
        api.write_text("export declare function load(): Promise<NoSuchType>;\n")
        problems = interfaces.compile_errors(repo, repo, ["src/api.ts"], sandbox, tag)
        assert problems is not None and "NoSuchType" in problems
        api.write_text(
            "import type { Range } from './index';\n\n"
            "export declare function load(): Promise<Range>;\n"
        )
        assert interfaces.compile_errors(repo, repo, ["src/api.ts"], sandbox, tag) is None
    finally:
        api.unlink()


def test_an_interface_with_no_compiler_in_the_image_is_an_error(
    tiny_ts: tuple[Path, str], sandbox: DockerSandbox
) -> None:
    repo, _ = tiny_ts
    with pytest.raises(ToolMissingError, match="no `tsc`") as info:
        interfaces.compile_errors(repo, repo, ["src/index.ts"], sandbox, None)  # the base image
    assert "typescript" in info.value.hint


def test_init_keeps_the_gates_that_pass_on_the_untouched_project(
    ts_init: tuple[Path, str, InitReport],
) -> None:
    repo, _, report = ts_init
    checks = report.gate_checks
    assert checks["test"].passed and checks["types"].passed, checks
    assert not checks["lint"].passed and not checks["lint"].runnable  # prettier is not installed
    assert configured_gates(repo) == {"test": "pnpm test", "types": "pnpm run typecheck"}
    config = (repo / ".supervisor" / "config.yaml").read_text()
    assert (
        "Left out, failing on the untouched project (exit 1: sh: 1: prettier: not found)" in config
    )
    assert "#   gates: {lint: 'pnpm run lint'}" in config


def test_an_interface_hidden_from_the_tsconfig_is_still_compiled(
    tiny_ts: tuple[Path, str], sandbox: DockerSandbox, tmp_path: Path
) -> None:
    """Attack: the tech lead's answer leaves its interface outside what tsconfig includes (or
    rewrites tsconfig.json) so that tsc never looks at the broken type."""
    repo, tag = tiny_ts
    tree = tmp_path / "candidate"
    shutil.copytree(repo, tree, ignore=shutil.ignore_patterns(".git", ".supervisor"))
    (tree / "contracts").mkdir()
    (tree / "contracts" / "api.ts").write_text(
        "export declare function load(): Promise<NoSuchType>;\n"
    )
    problems = interfaces.compile_errors(repo, tree, ["contracts/api.ts"], sandbox, tag)
    assert problems is not None and "NoSuchType" in problems  # not in include: ["src", "test"]
    config = tree / "tsconfig.json"
    config.write_text(config.read_text().replace('"strict": true', '"strict": false'))
    problems = interfaces.compile_errors(
        repo, tree, ["contracts/api.ts", "tsconfig.json"], sandbox, tag
    )
    assert problems is not None and "changed the compiler configuration" in problems


# -- a task on the real package, end to end ------------------------------------------------------

FIXED = "    ascii_text = unidecode(text).lower()\n"
BROKEN = "    ascii_text = unidecode(text)\n"  # upper case survives: test_ascii fails
STILL_BROKEN = "    ascii_text = text.lower()\n"  # accents are dropped: test_accents fails


def _slugger_worker(content: str, when: str) -> dict[str, Any]:
    from supervisor.lifecycle.demo import fenced

    answer = {
        "status": "SUCCESS",
        "summary": "slugify lower-cases again",
        "files_created": [],
        "files_modified": ["slugger/__init__.py"],
        "tests_written": [],
        "blockers": [],
    }
    return {
        "when": when,
        "turns": [
            {"tool_use": {"name": "Read", "input": {"file_path": "slugger/__init__.py"}}},
            {
                "tool_use": {
                    "name": "Write",
                    "input": {"file_path": "slugger/__init__.py", "content": content},
                }
            },
            {"text": "Done.\n" + fenced(answer)},
        ],
    }


def test_a_task_on_the_setup_py_package_lands_only_the_gated_fix(
    slugger: tuple[Path, str], serve: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 11 as a user meets it: a real setup.py package with a PyPI dependency, its test gate
    found by init (pytest), a function broken upstream; the worker's first fix still fails the
    gate, its second passes. The task branch then holds one commit, of the tree that passed, and
    the failed attempt only under refs/supervisor/. Runs last in this module: it commits to the
    shared fixture repository and puts it back afterwards."""
    from e2e_support import planner, reviewer

    from supervisor.guard.trust import trust
    from supervisor.lifecycle.demo import fenced

    repo, _ = slugger
    source = repo / "slugger" / "__init__.py"
    upstream = source.read_text()
    head = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert FIXED in upstream
    source.write_text(upstream.replace(FIXED, BROKEN))
    commit_all(repo, "break slugify")
    config = repo / ".supervisor" / "config.yaml"
    before = config.read_text()
    try:
        plan = {
            "status": "COMPLETE",
            "summary": "fix slugify",
            "phases": [
                {
                    "id": "p1",
                    "description": "fix",
                    "components": [
                        {
                            "id": "slugify",
                            "description": "lower-case the transliterated text",
                            "files": ["slugger/__init__.py"],
                            "depends_on": [],
                        }
                    ],
                }
            ],
            "estimated_components": 1,
        }
        still_broken = upstream.replace(FIXED, STILL_BROKEN)
        server = serve(
            planner("Plan:\n" + fenced(plan)),
            _slugger_worker(still_broken, "ROLE: implementer"),
            _slugger_worker(upstream, "FEEDBACK FROM THE PREVIOUS ATTEMPT"),
            {**reviewer(), "repeat": True},
        )
        for key in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY"):
            monkeypatch.setenv(key, "test-key")
        config.write_text(pointed_at(before, server.url))
        trust(repo)
        assert configured_gates(repo) == {"test": "python3 -m pytest -q"}  # found, not assumed

        wf = tasks.start_task("Make slugify lower-case its result again", repo)

        assert wf.status == "completed"
        git = ["git", "-C", str(repo)]

        def out(*args: str) -> str:
            return subprocess.run([*git, *args], capture_output=True, text=True, check=True).stdout

        reachable = out("rev-list", f"{wf.base_sha}..{wf.task_branch}").split()
        assert len(reachable) == 1  # one commit: the task, as it passed
        with tasks.reading(repo) as store:
            gates = [e for e in store.events(wf.id) if e.type == "gate"]
        assert [e.status for e in gates] == ["failed", "passed"]
        failed_tree = out("rev-parse", f"{gates[0].payload['commit']}^{{tree}}").strip()
        passed_tree = out("rev-parse", f"{gates[1].payload['commit']}^{{tree}}").strip()
        assert out("rev-parse", f"{wf.task_branch}^{{tree}}").strip() == passed_tree
        attempts = out("for-each-ref", "--format=%(objectname)", f"refs/supervisor/wf{wf.id}/")
        kept = {out("rev-parse", f"{c}^{{tree}}").strip() for c in attempts.split()}
        assert failed_tree in kept  # the failed attempt stays inspectable, off the branch
        assert "Gates passed: test" in out("log", "-1", "--format=%B", wf.task_branch)
        assert (
            "3 passed" in gates[1].payload["output_tail"]
            or "passed" in gates[1].payload["output_tail"]
        )
        # The gate ran in the project image, whose smoke test imported the package offline:
        # text_unidecode (declared only in setup.py) was there, or no test could have passed.
        assert out("show", f"{wf.task_branch}:slugger/__init__.py") == upstream
    finally:
        config.write_text(before)
        subprocess.run([*["git", "-C", str(repo)], "reset", "-q", "--hard", head], check=True)


def test_a_pytest_suite_rewritten_to_pass_broken_code_waits_for_a_person(
    slugger: tuple[Path, str], serve: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 49 on pytest: the worker leaves slugify broken, marks the failing tests xfail and
    adds two trivial ones (the count of tests that ran stays 2). pytest's own run passes; the
    base's test file, put back beside the broken code, fails: the run stops for a person.
    Commits to the shared fixture repository and puts it back afterwards, as the spec above."""
    from e2e_support import planner, reviewer

    from supervisor.core.errors import ApprovalRequired
    from supervisor.guard.trust import trust
    from supervisor.lifecycle.demo import fenced

    repo, _ = slugger
    source = repo / "slugger" / "__init__.py"
    tests_file = "tests/test_slugger.py"
    upstream = source.read_text()
    original_tests = (repo / tests_file).read_text()
    head = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    source.write_text(upstream.replace(FIXED, BROKEN))
    commit_all(repo, "break slugify")
    rigged = (
        "import pytest\n"
        + original_tests.replace("    def test_", "    @pytest.mark.xfail\n    def test_")
        + "\n\ndef test_slugify_returns_text():\n    assert isinstance('x', str)\n"
        + "\n\ndef test_slugify_is_callable():\n    assert callable(len)\n"
    )
    plan = {
        "status": "COMPLETE",
        "summary": "fix slugify",
        "phases": [
            {
                "id": "p1",
                "description": "fix",
                "components": [
                    {"id": "slugify", "description": "fix it", "files": ["slugger/__init__.py"]}
                ],
            }
        ],
        "estimated_components": 1,
    }
    cheat = {
        "when": "ROLE: implementer",
        "turns": [
            {"tool_use": {"name": "Read", "input": {"file_path": tests_file}}},
            {"tool_use": {"name": "Write", "input": {"file_path": tests_file, "content": rigged}}},
            {"text": "Done.\n" + fenced({"status": "SUCCESS", "files_modified": [tests_file]})},
        ],
    }
    config = repo / ".supervisor" / "config.yaml"
    before = config.read_text()
    try:
        server = serve(planner("Plan:\n" + fenced(plan)), cheat, {**reviewer(), "repeat": True})
        for key in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY"):
            monkeypatch.setenv(key, "test-key")
        config.write_text(pointed_at(before, server.url))
        trust(repo)

        with pytest.raises(ApprovalRequired):
            tasks.start_task("Make slugify lower-case its result again", repo)

        wf = tasks.workflows(repo)[-1]
        assert wf.status == "awaiting_approval"
        with tasks.reading(repo) as store:
            events = store.events(wf.id)
        gates = [e for e in events if e.type == "gate"]
        assert [g.status for g in gates] == ["passed"]  # pytest's own run, on the rigged file
        assert "xfailed" in gates[0].payload["output_tail"]
        oracle = [e for e in events if e.type == "base_oracle"]
        assert [o.status for o in oracle] == ["failed"]
        assert oracle[0].payload["changed"] == [f"{tests_file} (modified)"]
        assert "test_ascii" in oracle[0].payload["failing"]
        assert any("xfail" in s for s in oracle[0].payload["signals"])
        tip = subprocess.run(
            ["git", "-C", str(repo), "rev-parse", wf.task_branch], capture_output=True, text=True
        ).stdout.strip()
        assert tip == wf.base_sha
    finally:
        config.write_text(before)
        subprocess.run([*["git", "-C", str(repo)], "reset", "-q", "--hard", head], check=True)
