"""Gates that cannot be emptied or shadowed (issue 24, item 3), the pure parts.

Runner summaries are counted the way the gate step counts them; test files are pinned from a
real git base commit; new modules named after what the test runner imports are refused; the
runner, lint and type configuration of every stack is protected. No Docker, no CLI.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import TYPE_CHECKING

import pytest

from supervisor.core.config import load_settings
from supervisor.gates import test_counts, test_pins
from supervisor.gates.baseline import Baseline, judge
from supervisor.gates.run import GateResult
from supervisor.guard.protected import changed_protected, pin
from supervisor.project import shadowing
from supervisor.workflow.state import WorkflowState

if TYPE_CHECKING:
    from pathlib import Path

# -- counting the tests a runner ran ---------------------------------------------------------

UNITTEST_FAILED = """test_a (test_a.T.test_a) ... ok
----------------------------------------------------------------------
Ran 4 tests in 0.010s

FAILED (failures=1, skipped=1, expected failures=1)
"""
UNITTEST_EMPTY = "\n----------------------------------------------------------------------\nRan 0 tests in 0.000s\n\nOK\n"  # noqa: E501
VITEST = """ ✓ test/index.test.ts (2 tests) 3ms

 Test Files  1 passed (1)
      Tests  2 failed | 3 passed | 1 skipped (6)
   Start at  10:00:00
