"""The package's source read as syntax trees, once per test process.

Several specs check a rule over every module of the package (import cycles and layers, the
trust map's paths, who imports the stand-in sandbox); each parse of the whole package is ~0.8 s
of CPU. The trees are shared, so a spec only reads them.
"""

from __future__ import annotations

import ast
import functools


@functools.cache
def parsed(source: str, filename: str = "<unknown>") -> ast.Module:
    """The tree of `source` (keyed by the text itself, so a changed file is parsed afresh)."""
    return ast.parse(source, filename)
