"""The house stays readable: no module over 500 lines, no function over 80 (issue 51). A module
that outgrows the first splits by what its parts do; a function that outgrows the second splits
by what it decides (docs/wings.md says where a new module goes)."""

from __future__ import annotations

import ast
from pathlib import Path

import supervisor

PACKAGE_DIR = Path(supervisor.__file__).resolve().parent
MODULE_LINES = 500
FUNCTION_LINES = 80


def _modules() -> list[Path]:
    return sorted(p for p in PACKAGE_DIR.rglob("*.py") if "__pycache__" not in p.parts)


def test_no_module_is_over_500_lines() -> None:
    long = {
        str(p.relative_to(PACKAGE_DIR)): n
        for p in _modules()
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MODULE_LINES
    }
    assert long == {}, f"split these by what their parts do: {long}"


def test_no_function_is_over_80_lines() -> None:
    long = {}
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > FUNCTION_LINES:
                    long[f"{path.relative_to(PACKAGE_DIR)}:{node.name}"] = lines
    assert long == {}, f"split these by what they decide: {long}"
