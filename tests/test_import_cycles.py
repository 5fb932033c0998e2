"""The package's modules import one another without cycles.

A cycle makes import order matter (a half-initialised module hands out names it has not yet
defined), hides which module is the lower layer, and is how `config`, `roles`, `recovery` and
`workflow/templates`, or `workers/base` and each adapter, once came to need one another. The
graph is read from the source (the `ast` of every module), so it sees every import, including
the ones inside functions that a test run might never execute. Imports under
`if TYPE_CHECKING:` are left out of the cycle check (they run nothing), but not out of the
floors' check below: a type-only import still couples a wing to the one it names.

The engine ↔ components cycle went with the reshape into `workflow/steps/`: step modules never
import the engine.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import NamedTuple

import networkx as nx
from source_trees import parsed
from wings import ALL, WINGS

import supervisor

PACKAGE_DIR = Path(supervisor.__file__).resolve().parent


class Import(NamedTuple):
    importer: str
    imported: str
    where: str  # path:line, for the failure message


def module_names(root: Path, package: str) -> dict[str, Path]:
    """Every module under `root` by its dotted name (a package by its own name)."""
    names = {}
    for path in sorted(root.rglob("*.py")):
        parts = [package, *path.relative_to(root).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        names[".".join(parts)] = path
    return names


def _type_checking_only(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports_of(tree: ast.AST, type_checking: bool = False) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement in the module, at any depth, but not under `if TYPE_CHECKING:`
    (unless `type_checking`)."""
    found: list[ast.Import | ast.ImportFrom] = []
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.append(node)
        elif isinstance(node, ast.If) and not type_checking and _type_checking_only(node):
            stack.extend(node.orelse)  # the `else:` branch does run
            continue
        stack.extend(ast.iter_child_nodes(node))
    return found


def _known(name: str, modules: dict[str, Path]) -> str | None:
    """`name` if it is one of the modules, else the nearest enclosing one, else None."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def import_graph(root: Path, package: str, *, type_checking: bool = False) -> list[Import]:
    """The imports between the package's own modules."""
    modules = module_names(root, package)
    edges: list[Import] = []
    for importer, path in modules.items():
        is_package = path.name == "__init__.py"
        tree = parsed(path.read_text(encoding="utf-8"), str(path))
        for node in _imports_of(tree, type_checking):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                base = node.module or ""
                if node.level:
                    anchor = importer.split(".")
                    anchor = anchor[: len(anchor) - node.level + (1 if is_package else 0)]
                    base = ".".join([*anchor, *([base] if base else [])])
                targets = [f"{base}.{alias.name}" for alias in node.names]
            for target in targets:
                imported = _known(target, modules)
                if imported is not None and imported != importer:
                    where = f"{path.relative_to(root.parent)}:{node.lineno}"
                    edges.append(Import(importer, imported, where))
    return edges


def cycles(edges: list[Import]) -> list[list[Import]]:
    """One cycle through each group of modules that import one another, as its imports."""
    graph = nx.DiGraph()
    for edge in edges:
        graph.add_edge(edge.importer, edge.imported, where=edge.where)
    found = []
    for group in nx.strongly_connected_components(graph):
        if len(group) > 1:
            loop = nx.find_cycle(graph.subgraph(group))
            found.append([Import(a, b, graph.edges[a, b]["where"]) for a, b in loop])
    return found


def test_the_package_has_no_import_cycle() -> None:
    edges = import_graph(PACKAGE_DIR, "supervisor")
    assert len(edges) > 200  # the graph was read (a wrong root would find nothing)
    found = [loop for loop in cycles(edges)]
    described = "\n".join(
        " -> ".join(f"{e.importer} ({e.where})" for e in loop) + f" -> {loop[0].importer}"
        for loop in found
    )
    assert not found, (
        f"import cycles:\n{described}\n"
        "Move what both sides need into a lower module, or the lookup into a higher one."
    )


def test_not_even_the_type_checker_sees_a_cycle() -> None:
    """The fan-out and the modules split out of it (dispatched.py, fix_up.py) once named its
    class for their annotations; they now declare what they use (a Protocol) or take it as
    arguments, so each module reads top-down with no forward reference to its caller."""
    edges = import_graph(PACKAGE_DIR, "supervisor", type_checking=True)
    assert [[e.importer for e in loop] for loop in cycles(edges)] == []


