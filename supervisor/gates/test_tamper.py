"""Signals that a candidate weakened the tests it was judged by, read from one test file's change.

Why: a worker whose change is judged by the tests can make them pass by rewriting them instead
of the code: skip the failing test, drop its assertion, bend the expected value to what the code
returns (`assertEqual(add(2, 3), -1)`), compare constants, or wrap the assertion in a try that
swallows its failure. The pins (test_pins.py) count test functions and miss all of these. Each
pre-existing test is matched by name between the base's text and the candidate's and compared
structurally (Python with `ast`, JavaScript/TypeScript and Go with tree-sitter in
test_tamper_js.py), so a reformat, a changed comment or a test added beside the others says
nothing.

These are signals for a person and a reviewer ("existing tests changed: …"), not a proof: a
legitimate fix of a wrong expectation looks the same as a bent one, and a determined worker can
weaken a test in ways no pattern names. The decisive layer is the base oracle that re-runs the
base's own tests against the candidate. The files are parsed, never imported or run.
"""

from __future__ import annotations

import ast
from collections import Counter
from difflib import SequenceMatcher
from typing import TYPE_CHECKING, TypeGuard

from supervisor.gates.tamper_cases import (
    Case,
    Cases,
    Check,
    Operand,
    check,
    shorten,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

MAX_PARSE_BYTES = 1_000_000
MAX_SIGNALS = 20
MAX_LINE = 200
MAX_ALIGNED = 2_000  # assertions of one test
MAX_NODES = 200  # an operand or assertion bigger than this is shown and keyed by its kind
JS_SUFFIXES = (".js", ".jsx", ".mjs", ".cjs", ".ts", ".tsx", ".mts", ".cts")

# unittest's comparisons and how many leading arguments they compare; other assert* calls
# (assertRaises, assertLogs, mock.assert_called_with, …) count, with nothing to compare.
PY_ONE_OPERAND = frozenset({"assertTrue", "assertFalse", "assertIsNone", "assertIsNotNone"})
PY_TWO_OPERANDS = frozenset(
    {
        *("assertEqual", "assertEquals", "assertNotEqual", "assertNotEquals", "assertIs"),
        *("assertIsNot", "assertIn", "assertNotIn", "assertAlmostEqual", "assertNotAlmostEqual"),
        *("assertGreater", "assertGreaterEqual", "assertLess", "assertLessEqual"),
        *("assertCountEqual", "assertListEqual", "assertTupleEqual", "assertDictEqual"),
        *("assertSetEqual", "assertSequenceEqual", "assertMultiLineEqual", "assertRegex"),
        "assertNotRegex",
    }
)
PY_RAISES = frozenset({"pytest.raises", "raises", "pytest.warns"})
PY_SKIP_DECORATORS = frozenset(
    {"skip", "skipIf", "skipUnless", "expectedFailure", "skipif", "xfail"}
)
PY_SKIP_CALLS = frozenset({"pytest.skip", "pytest.xfail"})
PY_SETUPS = frozenset({"setUp", "setUpClass", "setup_method", "setup_class"})
SWALLOWING = frozenset({"Exception", "BaseException", "AssertionError"})
FOCUS = frozenset({"fit", "fdescribe", "ftest"})
_LITERAL_AST = (
    *(ast.Constant, ast.UnaryOp, ast.unaryop, ast.Tuple, ast.List, ast.Set, ast.Dict),
    ast.expr_context,
)


def signals(path: str, before: bytes, after: bytes) -> list[str]:
    """Tamper signals for one test file changed from `before` to `after`, one line each, each
    starting with the path, e.g. `test_calc.py: test_add: assertion now compares constants
    (assertEqual(5, 5))`. Empty when nothing suspicious changed (a pure reformat, a new test
    function added beside untouched ones). Never raises on any input."""
    try:
        return _bounded(path, _signals(path, before, after))
    except (RecursionError, MemoryError):
        return [f"{path}: too deeply nested to check"]
    except Exception as error:  # a signal must never break the review it feeds
        return [f"{path}: could not be checked ({type(error).__name__})"]


def _signals(path: str, before: bytes, after: bytes) -> list[str]:
    parse = _parser(path)
    if parse is None or before == after:
        return []
    if max(len(before), len(after)) > MAX_PARSE_BYTES:
        return [f"over {MAX_PARSE_BYTES} bytes, not checked"]
    old = parse(before)
    if old is None:
        return []  # a base that does not parse leaves nothing to compare against
    new = parse(after)
    return compare(old, new) if new is not None else ["no longer parses"]


def _parser(path: str) -> Callable[[bytes], Cases | None] | None:
    if path.endswith(".py"):
        return python_cases
    if path.endswith((*JS_SUFFIXES, ".go")):
        from supervisor.gates import test_tamper_js  # tree-sitter only for the files that need it

        return test_tamper_js.parser(path)
    return None


def _bounded(path: str, lines: list[str]) -> list[str]:
    if len(lines) > MAX_SIGNALS:
        lines = [*lines[: MAX_SIGNALS - 1], f"… and {len(lines) - MAX_SIGNALS + 1} more"]
    return [shorten(f"{path}: {line}", MAX_LINE) for line in lines]


def compare(before: Cases, after: Cases) -> list[str]:
    """The lines for every test of `before` that `after` removed or weakened, and for the new
    tests of `after` that newly focus the run on themselves."""
    lines: list[str] = []
    focused = {mark for case in before.values() for mark in case.marks if is_focus(mark)}
    for name, old in before.items():
        new = after.get(name)
        if new is None:
            lines.append(f"{name} removed")
        else:
            lines += [f"{name}: {line}" for line in weakened(old, new)]
    for name, new in after.items():
        if name not in before:
            marks = [m for m in new.marks if is_focus(m) and m not in focused]
            lines += [f"{name}: {_mark_line(mark)}" for mark in marks]
    return lines


def weakened(old: Case, new: Case) -> list[str]:
    """What `new` lost against `old`. Counted or compared by position, never matched by text:
    formatting must say nothing, and a renamed variable is no weakening."""
    lines = [_mark_line(mark) for mark in _added(old.marks, new.marks)]
    if len(new.checks) < len(old.checks):
        lines.append(f"{_count(len(old.checks))}, now {len(new.checks)}")
    lines += _new_trivial(old.checks, new.checks)
    if swallowed := _added(old.swallowed, new.swallowed):
        lines.append(f"assertion failures now swallowed by {swallowed[0]}")
    return lines + _changed_expectations(old.checks, new.checks)


def _added(old: list[str], new: list[str]) -> list[str]:
    return list((Counter(new) - Counter(old)).elements())


def _mark_line(mark: str) -> str:
    if is_focus(mark):
        return f"now focused, the file's other tests stop running ({mark})"
    return f"now skipped or expected to fail ({mark})"


def is_focus(mark: str) -> bool:
    return mark.endswith(".only") or mark in FOCUS


def _count(n: int) -> str:
    return f"{n} assertion" if n == 1 else f"{n} assertions"


def _new_trivial(old: list[Check], new: list[Check]) -> list[str]:
    """Counted, not matched: an assertion that could never fail was there before or it is new."""
    was = [c.snippet for c in old if c.trivial]
    now = [c for c in new if c.trivial]
    if len(now) <= len(was):
        return []
    shown = next((c for c in now if c.snippet not in was), now[-1])
    return [f"assertion now {shown.trivial} ({shown.snippet})"]


def _changed_expectations(old: list[Check], new: list[Check]) -> list[str]:
    """Assertions aligned as a diff aligns lines, so one removed assertion does not pair every
    later one with its neighbour; in each replaced stretch, the same actual with another
    expected literal is a changed expectation."""
    lines = []
    for was, now in _replaced(old, new):
        if was.actual is None or was.actual != now.actual or not (was.expected and now.expected):
            continue
        if was.expected.key != now.expected.key:
            lines.append(
                f"expected value changed ({was.expected.literal} -> {now.expected.literal})"
            )
    return lines


def _replaced(old: list[Check], new: list[Check]) -> list[tuple[Check, Check]]:
    if max(len(old), len(new)) > MAX_ALIGNED:
        return list(zip(old, new, strict=False))  # a diff of that many would take too long
    was, now = ([(c.actual, c.expected.key if c.expected else None) for c in s] for s in (old, new))
    pairs: list[tuple[Check, Check]] = []
    for tag, i1, i2, j1, j2 in SequenceMatcher(None, was, now, autojunk=False).get_opcodes():
        if tag == "replace":
            pairs += zip(old[i1:i2], new[j1:j2], strict=False)
    return pairs


# --- Python ---------------------------------------------------------------------------------


def python_cases(data: bytes) -> Cases | None:
    """Module-level `test*` functions and `test*` methods of classes (as `Class.test_x`); a
    later definition of a name replaces the earlier one, as Python does. None when unparseable."""
    try:
        tree = ast.parse(data)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    module_marks = _pytestmarks(tree.body)
    cases: Cases = {}
    for node in tree.body:
        if _is_test(node):
            cases[node.name] = _py_case(node, module_marks)
        elif isinstance(node, ast.ClassDef):
            inherited = [*module_marks, *_class_marks(node)]
            for item in node.body:
                if _is_test(item):
                    cases[f"{node.name}.{item.name}"] = _py_case(item, inherited)
    return cases


def _is_test(node: ast.stmt) -> TypeGuard[ast.FunctionDef | ast.AsyncFunctionDef]:
    return isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test")


def _class_marks(cls: ast.ClassDef) -> list[str]:
    """What skips every test of a class: its decorators, its `pytestmark`, a skip in setUp."""
    marks = _decorator_marks(cls.decorator_list) + _pytestmarks(cls.body)
    for item in cls.body:
        if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) and item.name in PY_SETUPS:
            marks += _skip_calls(item)
    return marks


