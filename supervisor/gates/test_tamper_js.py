"""test_tamper's readers for JavaScript/TypeScript (vitest, jest, mocha) and Go test files.

Why tree-sitter: the host has no Node or Go toolchain to ask, the files must not be run, and a
pattern over the text cannot tell `it.skip(` in a comment or string from a real one, nor which
`expect` belongs to which test. The tsx grammar reads .js/.jsx/.mjs/.cjs (JSX included) and .tsx;
.ts/.mts/.cts keep the typescript grammar, which alone accepts `<T>value` casts. A tree with a
syntax error counts as unparseable: comparing a half-recovered tree would invent signals.

Every walk is one pass without recursion and every key, snippet and literal test is bounded, so
a hostile file (thousands of nested trys, one title repeated 20,000 times, a megabyte literal)
costs time in proportion to its size. Walks go by cursor: `Node.children` builds the whole list
(a 200,000-element array each time something looks into it) and `Node.parent` descends from the
root.
"""

from __future__ import annotations

from collections import Counter
from functools import partial
from typing import TYPE_CHECKING

import tree_sitter_go
import tree_sitter_typescript
from tree_sitter import Language, Node, Parser

from supervisor.gates.tamper_cases import Case, Cases, Check, Operand, check

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from tree_sitter import TreeCursor

TS = Language(tree_sitter_typescript.language_typescript())
TSX = Language(tree_sitter_typescript.language_tsx())
GO = Language(tree_sitter_go.language())

JS_TESTS = frozenset({"it", "test", "specify", "xit", "xtest", "fit", "ftest"})
JS_GROUPS = frozenset({"describe", "context", "suite", "xdescribe", "fdescribe"})
JS_MARK_MODIFIERS = frozenset(
    {"skip", "todo", "fails", "failing", "skipIf", "runIf", "only", "fixme", "fail"}
)
# Playwright's `test.beforeEach(…)`, `test.describe.configure(…)`: calls on `test` that are no test.
JS_NOT_TESTS = frozenset(
    {
        *("beforeEach", "afterEach", "beforeAll", "afterAll", "use", "extend", "step"),
        *("setTimeout", "configure", "info", "slow", "expect"),
    }
)
JS_FUNCTIONS = frozenset({"arrow_function", "function_expression", "function"})
JS_FORWARDERS = frozenset({"done", "reject", "fail"})  # a catch handing the failure on
JS_LITERALS = frozenset(
    {
        *("number", "string", "string_fragment", "escape_sequence", "template_string"),
        *("true", "false", "null", "undefined", "regex", "regex_pattern", "regex_flags"),
        *("unary_expression", "parenthesized_expression", "array", "object", "pair"),
        *("property_identifier", "comment"),
    }
)
GO_LITERALS = frozenset(
    {
        *("int_literal", "float_literal", "imaginary_literal", "rune_literal", "escape_sequence"),
        *("interpreted_string_literal", "interpreted_string_literal_content", "nil", "true"),
        *("raw_string_literal", "raw_string_literal_content", "false", "unary_expression"),
        *("parenthesized_expression", "comment"),
    }
)
GO_FAILURES = frozenset({"Error", "Errorf", "Fatal", "Fatalf", "Fail", "FailNow"})
GO_SKIPS = frozenset({"Skip", "SkipNow", "Skipf"})
GO_TESTIFY = frozenset({"assert", "require"})
GO_ONE_OPERAND = frozenset(
    {"True", "False", "Nil", "NotNil", "Empty", "NotEmpty", "Zero", "NotZero", "NoError", "Error"}
)
GO_COMPARISONS = frozenset({"==", "!=", "<", "<=", ">", ">="})
CLOSERS = frozenset({")", "]", "}"})
JS_CHAINS = frozenset({"call_expression", "member_expression"})
JS_LINKS = frozenset({"object", "function"})  # the fields that continue a chain
KEY_TOKENS = 48  # past this an operand's key ends with its size: equal enough to compare
SHOWN_BYTES = 120
NAME_BYTES = 64  # longer is no name this module looks for
GO_BRANCH_DEPTH = 6  # from a `t.Errorf(…)` up to the `if` whose consequence holds it


