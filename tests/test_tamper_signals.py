"""Signals that a candidate weakened an existing test file (supervisor/gates/test_tamper.py).

Each spec hands `signals` the base's and the candidate's text of one test file, the way a
reviewer's prompt and the approval policy will: pure, no git, no Docker. One spec per shape of
tampering per language (unittest, pytest, vitest/jest in .ts and .js, Go), the changes that must
say nothing (a reformat, a new test, a comment), and hostile input that must never raise.
"""

from __future__ import annotations

from textwrap import dedent

import pytest

from supervisor.gates.test_tamper import MAX_PARSE_BYTES, signals

JS = ("calc.test.ts", "calc.test.js")
UNITTEST = dedent("""
    import unittest

    class TestCalc(unittest.TestCase):
        def test_add(self):
            self.assertEqual(add(2, 3), 5)
            self.assertEqual(add(-1, 1), 0)

        def test_sub(self):
            self.assertEqual(sub(3, 1), 2)
""")
PYTEST = dedent("""
    import pytest

    def test_add():
        assert add(2, 3) == 5
        assert add(-1, 1) == 0
""")
SUITE = dedent("""
    import { describe, expect, it, test } from "vitest";

    describe("calc", () => {
      it("adds", () => {
        expect(add(2, 3)).toBe(5);
        expect(add(-1, 1)).toBe(0);
      });

      test("subs", async () => {
        expect(sub(3, 1)).toEqual(2);
      });
    });
""")
GO = dedent("""
    package calc

    import "testing"

    func TestAdd(t *testing.T) {
    \tif got := Add(2, 3); got != 5 {
    \t\tt.Errorf("Add(2, 3) = %d", got)
    \t}
    \tassert.Equal(t, 0, Add(-1, 1))
    }

    func TestSub(t *testing.T) {
    \tif Sub(3, 1) != 2 {
    \t\tt.Fatal("sub")
    \t}
    }
""")
U_ADD, P_ADD = "self.assertEqual(add(2, 3), 5)", "assert add(2, 3) == 5"
SKIPPED = "now skipped or expected to fail"
FOCUSED = "now focused, the file's other tests stop running"


def edited(path: str, source: str, old: str, new: str) -> list[str]:
    """The signals for `source` with `old` replaced by `new` (which must be there: a spec whose
    edit missed would compare a file with itself and pass for nothing)."""
    assert old in source
    return signals(path, source.encode(), source.replace(old, new).encode())


# --- Python: unittest and pytest ---------------------------------------------------------------


def test_a_removed_python_test_is_named_with_its_class() -> None:
    lines = edited("test_calc.py", UNITTEST, "def test_sub(self):", "def helper(self):")
    assert lines == ["test_calc.py: TestCalc.test_sub removed"]


@pytest.mark.parametrize(
    ("source", "decorator"),
    [
        (UNITTEST, '@unittest.skip("flaky")'),
        (UNITTEST, "@unittest.expectedFailure"),
        (PYTEST, '@pytest.mark.skip(reason="later")'),
        (PYTEST, "@pytest.mark.skipif(True, reason='x')"),
        (PYTEST, "@pytest.mark.xfail"),
    ],
)
def test_a_skip_or_xfail_decorator_added_to_a_python_test(source: str, decorator: str) -> None:
    indent, name = ("    ", "TestCalc.test_add") if "class" in source else ("", "test_add")
    old = f"{indent}def test_add"
    lines = edited("test_calc.py", source, old, f"{indent}{decorator}\n{old}")
    assert lines == [f"test_calc.py: {name}: {SKIPPED} ({decorator.split('(')[0]})"]


@pytest.mark.parametrize(
    ("source", "old", "call"),
    [(UNITTEST, U_ADD, "self.skipTest('x')"), (PYTEST, P_ADD, "pytest.skip()")],
)
def test_a_skip_call_added_inside_a_python_test(source: str, old: str, call: str) -> None:
    indent, name = (" " * 8, "TestCalc.test_add") if "class" in source else (" " * 4, "test_add")
    lines = edited("test_calc.py", source, old, f"{call}\n{indent}{old}")
    assert lines == [f"test_calc.py: {name}: {SKIPPED} ({call.split('(')[0]}())"]