def _pytestmarks(body: list[ast.stmt]) -> list[str]:
    marks: list[str] = []
    for node in body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets
        ):
            values = (
                node.value.elts if isinstance(node.value, ast.List | ast.Tuple) else [node.value]
            )
            marks += [f"pytestmark = {m[1:]}" for m in _decorator_marks(values)]
    return marks


def _decorator_marks(decorators: list[ast.expr]) -> list[str]:
    names = [_dotted(d.func if isinstance(d, ast.Call) else d) for d in decorators]
    return [f"@{n}" for n in names if n.rpartition(".")[2] in PY_SKIP_DECORATORS]


def _dotted(node: ast.expr) -> str:
    """`pytest.mark.skip` for a chain of names; "" for anything else."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return ""
    return ".".join([node.id, *reversed(parts)])


def _py_case(fn: ast.FunctionDef | ast.AsyncFunctionDef, inherited: list[str]) -> Case:
    """One pass for the assertions and the trys, then one for which subtrees hold them."""
    case = Case([*inherited, *_decorator_marks(fn.decorator_list), *_skip_calls(fn)])
    checks, raises, guards = set(), set(), []
    for node in _preorder(fn.body):
        if (found := _py_check(node)) is not None:
            case.checks.append(found)
            checks.add(id(node))
        elif isinstance(node, ast.Raise):
            raises.add(id(node))
        elif isinstance(node, ast.Try | ast.TryStar | ast.With | ast.AsyncWith):
            guards.append(node)
    if guards:
        held, raising = _holding(fn.body, checks), _holding(fn.body, raises)
        case.swallowed += [how for g in guards if (how := _py_swallower(g, held, raising))]
    return case


def _preorder(body: list[ast.stmt]) -> Iterator[ast.AST]:
    """Source order without recursion, so the n-th assertion before is the n-th after."""
    stack: list[ast.AST] = list(reversed(body))
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed(list(ast.iter_child_nodes(node))))


def _holding(body: list[ast.stmt], hits: set[int]) -> set[int]:
    """The ids of the nodes whose subtree holds one of `hits`: one bottom-up pass, where asking
    each nested try about its own subtree would be quadratic."""
    held: set[int] = set()
    stack: list[tuple[ast.AST, bool]] = [(node, False) for node in body]
    while stack:
        node, done = stack.pop()
        children = list(ast.iter_child_nodes(node))
        if not done:
            stack.append((node, True))
            stack.extend((child, False) for child in children)
        elif id(node) in hits or any(id(child) in held for child in children):
            held.add(id(node))
    return held


def _source(node: ast.AST, fallback: str) -> str:
    """The node as source, or `fallback` past MAX_NODES: no line shows more, and unparsing a
    big operand once per nested assertion would cost the file's size each time."""
    return fallback if _first_nodes(node) is None else ast.unparse(node)