"""


@pytest.mark.parametrize(
    ("output", "ran"),
    [
        (UNITTEST_FAILED, 2),  # 4 ran, less one skipped and one expected failure
        ("python3 -m unittest -v\n" + UNITTEST_EMPTY, 0),
        ("Ran 1 test in 0.001s\n\nOK (skipped=1)\n", 0),
        ("1 failed, 1 passed, 1 skipped, 1 xfailed in 1.87s\n", 2),
        ("============== 3 passed, 2 warnings in 0.91s ===============\n", 3),
        ("4 deselected in 0.84s\n", 0),
        ("no tests ran in 0.01s\n", 0),
        (VITEST, 5),
        (
            "\x1b[2m      Tests \x1b[22m \x1b[1m\x1b[32m2 passed"
            "\x1b[39m\x1b[22m\x1b[90m (2)\x1b[39m\n",
            2,
        ),
        ("No test files found, exiting with code 0\n", 0),
        ("Tests:       1 failed, 2 skipped, 5 passed, 8 total\nTime: 1 s\n", 6),
        ("No tests found, exiting with code 0\n", 0),
        ("  5 passing (10ms)\n  2 failing\n  1 pending\n", 7),
        ("# tests 3\n# pass 2\n# fail 1\n# skipped 4\n", 3),
        (
            "test result: ok. 5 passed; 0 failed; 1 ignored; 0 measured; 0 filtered out\n"
            "test result: ok. 2 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out\n",
            7,
        ),
        ("=== RUN   TestA\n--- PASS: TestA (0.00s)\n    --- PASS: TestA/sub (0.00s)\nok x\n", 1),
    ],
    ids=[
        "unittest-failed",
        "unittest-empty",
        "unittest-skipped",
        "pytest-q",
        "pytest",
        "pytest-deselected",
        "pytest-none",
        "vitest",
        "vitest-colours",
        "vitest-no-files",
        "jest",
        "jest-none",
        "mocha",
        "node-test",
        "cargo",
        "go-v",
    ],
)
def test_a_runner_summary_counts_only_the_tests_that_really_ran(output: str, ran: int) -> None:
    count = test_counts.count_tests(output)
    assert count is not None and count.ran == ran


def test_a_make_target_running_two_suites_counts_both() -> None:
    count = test_counts.count_tests(UNITTEST_FAILED + "\n3 passed in 0.1s\n")
    assert count is not None and count.ran == 5 and count.runners == ("unittest", "pytest")


@pytest.mark.parametrize(
    "output", ["ok  \texample.com/x\t0.003s\n", "all tests passed\n", "", "Ran 5 tests\n"]
)
def test_output_without_a_known_summary_has_no_count(output: str) -> None:
    assert test_counts.count_tests(output) is None


@pytest.mark.parametrize(
    ("gate", "command", "counted"),
    [
        ("test", "make check", True),
        ("unit", "make test", True),
        ("unit", "python3 -m pytest -q", True),
        ("unit", "pnpm test", True),
        ("unit", "cargo test", True),
        ("unit", "go test ./...", True),
        ("unit", "npx vitest run", True),
        ("lint", "ruff check .", False),
        ("types", "tsc --noEmit -p .", False),
        ("lint", "npm run lint", False),
        ("lint", "eslint --ignore-pattern test-data .", False),
        ("lint", "npx eslint src test", False),
        ("style", "prettier --check test/", False),
        ("unit", "eslint test/", False),
    ],
)
def test_only_gates_that_run_tests_are_counted(gate: str, command: str, counted: bool) -> None:
    assert test_counts.counted(gate, command) is counted


def result(output: str, exit_code: int = 0) -> GateResult:
    return GateResult("test", "make test", exit_code == 0, exit_code, output, 0.1)


def floor(tests: int | None, note: str = "") -> Baseline:
    runners = ["unittest"] if tests is not None else []
    return Baseline(gate="test", command="make test", tests=tests, runners=runners, commit="b")


def test_a_run_with_no_tests_fails_against_the_base_count_with_both_counts() -> None:
    verdict = judge(floor(2), result(UNITTEST_EMPTY))
    assert verdict.problem and "ran 0 tests" in verdict.problem and "ran 2" in verdict.problem
    assert verdict.payload() == {"tests": 0, "base_tests": 2, "count_problem": verdict.problem}


def test_a_run_with_as_many_tests_or_more_passes() -> None:
    assert not judge(floor(2), result("Ran 2 tests in 0.1s\n\nOK\n")).problem
    assert not judge(floor(2), result("Ran 3 tests in 0.1s\n\nOK\n")).problem


def test_a_run_that_prints_no_summary_where_the_base_did_fails() -> None:
    verdict = judge(floor(2), result("all tests passed\n"))
    assert "printed no test summary" in verdict.problem and "ran 2 tests" in verdict.problem


def test_an_unreadable_base_count_is_said_in_the_result_not_hidden() -> None:
    unknown = floor(None).model_copy(update={"note": "the base run printed no test summary"})
    verdict = judge(unknown, result("ok  \tx\t0.1s\n"))
    assert not verdict.problem
    assert "not compared" in verdict.note and "no test summary" in verdict.note
    assert verdict.payload()["count_note"] == verdict.note


# -- pinned test files -----------------------------------------------------------------------

TESTS = "import unittest\n\n\nclass T(unittest.TestCase):\n    def test_a(self):\n        pass\n\n    def test_b(self):\n        pass\n"  # noqa: E501
JS_TESTS = 'import { it, test } from "vitest";\nit("a", () => {});\ntest.each([1])("b", () => {});\n// it("c")\n'  # noqa: E501


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


def commit(repo: Path, files: dict[str, str | None]) -> str:
    for rel, text in files.items():
        path = repo / rel
        if text is None:
            path.unlink()
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "c", "--allow-empty")
    return git(repo, "rev-parse", "HEAD")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    return root


BASE = {
    "calc.py": "x = 1\n",
    "test_calc.py": TESTS,
    "web/sum.test.ts": JS_TESTS,
    "pkg/sum_test.go": "package pkg\n\nfunc TestSum(t *testing.T) {}\n",
    "src/lib.rs": "#[cfg(test)]\nmod tests {\n    #[test]\n    fn a() {}\n}\n",
    "README.md": "test_* files\n",
}


def weakened(
    repo: Path, files: dict[str, str | None], allowed: list[str] | None = None
) -> list[str]:
    base = commit(repo, BASE)
    head = commit(repo, files)
    pins = test_pins.pins_at(repo / ".git", base)
    return test_pins.weakened(repo / ".git", pins, base, head, allowed or [])


def test_the_base_commits_test_files_are_pinned_with_their_test_functions(repo: Path) -> None:
    base = commit(repo, BASE)
    assert test_pins.pins_at(repo / ".git", base) == {
        "test_calc.py": 2,
        "web/sum.test.ts": 2,  # the commented-out test is not one
        "pkg/sum_test.go": 1,
        "src/lib.rs": 1,
    }


@pytest.mark.parametrize(
    ("files", "found"),
    [
        ({"test_calc.py": None}, ["test_calc.py (deleted)"]),
        ({"test_calc.py": ""}, ["test_calc.py (emptied)"]),
        ({"test_calc.py": "\n  \n"}, ["test_calc.py (emptied)"]),
        (
            {"test_calc.py": TESTS.replace("def test_b", "def helper_b")},
            ["test_calc.py (2 test functions, now 1)"],
        ),
        (
            {"test_calc.py": TESTS.replace("    def test_b", "    # def test_b")},
            ["test_calc.py (2 test functions, now 1)"],
        ),
        (
            {"web/sum.test.ts": JS_TESTS.replace('it("a"', '// it("a"')},
            ["web/sum.test.ts (2 test functions, now 1)"],
        ),
        ({"pkg/sum_test.go": "package pkg\n"}, ["pkg/sum_test.go (1 test functions, now 0)"]),
        ({"src/lib.rs": "pub fn a() {}\n"}, ["src/lib.rs (1 test functions, now 0)"]),
        ({"test_calc.py": TESTS + "\n    def test_c(self):\n        pass\n"}, []),
        ({"test_more.py": TESTS, "calc.py": "x = 2\n"}, []),
    ],
    ids=[
        "deleted",
        "emptied",
        "blank",
        "renamed-function",
        "commented-out",
        "js",
        "go",
        "rust",
        "added-function",
        "added-file",
    ],
)
def test_a_candidate_may_add_tests_but_not_delete_empty_or_thin_them(
    repo: Path, files: dict[str, str | None], found: list[str]
) -> None:
    assert weakened(repo, files) == found


def test_a_renamed_test_file_is_named_with_where_it_went(repo: Path) -> None:
    base = commit(repo, BASE)
    git(repo, "mv", "test_calc.py", "calc_checks.py")
    head = commit(repo, {})
    pins = test_pins.pins_at(repo / ".git", base)
    found = test_pins.weakened(repo / ".git", pins, base, head, [])
    assert found == ["test_calc.py (renamed to calc_checks.py)"]


def test_a_task_allowance_lets_a_person_retire_a_test_file(repo: Path) -> None:
    assert weakened(repo, {"test_calc.py": None}, allowed=["test_calc.py"]) == []


def test_tests_a_gate_accepted_raise_the_floor(repo: Path) -> None:
    base = commit(repo, BASE)
    more = TESTS + "\n    def test_c(self):\n        pass\n"
    accepted = commit(repo, {"test_calc.py": more, "tests/test_new.py": TESTS})
    tree = git(repo, "rev-parse", f"{accepted}^{{tree}}")
    pins = test_pins.pins_at(repo / ".git", base)
    proposed = test_pins.proposal(repo / ".git", "test_engineer", accepted, tree, pins)
    assert proposed == {
        "tests_proposed": {"tree": tree, "pins": {"test_calc.py": 3, "tests/test_new.py": 2}}
    }
    assert test_pins.proposal(repo / ".git", "implementer", accepted, tree, pins) == {}
    floor = test_pins.merged(pins, proposed["tests_proposed"]["pins"])
    head = commit(repo, {"test_calc.py": TESTS, "tests/test_new.py": None})
    assert test_pins.weakened(repo / ".git", floor, base, head, []) == [
        "tests/test_new.py (deleted)",
        "test_calc.py (3 test functions, now 2)",
    ]


def test_a_state_from_before_pinned_tests_loads_with_none_added() -> None:
    state = WorkflowState.load({"version": 1, "candidate": "abc"})
    assert state.test_pins == {} and state.tests_proposed is None
    assert "test_pins" not in state.dump()


# -- modules that shadow what the runner imports ---------------------------------------------


@pytest.mark.parametrize(
    "path",
    [
        "argparse.py",
        "difflib.py",
        "pprint.py",
        "signal.py",
        "unittest.py",
        "pytest.py",
        "pluggy/__init__.py",
        "_pytest/__init__.py",
        "json/__init__.py",
        "src/traceback.py",
        "tests/argparse.py",  # tests/ holds test modules and no __init__.py: pytest's path
        "signal.cpython-311-x86_64-linux-gnu.so",
        "distutils/__init__.py",
    ],
)
def test_a_new_module_named_after_a_runner_import_is_refused_with_the_name(path: str) -> None:
    files = ["calc.py", "tests/test_calc.py", path]
    found = shadowing.shadowing([path], files)
    assert len(found) == 1 and found[0].startswith(f"{path} (shadows the module ")


@pytest.mark.parametrize(
    ("path", "files"),
    [
        ("app/json.py", ["app/__init__.py"]),  # inside a package: the package's own module
        ("tests/argparse.py", ["tests/__init__.py", "tests/test_calc.py"]),
        ("test/test_calc.py", []),  # `test` is a common folder, no runner imports the stdlib's
        ("test/__init__.py", []),
        ("calculator.py", []),
        ("argparse.txt", []),
        ("docs/signal.py", []),
    ],
)
def test_names_the_runner_does_not_import_first_are_free(path: str, files: list[str]) -> None:
    assert shadowing.shadowing([path], [*files, path]) == []


def test_every_standard_library_module_of_this_python_is_covered() -> None:
    names = shadowing.shadowed_names()
    assert {"argparse", "difflib", "pprint", "signal", "unittest", "pytest", "pluggy"} <= names
    assert set(sys.stdlib_module_names) - {"test", "this", "antigravity"} <= names


def test_only_modules_new_in_the_candidate_are_refused(repo: Path) -> None:
    base = commit(repo, {"calc.py": "x\n", "signal.py": "# the project's own, long before\n"})
    head = commit(repo, {"signal.py": "# changed\n", "argparse.py": "x\n", "calc.py": "y\n"})
    changed = ["argparse.py", "calc.py", "signal.py"]
    found = shadowing.added_shadows(repo / ".git", base, head, changed, [], [])
    assert found == ["argparse.py (shadows the module argparse)"]
    assert shadowing.added_shadows(repo / ".git", base, head, changed, ["argparse.py"], []) == []
    assert shadowing.added_shadows(repo / ".git", base, head, changed, [], ["argparse.py"]) == []


# -- runner configuration of every stack is protected ---------------------------------------


@pytest.mark.parametrize(
    "path",
    [
        "vite.config.ts",
        "vite.config.mjs",
        "vitest.workspace.ts",
        "vitest.setup.ts",
        "eslint.config.js",
        ".eslintrc.json",
        "tsconfig.json",
        "tsconfig.build.json",
        ".prettierrc",
        ".prettierrc.yaml",
        "prettier.config.cjs",
        "babel.config.js",
        "node_modules/vitest/index.js",
        "packages/a/node_modules/jest/bin/jest.js",
        ".pnp.cjs",
        ".coveragerc",
        "ruff.toml",
        "mypy.ini",
        ".flake8",
        ".golangci.yml",
        "clippy.toml",
    ],
)
def test_runner_lint_and_type_configuration_of_every_stack_is_protected(
    repo: Path, path: str
) -> None:
    base = commit(repo, {"app.py": "x\n"})
    head = commit(repo, {path: "changed\n"})
    assert changed_protected(repo, pin(load_settings(None)), [], base, head, [path]) == [path]


@pytest.mark.parametrize(
    ("file", "before", "after", "found"),
    [
        (
            "Cargo.toml",
            '[package]\nname = "a"\n[dependencies]\nserde = "1"\n',
            '[package]\nname = "a"\n[dependencies]\nserde = "1"\nrand = "0.8"\n',
            [],
        ),
        (
            "Cargo.toml",
            '[package]\nname = "a"\n',
            '[package]\nname = "a"\n[lib]\ntest = false\n',
            ["Cargo.toml (lib)"],
        ),
        (
            "pyproject.toml",
            '[project]\nname = "a"\n',
            '[project]\nname = "a"\n[tool.ruff.lint]\nignore = ["ALL"]\n',
            ["pyproject.toml (tool.ruff)"],
        ),
        (
            "package.json",
            json.dumps({"scripts": {"test": "vitest run"}}),
            json.dumps({"scripts": {"test": "vitest run --passWithNoTests"}}),
            ["package.json (scripts)"],
        ),
        (
            "package.json",
            json.dumps({"name": "a"}),
            json.dumps({"name": "a", "eslintConfig": {"rules": {}}}),
            ["package.json (eslintConfig)"],
        ),
    ],
)
def test_harness_parts_of_shared_manifests_are_compared_parsed(
    repo: Path, file: str, before: str, after: str, found: list[str]
) -> None:
    base = commit(repo, {file: before})
    head = commit(repo, {file: after})
    assert changed_protected(repo, pin(load_settings(None)), [], base, head, [file]) == found
