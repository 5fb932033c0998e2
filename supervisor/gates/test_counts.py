"""How many tests a gate ran, read from the test runner's own summary.

Why: a gate's exit code says only that nothing failed. A suite whose tests were deleted, skipped
or no longer collected (an emptied test file, a runner configuration that includes nothing,
`passWithNoTests`) also exits 0: "Ran 0 tests … OK". So a test gate records how many tests ran
on the task's base commit and a candidate that runs fewer fails (workflow/steps/gate.py).

Only tests that really ran count: skipped, expected-failure (xfail), todo and deselected tests
do not, so marking tests skipped weakens the count like deleting them. Every summary line of
every runner the project's gates support is read and summed (a `make test` may run several
suites). A count is only as honest as the output: code under test can print a fake summary, so
this is one layer next to pinned test files (supervisor/gates/test_pins.py), not a proof.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")
COUNTED_COMMAND = re.compile(
    r"(?<![\w-])(test|pytest|unittest|vitest|jest|mocha|ava|tap|nose2?|tox|nox|ctest)(?![\w/.-])"
)
NOT_COUNTED = ("lint", "type", "format", "fmt", "style")
"""A gate whose command (or name) says it runs tests is counted; lint and type checks are not."""


@dataclass(frozen=True)
class TestCount:
    """Tests that ran (passed or failed) and which runners' summaries said so."""

    __test__ = False  # not a pytest test class, despite the name

    ran: int
    runners: tuple[str, ...]

    def describe(self) -> str:
        return f"{self.ran} test{'s' if self.ran != 1 else ''} ({', '.join(self.runners)})"


def counted(gate: str, command: str) -> bool:
    """Whether this gate runs a test suite, so its number of tests must not drop."""
    if gate.startswith("test"):
        return True
    return not gate.startswith(NOT_COUNTED) and bool(COUNTED_COMMAND.search(command))


def _numbers(text: str) -> dict[str, int]:
    """{"passed": 3, "failed": 1, …} from "3 passed, 1 failed" or "3 passed | 1 failed"."""
    found: dict[str, int] = {}
    for number, word in re.findall(r"(\d+)\s+([a-z][a-z ]*?)(?=\s*(?:[,|;()]|$|\bin\b))", text):
        found[word.strip()] = found.get(word.strip(), 0) + int(number)
    return found


def _unittest(text: str) -> int | None:
    """`Ran N tests in 0.01s` then `OK (skipped=1, expected failures=1)` or `FAILED (…)`."""
    total = None
    for match in re.finditer(
        r"^Ran (\d+) tests? in [^\n]*\n(?:\s*\n)*(?:OK|FAILED|NO TESTS RAN)[ \t]*(\(([^)\n]*)\))?",
        text,
        re.M,
    ):
        ran = int(match.group(1))
        details = {k.strip(): v for k, v in re.findall(r"([a-z ]+)=(\d+)", match.group(3) or "")}
        ran -= sum(int(details.get(k, 0)) for k in ("skipped", "expected failures"))
        total = (total or 0) + max(ran, 0)
    return total


def _pytest(text: str) -> int | None:
    """`=== 3 passed, 1 skipped in 0.1s ===`, or with -q `3 passed in 0.1s`; also
    `no tests ran in 0.01s` and `5 deselected in …`."""
    total = None
    pattern = r"^=*\s*((?:\d+ [a-z]+(?:, )?)+|no tests ran) in [\d.]+s(?: \([^)]*\))?\s*=*\s*$"
    for match in re.finditer(pattern, text, re.M):
        numbers = _numbers(match.group(1))
        ran = sum(numbers.get(k, 0) for k in ("passed", "failed", "error", "errors", "xpassed"))
        total = (total or 0) + ran
    return total


def _vitest(text: str) -> int | None:
    """`      Tests  2 failed | 3 passed | 1 skipped (6)`; "No test files found" is 0."""
    total = None
    for match in re.finditer(r"^\s*Tests\s{2,}(.*)\((\d+)\)\s*$", text, re.M):
        numbers = _numbers(match.group(1))
        total = (total or 0) + numbers.get("passed", 0) + numbers.get("failed", 0)
    if total is None and re.search(r"^No test files found", text, re.M):
        return 0
    return total


def _jest(text: str) -> int | None:
    """`Tests:       1 failed, 2 skipped, 5 passed, 8 total`; "No tests found" is 0."""
    total = None
    for match in re.finditer(r"^Tests:\s+(.*total)\s*$", text, re.M):
        numbers = _numbers(match.group(1))
        total = (total or 0) + numbers.get("passed", 0) + numbers.get("failed", 0)
    if total is None and re.search(r"^No tests found", text, re.M):
        return 0
    return total


def _mocha(text: str) -> int | None:
    """`  5 passing (10ms)` and `  2 failing`."""
    passing = re.findall(r"^\s+(\d+) passing \(", text, re.M)
    if not passing:
        return None
    failing = re.findall(r"^\s+(\d+) failing\s*$", text, re.M)
    return sum(map(int, passing)) + sum(map(int, failing))


def _node_test(text: str) -> int | None:
    """node --test: `# pass 5` / `# fail 0` (TAP) or `ℹ pass 5` (spec reporter)."""
    passed = re.findall(r"^[#ℹ] pass (\d+)\s*$", text, re.M)
    if not passed:
        return None
    failed = re.findall(r"^[#ℹ] fail (\d+)\s*$", text, re.M)
    return sum(map(int, passed)) + sum(map(int, failed))


def _cargo(text: str) -> int | None:
    """`test result: ok. 5 passed; 0 failed; 1 ignored; 0 measured; 0 filtered out; …`, once
    per test binary."""
    found = re.findall(r"^test result: \w+\. (\d+) passed; (\d+) failed;", text, re.M)
    return sum(int(p) + int(f) for p, f in found) if found else None


def _go(text: str) -> int | None:
    """`go test -v`: one `--- PASS: TestX` / `--- FAIL: TestX` per top-level test (subtests
    are indented). Without -v go prints no test count, so None."""
    found = re.findall(r"^--- (?:PASS|FAIL): \S+", text, re.M)
    return len(found) if found else None


PARSERS = {
    "unittest": _unittest,
    "pytest": _pytest,
    "vitest": _vitest,
    "jest": _jest,
    "mocha": _mocha,
    "node:test": _node_test,
    "cargo test": _cargo,
    "go test -v": _go,
}


def count_tests(output: str) -> TestCount | None:
    """The tests that ran, summed over every runner summary in `output`; None when no runner
    this module knows printed a summary (then the count cannot be compared)."""
    text = ANSI.sub("", output).replace("\r\n", "\n")
    ran = 0
    runners: list[str] = []
    for name, parse in PARSERS.items():
        number = parse(text)
        if number is not None:
            ran += number
            runners.append(name)
    return TestCount(ran, tuple(runners)) if runners else None