def test_a_lazy_import_closes_a_cycle_and_a_type_checking_import_does_not(tmp_path: Path) -> None:
    """The check itself: an import inside a function counts (it still runs, only later), one
    under `if TYPE_CHECKING:` does not; relative imports resolve like absolute ones."""
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("from . import low\n")
    (pkg / "base.py").write_text("def find():\n    from pkg.plugin import Plugin\n")
    (pkg / "plugin.py").write_text("from pkg.base import find\n")
    (pkg / "sub" / "low.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..plugin import Plugin\n"
    )
    (pkg / "sub" / "high.py").write_text("from ..sub.low import x\nfrom ..base import find\n")
    edges = import_graph(pkg, "pkg")
    assert {(e.importer, e.imported) for e in edges} == {
        ("pkg.base", "pkg.plugin"),
        ("pkg.plugin", "pkg.base"),
        ("pkg.sub", "pkg.sub.low"),
        ("pkg.sub.high", "pkg.sub.low"),
        ("pkg.sub.high", "pkg.base"),
    }
    [loop] = cycles(edges)
    assert {e.importer for e in loop} == {"pkg.base", "pkg.plugin"}
    assert {e.where for e in loop} == {"pkg/base.py:2", "pkg/plugin.py:1"}


def wing_of(module: str) -> str:
    """The wing a module belongs to; the package itself (`supervisor`) is a foundation."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "core"


def _public(module: str) -> bool:
    """Whether other wings may import `module`: the wing's package itself, or a listed module."""
    wing = WINGS[wing_of(module)]
    below = ".".join(module.split(".")[2:])
    return not below or wing.public == ALL or below in wing.public


def test_every_wing_has_a_floor_and_the_top_level_holds_only_the_package_itself() -> None:
    modules = {p.stem for p in PACKAGE_DIR.glob("*.py")} - {"__init__"}
    wings = {p.name for p in PACKAGE_DIR.iterdir() if (p / "__init__.py").is_file()}
    assert modules <= {"__main__"}, "put the new module in the wing it belongs to"
    assert (wings | modules) == set(WINGS), "give the new wing a floor in tests/wings.py"


def against_the_floors(edges: list[Import]) -> list[str]:
    """Each import that reaches a wing on the same floor or a higher one, or another wing's
    private module."""
    found = []
    for e in edges:
        mine, theirs = wing_of(e.importer), wing_of(e.imported)
        if mine == theirs:
            continue
        if WINGS[mine].floor <= WINGS[theirs].floor:
            found.append(f"{e.importer} ({e.where}) imports {e.imported}: not a lower floor")
        elif not _public(e.imported):
            found.append(f"{e.importer} ({e.where}) imports {e.imported}: private to {theirs}")
    return found


def test_every_import_reaches_down_to_a_public_module() -> None:
    """Type-only imports count: a wing that must name a higher wing's type to be checked is
    still coupled to it (the policy wing names the step it consults as a Protocol instead)."""
    edges = import_graph(PACKAGE_DIR, "supervisor", type_checking=True)
    assert against_the_floors(edges) == [], (
        "imports against the floors of tests/wings.py:\n"
        + "\n".join(against_the_floors(edges))
        + "\nMove the shared part down, pass it in from above, or make the module public."
    )


def test_the_floor_check_sees_an_upward_import_and_a_private_one(tmp_path: Path) -> None:
    pkg = tmp_path / "supervisor"
    for wing in ("state", "lifecycle", "sandbox", "guard"):
        (pkg / wing).mkdir(parents=True)
        (pkg / wing / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "lifecycle" / "tasks.py").write_text("X = 1\n")
    (pkg / "sandbox" / "credproxy.py").write_text("from typing import TYPE_CHECKING\n")
    (pkg / "state" / "store.py").write_text(
        "def f():\n    from supervisor.lifecycle.tasks import X\n"
    )
    typed = "if TYPE_CHECKING:\n    from supervisor.state.store import f\n"
    (pkg / "guard" / "trust.py").write_text("from typing import TYPE_CHECKING\n" + typed)
    (pkg / "lifecycle" / "abandon.py").write_text("from supervisor.sandbox import credproxy\n")
    found = against_the_floors(import_graph(pkg, "supervisor", type_checking=True))
    assert found == [
        "supervisor.lifecycle.abandon (supervisor/lifecycle/abandon.py:1) imports "
        "supervisor.sandbox.credproxy: private to sandbox",
        "supervisor.state.store (supervisor/state/store.py:2) imports supervisor.lifecycle.tasks: "
        "not a lower floor",
    ]