def test_a_class_or_module_level_skip_marks_every_test_under_it() -> None:
    lines = edited("test_calc.py", UNITTEST, "class", '@unittest.skip("wip")\nclass')
    assert lines == [
        f"test_calc.py: TestCalc.test_add: {SKIPPED} (@unittest.skip)",
        f"test_calc.py: TestCalc.test_sub: {SKIPPED} (@unittest.skip)",
    ]
    lines = edited(
        "test_calc.py", PYTEST, "import pytest", "import pytest\npytestmark = pytest.mark.skip"
    )
    assert lines == [f"test_calc.py: test_add: {SKIPPED} (pytestmark = pytest.mark.skip)"]


@pytest.mark.parametrize(
    ("source", "dropped"),
    [
        (UNITTEST, "        self.assertEqual(add(-1, 1), 0)\n"),
        (PYTEST, "    assert add(-1, 1) == 0\n"),
    ],
)
def test_a_dropped_assertion_is_counted(source: str, dropped: str) -> None:
    name = "TestCalc.test_add" if "class" in source else "test_add"
    assert edited("test_calc.py", source, dropped, "") == [
        f"test_calc.py: {name}: 2 assertions, now 1"
    ]


CONSTANTS = "compares constants"
ITSELF = "compares an expression with itself"


@pytest.mark.parametrize(
    ("source", "old", "new", "why"),
    [
        (UNITTEST, U_ADD, "self.assertEqual(5, 5)", CONSTANTS),
        (UNITTEST, U_ADD, "self.assertTrue(True)", CONSTANTS),
        (PYTEST, P_ADD, "assert 1 == 1", CONSTANTS),
        (PYTEST, P_ADD, "assert True", CONSTANTS),
        (PYTEST, P_ADD, "assert add(2, 3) == add(2, 3)", ITSELF),
    ],
)
def test_an_assertion_that_can_no_longer_fail(source: str, old: str, new: str, why: str) -> None:
    (line,) = edited("test_calc.py", source, old, new)
    assert line.endswith(f"test_add: assertion now {why} ({new.removeprefix('self.')})")


@pytest.mark.parametrize(
    ("wrapped", "how"),
    [
        ("try:\n        {}\n    except AssertionError:\n        pass", "try/except AssertionError"),
        ("try:\n        {}\n    except Exception:\n        print(1)", "try/except Exception"),
        ("try:\n        {}\n    except:\n        pass", "try/except"),
        ("with suppress(AssertionError):\n        {}", "suppress(AssertionError)"),
        ("try:\n        {}\n    except AssertionError:\n        raise", None),
        ("try:\n        {}\n    except ValueError:\n        pass", None),
        ("try:\n        {}\n    except Exception as e:\n        assert 'boom' in str(e)", None),
    ],
)  # fmt: skip
def test_assertions_wrapped_in_a_try_that_swallows_the_failure(
    wrapped: str, how: str | None
) -> None:
    """A handler that re-raises, re-asserts or catches something narrower swallows nothing."""
    swallowed = [f"test_calc.py: test_add: assertion failures now swallowed by {how}"]
    assert edited("test_calc.py", PYTEST, P_ADD, wrapped.format(P_ADD)) == (
        swallowed if how else []
    )


@pytest.mark.parametrize(
    ("source", "old", "new"),
    [
        (UNITTEST, U_ADD, "self.assertEqual(add(2, 3), -1)"),
        (UNITTEST, U_ADD, "self.assertEqual(-1, add(2, 3))"),
        (PYTEST, P_ADD, "assert add(2, 3) == -1"),
    ],
)
def test_an_expected_value_changed(source: str, old: str, new: str) -> None:
    (line,) = edited("test_calc.py", source, old, new)
    assert line.endswith("test_add: expected value changed (5 -> -1)")


def test_a_removed_assertion_does_not_shift_the_expectations_after_it() -> None:
    source = PYTEST.replace(
        "== 0\n", "== 0\n    assert add(2, 3) == 5\n    assert add(2, 3) != 6\n"
    )
    (line,) = edited("test_calc.py", source, "    assert add(-1, 1) == 0\n", "")
    assert line == "test_calc.py: test_add: 4 assertions, now 3"