Trail = list[tuple[Node, str | None]]


def parser(path: str) -> Callable[[bytes], Cases | None]:
    if path.endswith(".go"):
        return go_cases
    language = TS if path.endswith((".ts", ".mts", ".cts")) else TSX
    return lambda data: js_cases(data, language)


def _parse(data: bytes, language: Language) -> Node | None:
    root = Parser(language).parse(data).root_node
    return None if root.has_error else root


def _walk(root: Node, into: Callable[[Node], bool] | None = None) -> Iterator[Trail]:
    """Every node under `root` in source order, as the trail from `root` down to it: (node, its
    field in its parent) pairs. The trail is reused; `into` (asked after the node was seen)
    keeps the walk out of a subtree."""
    cursor = root.walk()
    trail: Trail = [(root, None)]
    while True:
        yield trail
        if (into is None or into(trail[-1][0])) and cursor.goto_first_child():
            trail.append((_at(cursor), cursor.field_name))
            continue
        while not cursor.goto_next_sibling():
            if not cursor.goto_parent():
                return
            trail.pop()
        trail[-1] = (_at(cursor), cursor.field_name)


def _at(cursor: TreeCursor) -> Node:
    node = cursor.node
    assert node is not None  # a cursor that just moved is on a node
    return node


def _nodes(root: Node, into: Callable[[Node], bool] | None = None) -> Iterator[Node]:
    return (trail[-1][0] for trail in _walk(root, into))


def _holding(root: Node, hits: set[int]) -> set[int]:
    """The ids of the nodes under `root` whose subtree holds one of `hits`: one bottom-up pass,
    where asking each nested try about its own subtree would be quadratic."""
    held: set[int] = set()
    cursor, holds = root.walk(), [False]
    while True:
        if cursor.goto_first_child():
            holds.append(False)
            continue
        while True:
            if holds.pop() or _at(cursor).id in hits:
                held.add(_at(cursor).id)
                if holds:
                    holds[-1] = True
            if cursor.goto_next_sibling():
                holds.append(False)
                break
            if not cursor.goto_parent():
                return held


def _size(node: Node) -> int:
    return node.end_byte - node.start_byte


def _text(node: Node | None) -> str:
    return (node.text or b"").decode("utf-8", "replace") if node is not None else ""


def _name(node: Node | None) -> str:
    """The text of a short node, "" for a long one: names are compared, never whole bodies."""
    return _text(node) if node is not None and _size(node) <= NAME_BYTES else ""


def _tokens(node: Node) -> Iterator[Node]:
    """The leaves, a string as one, comments left out."""
    for current in _nodes(node, lambda n: n.type != "string"):
        if current.type == "string" or (current.child_count == 0 and current.type != "comment"):
            yield current


def _shown(node: Node) -> str:
    if _size(node) <= SHOWN_BYTES:
        return " ".join(_text(node).split())
    parts, length = [], 0
    for token in _tokens(node):
        if _size(token) > SHOWN_BYTES or length > SHOWN_BYTES:
            break
        parts.append(_text(token))
        length += _size(token)
    return "".join(parts) + "…"


def _key(node: Node) -> str:
    """The node's tokens without comments, quote style or trailing commas: what a formatter
    leaves alone."""
    tokens: list[str] = []
    for current in _tokens(node):
        if len(tokens) == KEY_TOKENS:
            tokens.append(f"…{_size(node)}")
            break
        if current.type == "string":
            tokens.append(f'"{_string_value(current)}"')
        elif not (current.type == "," and _name(current.next_sibling) in CLOSERS | {""}):
            tokens.append(_text(current) if _size(current) <= SHOWN_BYTES else f"…{_size(current)}")
    return " ".join(tokens)


