"""The package's modules import one another without cycles.

A cycle makes import order matter (a half-initialised module hands out names it has not yet
defined), hides which module is the lower layer, and is how `config`, `roles`, `recovery` and
`workflow/templates`, or `workers/base` and each adapter, once came to need one another. The
graph is read from the source (the `ast` of every module), so it sees every import, including
the ones inside functions that a test run might never execute. Imports under
`if TYPE_CHECKING:` are left out: they exist only for the type checker and run nothing.

The engine ↔ components cycle went with the reshape into `workflow/steps/`: step modules never
import the engine.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import NamedTuple

import networkx as nx

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


def _imports_of(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement in the module, at any depth, but not under `if TYPE_CHECKING:`."""
    found: list[ast.Import | ast.ImportFrom] = []
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.append(node)
        elif isinstance(node, ast.If) and _type_checking_only(node):
            stack.extend(node.orelse)  # the `else:` branch does run
            continue
        stack.extend(ast.iter_child_nodes(node))
    return found


def _known(name: str, modules: dict[str, Path]) -> str | None:
    """`name` if it is one of the modules, else the nearest enclosing one, else None."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def import_graph(root: Path, package: str) -> list[Import]:
    """The imports between the package's own modules."""
    modules = module_names(root, package)
    edges: list[Import] = []
    for importer, path in modules.items():
        is_package = path.name == "__init__.py"
        for node in _imports_of(ast.parse(path.read_text(encoding="utf-8"), str(path))):
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