def test_a_later_definition_that_shadows_a_test_is_compared_as_that_test() -> None:
    lines = edited("test_calc.py", PYTEST, "== 0\n", "== 0\n\ndef test_add():\n    pass\n")
    assert lines == ["test_calc.py: test_add: 2 assertions, now 0"]


@pytest.mark.parametrize(
    ("source", "old", "new"),
    [
        (PYTEST, "    assert add(2, 3) == 5", "    # sum\n    assert add(2,3)==5  # trivially"),
        (PYTEST, "assert add(-1, 1) == 0", "assert (\n        add(-1, 1)\n        == 0\n    )"),
        (PYTEST, "def test_add():", "def test_add():\n    '''Adds.'''"),
        (
            UNITTEST,
            "\n\n    def test_sub",
            "\n\n    def test_mul(self):\n        assert True\n\n    def test_sub",
        ),
        (PYTEST.replace(":", ":  # one", 1), "# one", "# two"),
    ],
    ids=["comments-spacing", "line-breaks", "docstring", "new-test", "changed-comment"],
)
def test_a_python_reformat_new_test_or_comment_says_nothing(
    source: str, old: str, new: str
) -> None:
    assert edited("test_calc.py", source, old, new) == []


# --- JavaScript / TypeScript: vitest and jest --------------------------------------------------


@pytest.mark.parametrize("path", JS)
def test_a_removed_or_thinned_js_test_is_named_under_its_describe(path: str) -> None:
    lines = edited(path, SUITE, 'test("subs"', 'test.each([])("subs %d"')
    assert lines == [f"{path}: calc > subs removed"]
    lines = edited(path, SUITE, "expect(add(-1, 1)).toBe(0);", "")
    assert lines == [f"{path}: calc > adds: 2 assertions, now 1"]


@pytest.mark.parametrize("path", JS)
@pytest.mark.parametrize(
    ("new", "mark"),
    [("it.skip", "it.skip"), ("xit", "xit"), ("it.todo", "it.todo"), ("test.fails", "test.fails")],
)
def test_a_skip_todo_or_fails_added_to_a_js_test(path: str, new: str, mark: str) -> None:
    assert edited(path, SUITE, 'it("adds"', f'{new}("adds"') == [
        f"{path}: calc > adds: {SKIPPED} ({mark})"
    ]


@pytest.mark.parametrize("path", JS)
@pytest.mark.parametrize("group", ["describe.skip", "xdescribe"])
def test_a_skipped_describe_marks_every_test_in_it(path: str, group: str) -> None:
    assert edited(path, SUITE, 'describe("calc"', f'{group}("calc"') == [
        f"{path}: calc > adds: {SKIPPED} ({group})",
        f"{path}: calc > subs: {SKIPPED} ({group})",
    ]


@pytest.mark.parametrize("path", JS)
def test_focusing_one_test_with_only_is_reported_even_on_a_new_test(path: str) -> None:
    lines = edited(path, SUITE, 'test("subs"', 'test.only("subs"')
    assert lines == [f"{path}: calc > subs: {FOCUSED} (test.only)"]
    lines = edited(path, SUITE, "  test(", '  it.only("new", () => {});\n  test(')
    assert lines == [f"{path}: calc > new: {FOCUSED} (it.only)"]


@pytest.mark.parametrize("path", JS)
@pytest.mark.parametrize("constant", ["expect(1).toBe(1)", "expect(true).toBeTruthy()"])
def test_an_expect_turned_into_a_constant_comparison(path: str, constant: str) -> None:
    assert edited(path, SUITE, "expect(add(2, 3)).toBe(5)", constant) == [
        f"{path}: calc > adds: assertion now compares constants ({constant})"
    ]