def _string_value(node: Node) -> str:
    if _size(node) > SHOWN_BYTES:
        return f"…{_size(node)} bytes"
    parts = []
    for part in node.children:
        text = _text(part)
        if part.type == "escape_sequence" and text in ("\\'", '\\"'):
            parts.append(text[1:])
        elif part.type not in ("'", '"'):
            parts.append(text)
    return "".join(parts)


def _operand(node: Node, literals: frozenset[str]) -> Operand:
    named = (n for n in _nodes(node) if n.is_named)
    seen = [n.type in literals for _, n in zip(range(KEY_TOKENS + 1), named, strict=False)]
    literal = len(seen) <= KEY_TOKENS and all(seen)
    return Operand(_key(node), _shown(node) if literal else None)


def _args(call: Node) -> list[Node]:
    found = call.child_by_field_name("arguments")
    if found is None:
        return []
    if found.type not in ("arguments", "argument_list"):
        return [found]  # a tagged template: it.each`table`
    return [a for a in found.named_children if a.type != "comment"]


def _callee(node: Node) -> Node | None:
    return node.child_by_field_name("function") if node.type == "call_expression" else None


def _inner(trail: Trail) -> bool:
    """The trail's node is the inner link of a chain that goes on above it: `expect(x)` in
    `expect(x).toBe`, `test.each(t)` in `test.each(t)("…")`."""
    return len(trail) > 1 and trail[-1][1] in JS_LINKS and trail[-2][0].type in JS_CHAINS


# --- JavaScript / TypeScript -----------------------------------------------------------------


def js_cases(data: bytes, language: Language) -> Cases | None:
    """Every `it`/`test` call, named by its title under its `describe` titles ("calc > adds");
    a repeated name gets " (2)", as both tests run."""
    root = _parse(data, language)
    if root is None:
        return None
    cases: Cases = {}
    seen: Counter[str] = Counter()
    groups: list[tuple[Node, tuple[str, ...], tuple[str, ...]]] = [(root, (), ())]
    while groups:
        top, titles, marks = groups.pop()
        found: set[int] = set()
        for trail in _walk(top, partial(_outside, found)):
            node = trail[-1][0]
            spec = _js_spec(node) if node.type == "call_expression" and not _inner(trail) else None
            if spec is None:
                continue
            found.add(node.id)
            group, title, body, own = spec
            if group and body is not None:
                groups.append((body, (*titles, title), (*marks, *own)))
            elif not group:
                name = " > ".join((*titles, title))
                seen[name] += 1
                name = name if seen[name] == 1 else f"{name} ({seen[name]})"
                cases[name] = _js_case(body or node, [*marks, *own])
    return cases


def _outside(found: set[int], node: Node) -> bool:
    return node.id not in found


def _js_spec(call: Node) -> tuple[bool, str, Node | None, list[str]] | None:
    """(whether it is a group, title, test function, markers) of a test or group call, e.g.
    `it.skip(…)`, `test.each(table)(…)`, `describe.only(…)`, Playwright's `test.describe(…)`;
    None for any other call."""
    callee, modifiers = call.child_by_field_name("function"), []
    while callee is not None and callee.type != "identifier":
        if callee.type == "call_expression":
            callee = callee.child_by_field_name("function")
        elif callee.type == "member_expression":
            modifiers.append(_name(callee.child_by_field_name("property")))
            callee = callee.child_by_field_name("object")
        else:
            return None
    base = _name(callee)
    if base not in JS_TESTS | JS_GROUPS or JS_NOT_TESTS.intersection(modifiers):
        return None
    args = _args(call)
    if args and args[0].type in JS_FUNCTIONS:
        return None  # a hook: no title
    title = _title(args[0]) if args else ""
    body = next((a for a in reversed(args) if a.type in JS_FUNCTIONS), None)
    marks = [base] if base[0] in "xf" else []
    marks += [f"{base}.{m}" for m in reversed(modifiers) if m in JS_MARK_MODIFIERS]
    return base in JS_GROUPS or "describe" in modifiers, title, body, marks


def _title(node: Node) -> str:
    if node.type == "string":
        return _string_value(node)
    if node.type == "template_string" and _size(node) <= SHOWN_BYTES:
        return _text(node)[1:-1]
    return _key(node)


