"""Which repository files a source file imports, so a worker sees a target's dependencies.

Python is read with `ast` (absolute and relative imports, `src/` layouts); TypeScript and
JavaScript by their import, export-from, require and dynamic import statements, relative paths
only (bare package names live in node_modules, not in the repository).
"""

from __future__ import annotations

import ast
import posixpath
import re
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable


JS_SUFFIXES = (".ts", ".tsx", ".js", ".jsx", ".mjs", ".cjs")
JS_IMPORT = re.compile(
    r"""(?:import\s+(?:[^'"]*?\s+from\s+)?|export\s+[^'"]*?\s+from\s+|require\(\s*|import\(\s*)"""
    r"""['"](\.{1,2}/[^'"]+)['"]"""
)
PYTHON_ROOTS = ("", "src/", "lib/")


def resolve_imports(
    root: Path | Callable[[str], str | None], path: str, files: set[str]
) -> list[str]:
    """Repository files imported by `path`, in the order they appear; `root` is a directory or
    a reader of a file's text by relative path (a candidate's blobs)."""
    if path.endswith(".py"):
        found = _python(root, path, files)
    elif path.endswith(JS_SUFFIXES):
        found = _javascript(root, path, files)
    else:
        return []
    seen: list[str] = []
    for item in found:
        if item != path and item not in seen:
            seen.append(item)
    return seen


def _text(root: Path | Callable[[str], str | None], path: str) -> str | None:
    if isinstance(root, Path):
        return (root / path).read_text(encoding="utf-8", errors="replace")
    return root(path)


def _python(root: Path | Callable[[str], str | None], path: str, files: set[str]) -> list[str]:
    try:
        tree = ast.parse(_text(root, path) or "")
    except (SyntaxError, ValueError, OSError):
        return []
    package = posixpath.dirname(path)
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                found += _python_module(alias.name, files)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package
                for _ in range(node.level - 1):
                    base = posixpath.dirname(base)
                dotted = ".".join(p for p in [*base.split("/"), node.module or ""] if p)
                candidates = [dotted] + [f"{dotted}.{a.name}" for a in node.names]
                roots: tuple[str, ...] = ("",)
            else:
                module = node.module or ""
                candidates = [module] + [f"{module}.{a.name}" for a in node.names]
                roots = PYTHON_ROOTS
            for candidate in candidates:
                found += _python_module(candidate, files, roots)
    return found


def _python_module(
    dotted: str, files: set[str], roots: tuple[str, ...] = PYTHON_ROOTS
) -> list[str]:
    rel = dotted.replace(".", "/")
    for prefix in roots:
        # A package directory wins over a same-named module, as in Python's own import system.
        for option in (f"{prefix}{rel}/__init__.py", f"{prefix}{rel}.py"):
            if option in files:
                return [option]
    return []


def _javascript(root: Path | Callable[[str], str | None], path: str, files: set[str]) -> list[str]:
    try:
        text = _text(root, path) or ""
    except OSError:
        return []
    found = []
    for spec in JS_IMPORT.findall(text):
        base = posixpath.normpath(posixpath.join(posixpath.dirname(path), spec))
        options = [base, *(base + s for s in JS_SUFFIXES)]
        options += [f"{base}/index{s}" for s in JS_SUFFIXES]
        if base.endswith(".js"):  # TypeScript's ESM style: import "./x.js" means x.ts
            options += [base[:-3] + ".ts", base[:-3] + ".tsx"]
        match = next((o for o in options if o in files), None)
        if match is not None:
            found.append(match)
    return found