def _first_nodes(node: ast.AST) -> list[ast.AST] | None:
    """The nodes under `node` when there are at most MAX_NODES, else None, in time bounded by
    MAX_NODES: lazily, where `ast.walk` would first queue all 200,000 items of a list."""
    found: list[ast.AST] = []
    stack: list[Iterator[ast.AST]] = [iter([node])]
    while stack:
        child = next(stack[-1], None)
        if child is None:
            stack.pop()
            continue
        found.append(child)
        if len(found) > MAX_NODES:
            return None
        stack.append(ast.iter_child_nodes(child))
    return found


def _skip_calls(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    marks = []
    for node in _preorder(fn.body):
        if isinstance(node, ast.Call):
            name = _dotted(node.func)
            if name in PY_SKIP_CALLS or name.rpartition(".")[2] == "skipTest":
                marks.append(f"{name}()")
        elif isinstance(node, ast.Raise) and node.exc is not None:
            raised = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            if _dotted(raised).rpartition(".")[2] == "SkipTest":
                marks.append(f"raise {_dotted(raised)}")
    return marks


def _py_check(node: ast.AST) -> Check | None:
    if isinstance(node, ast.Assert):
        test, shown = node.test, _source(node, "assert …")
        if isinstance(test, ast.Compare) and len(test.comparators) == 1:
            return check(shown, [_py_operand(test.left), _py_operand(test.comparators[0])])
        return check(shown, [_py_operand(test)])
    if not isinstance(node, ast.Call) or not _is_assertion_call(node):
        return None
    name = node.func.attr if isinstance(node.func, ast.Attribute) else _dotted(node.func)
    arity = 1 if name in PY_ONE_OPERAND else 2 if name in PY_TWO_OPERANDS else 0
    snippet = _source(node, f"{name}(…)").removeprefix("self.")
    return check(snippet, [_py_operand(arg) for arg in node.args[:arity]])


def _is_assertion_call(call: ast.Call) -> bool:
    func, name = call.func, _dotted(call.func)
    if name in PY_RAISES:
        return True
    if isinstance(func, ast.Attribute):
        own = isinstance(func.value, ast.Name) and func.value.id == "self"
        return func.attr.startswith("assert") or (own and func.attr.startswith("fail"))
    return name.startswith("assert")


def _py_operand(node: ast.expr) -> Operand:
    text = _source(node, f"<{type(node).__name__} …>")
    nodes = _first_nodes(node)
    literal = nodes is not None and all(isinstance(n, _LITERAL_AST) for n in nodes)
    return Operand(text, text if literal else None)


def _py_swallower(node: ast.AST, held: set[int], raising: set[int]) -> str | None:
    """A try whose handler takes the assertion's failure and neither re-raises nor re-asserts,
    or a `with suppress(AssertionError)`, around an assertion."""
    if isinstance(node, ast.Try | ast.TryStar) and any(id(s) in held for s in node.body):
        for handler in node.handlers:
            if _swallows(handler, held, raising):
                caught = _source(handler.type, "…") if handler.type else ""
                return f"try/except {caught}".rstrip()
    if isinstance(node, ast.With | ast.AsyncWith) and any(id(s) in held for s in node.body):
        for item in node.items:
            ctx = item.context_expr
            if (
                isinstance(ctx, ast.Call)
                and _dotted(ctx.func).rpartition(".")[2] == "suppress"
                and any(_catches_failure(arg) for arg in ctx.args)
            ):
                return _source(ctx, "suppress(…)")
    return None


def _swallows(handler: ast.ExceptHandler, held: set[int], raising: set[int]) -> bool:
    if handler.type is not None and not _catches_failure(handler.type):
        return False
    return not any(id(s) in held or id(s) in raising for s in handler.body)


def _catches_failure(node: ast.expr) -> bool:
    types = node.elts if isinstance(node, ast.Tuple) else [node]
    return any(_dotted(t).rpartition(".")[2] in SWALLOWING for t in types)