def _js_case(body: Node, marks: list[str]) -> Case:
    """One pass for the assertions, skips and trys, then one for which subtrees hold them."""
    case = Case(marks)
    checks, escapes, trys = set(), set(), []
    for trail in _walk(body):
        node = trail[-1][0]
        kind = node.type
        if kind == "try_statement":
            trys.append(node)
        elif kind == "throw_statement" or (
            kind == "call_expression" and _name(_callee(node)) in JS_FORWARDERS
        ):
            escapes.add(node.id)
        if kind not in JS_CHAINS or _inner(trail):
            continue
        if (found := _js_check(node)) is not None:
            case.checks.append(found)
            checks.add(node.id)
        elif skip := _js_skip_call(node):
            case.marks.append(skip)
    if trys:
        held, escaping = _holding(body, checks), _holding(body, escapes)
        case.swallowed += ["try/catch" for t in trys if _js_swallows(t, held, escaping)]
    return case


def _js_check(top: Node) -> Check | None:
    """The assertion a whole chain makes: `expect(actual)…matcher(expected)`, `assert(…)`,
    `assert.equal(…)`, `assertEquals(…)`."""
    link, matcher = top, top if top.type == "call_expression" else None
    while link.type in JS_CHAINS:
        if (callee := _callee(link)) is not None and _name(callee) in ("expect", "expect.soft"):
            expected = _args(matcher)[:1] if matcher is not None and matcher != link else []
            operands = [_operand(a, JS_LITERALS) for a in _args(link)[:1] + expected]
            return check(_shown(top), operands)
        inner = callee if callee is not None else link.child_by_field_name("object")
        if inner is None:
            return None
        link = inner
    name = _assert_name(_callee(top))
    if name is None:
        return None
    arity = 0 if name == "fail" else 1 if name in ("assert", "ok") or _is_predicate(name) else 2
    return check(_shown(top), [_operand(a, JS_LITERALS) for a in _args(top)[:arity]])


def _assert_name(callee: Node | None) -> str | None:
    """`assert(…)`, `assertEquals(…)`, `assert.equal(…)`: the assertion's name."""
    if callee is not None and callee.type == "identifier" and _name(callee).startswith("assert"):
        return _name(callee)
    if callee is not None and callee.type == "member_expression":
        owner, prop = (callee.child_by_field_name(f) for f in ("object", "property"))
        return _name(prop) if _name(owner) == "assert" else None
    return None


def _is_predicate(name: str) -> bool:
    return name in ("true", "false") or (name.startswith("is") and name[2:3].isupper())


def _js_skip_call(call: Node) -> str | None:
    """`this.skip()` (mocha), `ctx.skip()` (vitest), `test.skip(cond)` (Playwright) in a test."""
    callee = _callee(call)
    if callee is None or callee.type != "member_expression":
        return None
    owner = callee.child_by_field_name("object")
    if _name(callee.child_by_field_name("property")) != "skip" or owner is None:
        return None
    return f"{_name(owner)}.skip()" if owner.type in ("this", "identifier") else None


def _js_swallows(node: Node, held: set[int], escaping: set[int]) -> bool:
    """A catch (JavaScript's take everything) after assertions that neither throws, asserts
    nor hands the error to `done`/`reject`."""
    body, handler = node.child_by_field_name("body"), node.child_by_field_name("handler")
    caught = handler.child_by_field_name("body") if handler is not None else None
    if body is None or caught is None or body.id not in held:
        return False
    return caught.id not in held and caught.id not in escaping


# --- Go --------------------------------------------------------------------------------------


def go_cases(data: bytes) -> Cases | None:
    """Every top-level `func TestXxx(t *testing.T)`."""
    root = _parse(data, GO)
    if root is None:
        return None
    cases: Cases = {}
    for fn in root.named_children:
        name, body = fn.child_by_field_name("name"), fn.child_by_field_name("body")
        if fn.type == "function_declaration" and _name(name).startswith("Test") and body:
            cases[_name(name)] = _go_case(body, _go_param(fn))
    return cases