@pytest.mark.parametrize("path", JS)
def test_expects_wrapped_in_a_try_catch_that_swallows_the_failure(path: str) -> None:
    old = "expect(add(2, 3)).toBe(5);"
    swallowed = f"try {{ {old} }} catch (e) {{ /* ok */ }}"
    assert edited(path, SUITE, old, swallowed) == [
        f"{path}: calc > adds: assertion failures now swallowed by try/catch"
    ]
    assert edited(path, SUITE, old, swallowed.replace("/* ok */", "throw e;")) == []


@pytest.mark.parametrize("path", JS)
def test_an_expected_value_changed_in_an_expect_or_an_assert(path: str) -> None:
    lines = edited(path, SUITE, "toBe(5)", "toBe(-1)")
    assert lines == [f"{path}: calc > adds: expected value changed (5 -> -1)"]
    node = 'import assert from "node:assert";\ntest("adds", () => { assert.equal(add(2, 3), 5); });'
    assert edited(path, node, "5)", "-1)") == [f"{path}: adds: expected value changed (5 -> -1)"]


@pytest.mark.parametrize("path", JS)
def test_a_js_reformat_new_test_or_comment_says_nothing(path: str) -> None:
    reformatted = dedent("""
        import {describe, expect, it, test} from 'vitest'
        // the calculator
        describe('calc', () => {
          it('adds', () => {
            expect(add(2,3)).toBe(5)  // sum
            expect(
              add(-1, 1,),
            ).toBe(0)
          })
          test('subs', async () => { expect(sub(3, 1)).toEqual(2) })
          it('muls', () => { expect(1).toBe(1) })
        })
    """)
    assert signals(path, SUITE.encode(), reformatted.encode()) == []


def test_jsx_in_a_tsx_file_parses() -> None:
    before = 'it("renders", () => { expect(render(<App />).text).toBe("hi"); });'
    assert edited("app.test.tsx", before, '"hi"', '"bye"') == [
        'app.test.tsx: renders: expected value changed ("hi" -> "bye")'
    ]


# --- Go ----------------------------------------------------------------------------------------


def test_a_removed_or_thinned_go_test_is_named() -> None:
    assert edited("calc_test.go", GO, "func TestSub", "func helperSub") == [
        "calc_test.go: TestSub removed"
    ]
    assert edited("calc_test.go", GO, "\tassert.Equal(t, 0, Add(-1, 1))\n", "") == [
        "calc_test.go: TestAdd: 2 assertions, now 1"
    ]


@pytest.mark.parametrize("skip", ['t.Skip("later")', "t.SkipNow()", 't.Skipf("%d", 1)'])
def test_a_skip_added_to_a_go_test(skip: str) -> None:
    head = "func TestSub(t *testing.T) {"
    assert edited("calc_test.go", GO, head, f"{head}\n\t{skip}") == [
        f"calc_test.go: TestSub: {SKIPPED} ({skip.split('(')[0]}())"
    ]


def test_a_go_assertion_turned_into_a_constant_comparison() -> None:
    assert edited("calc_test.go", GO, "Add(-1, 1))", "0)") == [
        "calc_test.go: TestAdd: assertion now compares constants (assert.Equal(t, 0, 0))"
    ]
    assert edited("calc_test.go", GO, "if Sub(3, 1) != 2", "if 1 != 1") == [
        "calc_test.go: TestSub: assertion now compares constants (if 1 != 1 { t.Fatal })"
    ]


def test_a_deferred_recover_swallows_go_failures() -> None:
    head = "func TestSub(t *testing.T) {"
    assert edited("calc_test.go", GO, head, f"{head}\n\tdefer func() {{ recover() }}()") == [
        "calc_test.go: TestSub: assertion failures now swallowed by a deferred recover()"
    ]


def test_an_expected_value_changed_in_a_go_condition_or_testify() -> None:
    after = GO.replace("got != 5", "got != -1").replace("t, 0, Add", "t, 7, Add")
    assert signals("calc_test.go", GO.encode(), after.encode()) == [
        "calc_test.go: TestAdd: expected value changed (5 -> -1)",
        "calc_test.go: TestAdd: expected value changed (0 -> 7)",
    ]


