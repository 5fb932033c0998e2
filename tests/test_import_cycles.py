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
from source_trees import parsed

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


LAYERS: dict[str, int] = {
    # 0: what a person runs (typer commands and their rendering, the TUI)
    "cli": 0,
    "tui": 0,
    "__main__": 0,
    "demo": 0,
    # 1: the entry points: a task's lifecycle and the commands around it
    "tasks": 1,
    "starting": 1,
    "abandon": 1,
    "completion": 1,
    "bootstrap": 1,
    "temporal": 1,
    "opening": 1,
    "preflight": 1,
    "doctor": 1,
    "initialize": 1,
    "gate_check": 1,
    "image_commands": 1,
    "task_state": 1,
    # 2: decide (the engine, its steps) and the routing policies it reads
    "workflow": 2,
    "routing": 2,
    # 3: the wings the steps act through; they may use one another (no cycle: see above)
    "context": 3,
    "workers": 3,
    "sandbox": 3,
    "workspace": 3,
    "guard": 3,
    "policy": 3,
    "project": 3,
    # 4: typed, durable state
    "state": 4,
    # 5: what every wing uses
    "config": 5,
    "config_errors": 5,
    "errors": 5,
    "plural": 5,
    "strict_model": 5,
    "process": 5,
    "schemas": 5,
    "parsing": 5,
    "resources": 5,
    "faults": 5,
    "host_faults": 5,
    "dag": 5,
    "degradation": 5,
    "status_label": 5,
    "refusals": 5,
    "depth_view": 5,
    "recovery": 5,
    "redaction": 5,
    "owners": 5,
    "fakeapi": 5,
}
"""The direction of imports, README's map: cli → tasks → workflow → {context, workers, sandbox,
workspace, guard, policy, project} → state → config/errors. A module imports its own layer's or a
lower layer's modules, never a higher one's (a wing may use a sibling wing)."""

BELOW_CONFIG = {
    "supervisor.core.trustmap": 5,
    "supervisor.core.trust_records": 5,
    "supervisor.core.projects": 5,
}
"""The trust map and the trust records are read by config itself, which filters a repository's
settings through them as it loads them, and the projects' model is part of the settings, so they
sit in the bottom layer (they import nothing of the package but errors and strict_model)."""


def layer(module: str) -> int:
    if module in BELOW_CONFIG:
        return BELOW_CONFIG[module]
    parts = module.split(".")
    return LAYERS[parts[1]] if len(parts) > 1 else 5


def test_every_top_level_module_and_wing_has_a_layer() -> None:
    names = {p.stem for p in PACKAGE_DIR.glob("*.py")} | {
        p.name for p in PACKAGE_DIR.iterdir() if (p / "__init__.py").is_file()
    }
    assert names - {"__init__"} - set(LAYERS) == set(), "give the new module a layer in LAYERS"


def test_no_import_runs_against_the_direction_of_the_layers() -> None:
    against = [
        f"{e.importer} ({e.where}) imports {e.imported}"
        for e in import_graph(PACKAGE_DIR, "supervisor")
        if layer(e.importer) > layer(e.imported)
    ]
    assert against == [], (
        "imports against the direction cli → tasks → workflow → wings → state → config:\n"
        + "\n".join(against)
        + "\nMove the shared part down, or pass it in from above."
    )


def test_the_direction_check_sees_an_import_against_it(tmp_path: Path) -> None:
    pkg = tmp_path / "supervisor"
    (pkg / "state").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "state" / "__init__.py").write_text("")
    (pkg / "tasks.py").write_text("X = 1\n")
    (pkg / "state" / "store.py").write_text(
        "def f():\n    from supervisor.lifecycle.tasks import X\n"
    )
    edges = import_graph(pkg, "supervisor")
    assert [(e.importer, e.imported) for e in edges if layer(e.importer) > layer(e.imported)] == [
        ("supervisor.state.store", "supervisor.lifecycle.tasks")
    ]


def test_every_wing_names_its_public_surface_in_three_lines_or_fewer() -> None:
    for wing in ("workspace", "guard", "policy", "project", "context"):
        doc = ast.get_docstring(ast.parse((PACKAGE_DIR / wing / "__init__.py").read_text()))
        assert doc and len(doc.splitlines()) <= 3 and "Public:" in doc, wing
