"""Writes the user guide's generated pages: docs/configuration.md, docs/index.md, docs/wings.md.

A hand-kept reference drifts from the schema the loader enforces; the configuration page is
rendered from the pydantic models (keys, types, defaults) and the words written beside each field
in the source (its attribute docstring, or the comment lines just above it). The guide's home is
README.md with its links made relative to docs/, so the two never say different things.
tests/test_docs_site.py fails when a page in the tree differs from what this writes. Run it after
changing a setting or the README:

    .venv/bin/python scripts/docs_pages.py
"""

from __future__ import annotations

import ast
import importlib.util
import inspect
import textwrap
import types
import typing
from pathlib import Path
from typing import Any, get_args, get_origin

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from supervisor.core.config import Settings

HEADER = """\
# Configuration reference

Settings come from YAML files, each layer over the one before (lowest first): the package's
`config/defaults.yaml` and `config/limits.yaml`, your own `~/.supervisor/config.yaml`, the
repository's `.supervisor/config.yaml`, then the command line's flags. Every file is checked
against the schema below: a key it does not know is refused, naming the file and the likeliest
known key. The repository's settings that decide where credentials go, or that weaken a check,
count only once you trust the repository (`supervisor trust`); `supervisor config show` prints
the settings in effect and the file each came from.

This page is generated from the settings models (`scripts/docs_pages.py`).
"""


def _notes(model: type[BaseModel]) -> dict[str, str]:
    """The words beside each field in the model's source: its docstring, else the comments above."""
    try:
        source = textwrap.dedent(inspect.getsource(model))
    except (OSError, TypeError):
        return {}
    lines = source.splitlines()
    body = ast.parse(source).body[0]
    assert isinstance(body, ast.ClassDef)
    notes: dict[str, str] = {}
    for index, node in enumerate(body.body):
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
            continue
        following = body.body[index + 1] if index + 1 < len(body.body) else None
        if (
            isinstance(following, ast.Expr)
            and isinstance(following.value, ast.Constant)
            and isinstance(following.value.value, str)
        ):
            notes[node.target.id] = " ".join(following.value.value.split())
            continue
        above: list[str] = []
        row = node.lineno - 2
        while row >= 0 and lines[row].strip().startswith("#"):
            above.insert(0, lines[row].strip().lstrip("#").strip())
            row -= 1
        if above:
            notes[node.target.id] = " ".join(above)
    return notes


def _type_name(annotation: Any) -> str:
    origin = get_origin(annotation)
    if origin is typing.Literal:
        return " | ".join(repr(value) for value in get_args(annotation))
    if origin in (typing.Union, types.UnionType):
        return " | ".join(_type_name(arg) for arg in get_args(annotation))
    if origin is not None:
        args = ", ".join(_type_name(arg) for arg in get_args(annotation))
        return f"{getattr(origin, '__name__', str(origin))}[{args}]"
    if annotation is type(None):
        return "null"
    return getattr(annotation, "__name__", str(annotation))


def _default(info: FieldInfo) -> str:
    if info.default_factory is not None:
        value = info.default_factory()  # type: ignore[call-arg]
        if isinstance(value, BaseModel):
            return ""
        return f"`{value!r}`" if value not in ({}, []) else "empty"
    if info.default is PydanticUndefined:
        return "required"
    return f"`{info.default!r}`"


def _model_of(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return None


def _entries(model: type[BaseModel], prefix: str, out: list[str]) -> None:
    notes = _notes(model)
    nested: list[tuple[str, type[BaseModel]]] = []
    for name, info in model.model_fields.items():
        key = f"{prefix}{name}"
        inner = _model_of(info.annotation)
        if inner is not None:
            nested.append((key, inner))
            continue
        default = _default(info)
        facts = _type_name(info.annotation) + (f", default {default}" if default else "")
        note = notes.get(name, "")
        out.append(f"- `{key}` ({facts})" + (f": {note}" if note else ""))
    for key, inner in nested:
        out.append("")
        _section(inner, key, out)


def _section(model: type[BaseModel], key: str, out: list[str]) -> None:
    out.append(f"## `{key}`")
    out.append("")
    doc = model.__dict__.get("__doc__")  # its own, not the base model's
    if doc:
        out.append(" ".join(doc.split()))
        out.append("")
    _entries(model, key + ".", out)


def configuration() -> str:
    out = [HEADER, "## Top-level keys", ""]
    _entries(Settings, "", out)
    return "\n".join(out).rstrip() + "\n"


def home(readme: str) -> str:
    """README.md as the guide's first page: its links into docs/ made relative to docs/ itself."""
    kept = [line for line in readme.splitlines() if "](docs/index.md)" not in line]
    text = "\n".join(kept).replace("](docs/", "](")
    return text.replace("\n\n\n", "\n\n") + "\n"


ROOT = Path(__file__).resolve().parents[1]


def _wings_page() -> str:
    """docs/wings.md, from the table tests/test_import_cycles.py enforces (tests/wings.py)."""
    spec = importlib.util.spec_from_file_location("wings", ROOT / "tests" / "wings.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    page: str = module.page()
    return page


def pages() -> dict[Path, str]:
    """Each generated page and what it should hold."""
    return {
        ROOT / "docs" / "wings.md": _wings_page(),
        ROOT / "docs" / "configuration.md": configuration(),
        ROOT / "docs" / "index.md": home((ROOT / "README.md").read_text()),
    }


if __name__ == "__main__":
    for path, text in pages().items():
        path.write_text(text)