def test_a_go_reformat_or_new_test_says_nothing() -> None:
    old = "\tif got := Add(2, 3); got != 5 {"
    after = GO.replace(old, "\t// sum\n\tif got := Add(2,3); got!=5 {")
    after += "\nfunc TestMul(t *testing.T) {\n\tt.Skip()\n}\n"
    assert old in GO
    assert signals("calc_test.go", GO.encode(), after.encode()) == []


# --- Hostile input -----------------------------------------------------------------------------

VALID = {"test_calc.py": PYTEST, "calc.test.ts": SUITE, "calc.test.js": SUITE, "calc_test.go": GO}


@pytest.mark.parametrize("path", VALID)
@pytest.mark.parametrize(
    "after",
    [bytes(range(256)) * 40, b"\x00" * 10, b"def test_add(:\n", b"\xff\xfe not utf-8 {{"],
    ids=["binary", "nul", "broken", "not-utf-8"],
)
def test_binary_nul_or_broken_text_no_longer_parses(path: str, after: bytes) -> None:
    assert signals(path, VALID[path].encode(), after) == [f"{path}: no longer parses"]


@pytest.mark.parametrize("path", VALID)
def test_an_unparseable_base_gives_nothing_to_compare(path: str) -> None:
    assert signals(path, bytes(range(256)) * 40, VALID[path].encode()) == []


@pytest.mark.parametrize("path", VALID)
def test_a_5_mb_file_is_not_parsed(path: str) -> None:
    huge = VALID[path].encode() + b"\n" + b"/" * 5_000_000
    assert len(huge) > MAX_PARSE_BYTES
    assert signals(path, VALID[path].encode(), huge) == [
        f"{path}: over {MAX_PARSE_BYTES} bytes, not checked"
    ]


@pytest.mark.parametrize(
    ("path", "deep"),
    [
        ("test_calc.py", "def test_add():\n    assert add(2, 3) == " + "(" * 5000 + ")" * 5000),
        ("test_calc.py", "def test_add():\n    assert add(2, 3) == " + "1 + " * 1500 + "1\n"),
        ("test_calc.py", "def test_add():\n" + "".join(" " * i + "if x:\n" for i in range(1, 300))),
        ("calc.test.ts", 'it("adds", () => { expect(' + "[" * 50000 + "]" * 50000 + ").toBe(5) })"),
        ("calc_test.go", "package c\nfunc TestAdd(t *testing.T) { if " + "(" * 50000 + ")" * 50000),
    ],
    ids=["py-parens", "py-sum", "py-indent", "ts-arrays", "go-parens"],
)
def test_deeply_nested_code_never_raises(path: str, deep: str) -> None:
    lines = signals(path, VALID[path].encode(), deep.encode())
    assert len(lines) <= 3
    assert all(line.startswith(f"{path}: ") and len(line) <= 200 for line in lines)


def test_nested_trys_around_many_assertions_are_read_in_one_pass() -> None:
    """Asking each of 1,000 nested trys whether its body asserts took minutes; one pass takes
    about a second (a timing belongs in benchmarks/, not here: this only says it finishes)."""
    nested = "try {" * 1000 + "expect(f()).toBe(1);" * 5000 + "} catch (e) {}" * 1000
    before = 'it("a", () => { expect(f()).toBe(1) })'
    lines = edited("a.test.ts", before, "expect(f()).toBe(1)", nested)
    assert lines == ["a.test.ts: a: assertion failures now swallowed by try/catch"]


def test_other_languages_and_identical_text_give_nothing() -> None:
    assert signals("README.md", b"a", b"b") == []
    assert signals("tests/calc.rs", b"#[test] fn a() {}", b"") == []
    assert signals("test_calc.py", b"x", b"x") == []


def test_the_output_is_bounded_in_lines_and_length() -> None:
    many = "".join(f"def test_{i}():\n    assert f({i}) == {i + 1}\n" for i in range(30))
    lines = signals("test_calc.py", many.encode(), b"")
    assert len(lines) == 20
    assert lines[-1] == "test_calc.py: … and 11 more"
    before = "def test_a():\n    assert f(1) == 1\n"
    (line,) = edited("deep/" * 40 + "test_calc.py", before, "f(1) == 1", f"'{'x' * 500}' == 'x'")
    assert len(line) == 200
    assert line.endswith("…")