def _go_param(fn: Node) -> str:
    params = fn.child_by_field_name("parameters")
    first = params.named_children[0] if params is not None and params.named_children else None
    return _name(first.child_by_field_name("name")) if first is not None else "t"


def _go_case(body: Node, param: str) -> Case:
    """One pass for the assertions, skips and defers, then one for which defers hold a
    recover()."""
    case = Case()
    recovers, defers = set(), []
    for trail in _walk(body):
        node = trail[-1][0]
        if node.type == "defer_statement":
            defers.append(node)
        selector = _callee(node)
        if _name(selector) == "recover":
            recovers.add(node.id)
        if selector is None or selector.type != "selector_expression":
            continue
        owner, field = (selector.child_by_field_name(f) for f in ("operand", "field"))
        if owner is None or field is None:
            continue
        if _name(field) in GO_SKIPS:
            case.marks.append(f"{_name(owner)}.{_name(field)}()")
        elif (found := _go_check(node, owner, _name(field), param, trail)) is not None:
            case.checks.append(found)
    if defers:
        held = _holding(body, recovers)
        case.swallowed += ["a deferred recover()" for d in defers if d.id in held]
    return case


def _go_check(call: Node, owner: Node, field: str, param: str, trail: Trail) -> Check | None:
    if _is_testify(owner) and field != "New":
        args = _args(call)
        if args and (_name(args[0]) == param or _name(args[0]).endswith(".T()")):
            args = args[1:]
        if field.startswith("Fail"):
            arity = 0
        else:
            arity = 1 if field.removesuffix("f") in GO_ONE_OPERAND else 2
        return check(_shown(call), [_operand(a, GO_LITERALS) for a in args[:arity]])
    if owner.type == "identifier" and field in GO_FAILURES:
        return _go_failure(call, f"{_name(owner)}.{field}", _branch(trail))
    return None


def _is_testify(owner: Node) -> bool:
    """`assert.Equal(t, …)`, `require.NoError(t, …)`, `s.Require().Equal(…)`."""
    if owner.type == "identifier":
        return _name(owner) in GO_TESTIFY
    callee = _callee(owner)
    field = callee.child_by_field_name("field") if callee is not None else None
    return _name(field) in ("Assert", "Require")


def _branch(trail: Trail) -> Node | None:
    """The `if` whose consequence holds the trail's failure call, a few statements up."""
    for i in range(len(trail) - 1, max(len(trail) - GO_BRANCH_DEPTH, 1) - 1, -1):
        parent = trail[i - 1][0]
        if parent.type in ("func_literal", "function_declaration"):
            return None
        if parent.type == "if_statement" and trail[i][1] == "consequence":
            return parent
    return None


def _go_failure(call: Node, shown: str, branch: Node | None) -> Check:
    """`t.Errorf` under `if got := Add(2, 3); got != 5`: the condition is what it compares,
    with the names the if's own statement binds read as their values."""
    condition = branch.child_by_field_name("condition") if branch is not None else None
    if branch is None or condition is None:
        return check(_shown(call), [])
    bound = _bindings(branch.child_by_field_name("initializer"))
    sides = [condition]
    operator = condition.child_by_field_name("operator")
    if condition.type == "binary_expression" and _name(operator) in GO_COMPARISONS:
        sides = [n for n in (condition.child_by_field_name(f) for f in ("left", "right")) if n]
    operands = [_operand(bound.get(_name(side), side), GO_LITERALS) for side in sides]
    return check(f"if {_shown(condition)} {{ {shown} }}", operands)


def _bindings(initializer: Node | None) -> dict[str, Node]:
    if initializer is None or initializer.type != "short_var_declaration":
        return {}
    left, right = (initializer.child_by_field_name(f) for f in ("left", "right"))
    names = left.named_children if left is not None else []
    values = right.named_children if right is not None else []
    if len(names) != len(values):
        return {}
    return {_name(name): value for name, value in zip(names, values, strict=True)}
