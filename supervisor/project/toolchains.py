"""The toolchain versions a project declares (issue 57): read as data from its files, never run.

A project that needs Node 22, Python 3.12 or Go 1.24 says so in its own files; an image that
carries another version fails in ways that point at the package manager, not at the cause
(pnpm 11 on Node 20 dies with `ERR_UNKNOWN_BUILTIN_MODULE: node:sqlite`). So every declaration
is read here, with the file (and field) it comes from, for the root and for each member of a
monorepo:

- Node: `engines.node`, `volta.node`, `devEngines.runtime` (name node) in package.json,
  `.nvmrc`, `.node-version`; the declared package manager (`packageManager`,
  `devEngines.packageManager`) is returned as a pin whose own engine range the registry knows
  (supervisor/project/toolchain_sources.py).
- Python: `requires-python` in pyproject.toml (and uv.lock's), `.python-version`.
- Go: go.mod's and go.work's `go` line (a minimum) and `toolchain` line.
- Rust: `channel` of rust-toolchain.toml, or the plain `rust-toolchain` file.

Pure functions over a {repository-relative path: bytes} map (the dependency files of a commit or
a directory): fast to test, and the same for a worktree and a commit's blobs. Which version each
declaration resolves to: supervisor/project/toolchain_resolve.py.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Mapping
from typing import Any, Literal

from supervisor.core.strict_model import StrictModel

Tool = Literal["node", "python", "go", "rust"]
TOOLS: tuple[Tool, ...] = ("node", "python", "go", "rust")
TOOL_NAMES: dict[str, str] = {"node": "Node", "python": "Python", "go": "Go", "rust": "Rust"}
TOOLCHAIN_FILES = re.compile(
    r"^(\.nvmrc|\.node-version|\.python-version|rust-toolchain|rust-toolchain\.toml)$"
)
"""Files that declare only a toolchain version: dependency files of the image too (a change to
one means another toolchain, so another image)."""
NODE_ALIASES = {"node", "stable", "latest", "current", "lts", "lts/*", "*", ""}
"""nvm's names for "any recent Node": no constraint of their own."""
GO_LINE = re.compile(r"^go\s+(\d+\.\d+(?:\.\d+)?)\s*$", re.M)
TOOLCHAIN_LINE = re.compile(r"^toolchain\s+go(\d+\.\d+(?:\.\d+)?)\S*\s*$", re.M)


class Declaration(StrictModel):
    """One version requirement, as written, and where: `>=22.13` from `package.json
    (engines.node)`. `kind` says how the spec reads: an npm range (node), a PEP 440 specifier
    (python), a minimum (go `go` line), an exact toolchain (go `toolchain`, rust channel)."""

    tool: Tool
    spec: str
    source: str
    kind: Literal["npm-range", "pep440", "minimum", "toolchain", "channel"]


class ManagerPin(StrictModel):
    """A declared package manager (`pnpm@11.13.1`): its own `engines.node` is a Node
    requirement of the project too, known only to the registry."""

    name: str
    version: str
    source: str


def declarations(files: Mapping[str, bytes]) -> list[Declaration]:
    """Every toolchain declaration in `files` (root first, then members, by path)."""
    found: list[Declaration] = []
    for path in sorted(files, key=lambda p: (p.count("/"), p)):
        name = path.rsplit("/", 1)[-1]
        text = files[path].decode("utf-8", "replace")
        reader = READERS.get(name)
        if reader is not None:
            found += reader(text, path)
    return found


def declares_any(files: Mapping[str, bytes]) -> bool:
    """Whether `files` declare a toolchain at all: a project that declares none costs no
    probe of the image and no registry lookup."""
    return bool(declarations(files) or manager_pins(files))


def manager_pins(files: Mapping[str, bytes]) -> list[ManagerPin]:
    """The package managers the package.json files pin (`packageManager`, or `devEngines`)."""
    pins: list[ManagerPin] = []
    for path in sorted(p for p in files if p.rsplit("/", 1)[-1] == "package.json"):
        data = _json(files[path])
        declared = data.get("packageManager")
        if isinstance(declared, str):
            match = re.fullmatch(r"(npm|pnpm|yarn)@([0-9][\w.\-]*)(\+.*)?", declared.strip())
            if match:
                pins.append(
                    ManagerPin(name=match[1], version=match[2], source=f"{path} (packageManager)")
                )
                continue
        manager = _table(_table(data, "devEngines"), "packageManager")
        if manager.get("name") in ("npm", "pnpm", "yarn") and isinstance(
            manager.get("version"), str
        ):
            where = f"{path} (devEngines.packageManager)"
            pins.append(ManagerPin(name=manager["name"], version=manager["version"], source=where))
    return pins


def _package_json(text: str, path: str) -> list[Declaration]:
    data = _json(text.encode())
    found = []
    for spec, where in (
        (_table(data, "engines").get("node"), "engines.node"),
        (_table(data, "volta").get("node"), "volta.node"),
        (_runtime(data), "devEngines.runtime"),
    ):
        if isinstance(spec, str) and spec.strip() not in NODE_ALIASES:
            found.append(_node(spec, f"{path} ({where})"))
    return found


def _runtime(data: dict[str, Any]) -> Any:
    runtime = _table(data, "devEngines").get("runtime")
    for entry in runtime if isinstance(runtime, list) else [runtime]:
        if isinstance(entry, dict) and entry.get("name") == "node":
            return entry.get("version")
    return None


def _nvmrc(text: str, path: str) -> list[Declaration]:
    line = _first_line(text)
    if line.lower() in NODE_ALIASES or line.lower().startswith("lts/"):
        return []
    return [_node(line, path)]


def _node(spec: str, source: str) -> Declaration:
    return Declaration(
        tool="node", spec=spec.strip().removeprefix("v"), source=source, kind="npm-range"
    )


def _pyproject(text: str, path: str) -> list[Declaration]:
    spec = _table(_toml(text), "project").get("requires-python")
    if isinstance(spec, str) and spec.strip():
        where = f"{path} (requires-python)"
        return [Declaration(tool="python", spec=spec.strip(), source=where, kind="pep440")]
    return []


def _uv_lock(text: str, path: str) -> list[Declaration]:
    spec = _toml(text).get("requires-python")
    if isinstance(spec, str) and spec.strip():
        where = f"{path} (requires-python)"
        return [Declaration(tool="python", spec=spec.strip(), source=where, kind="pep440")]
    return []


def _python_version(text: str, path: str) -> list[Declaration]:
    """pyenv's file: `3.12` or `3.12.4` (a name such as `pypy3.10` or `system` says nothing
    about CPython's version here)."""
    line = _first_line(text)
    if not re.fullmatch(r"\d+\.\d+(\.\d+)?", line):
        return []
    spec = f"=={line}.*" if line.count(".") == 1 else f"=={line}"
    return [Declaration(tool="python", spec=spec, source=path, kind="pep440")]


def _go_mod(text: str, path: str) -> list[Declaration]:
    found = []
    if go := GO_LINE.search(text):
        found.append(Declaration(tool="go", spec=go[1], source=f"{path} (go)", kind="minimum"))
    if toolchain := TOOLCHAIN_LINE.search(text):
        where = f"{path} (toolchain)"
        found.append(Declaration(tool="go", spec=toolchain[1], source=where, kind="toolchain"))
    return found


def _rust_toolchain_toml(text: str, path: str) -> list[Declaration]:
    channel = _table(_toml(text), "toolchain").get("channel")
    return _rust(channel, f"{path} (toolchain.channel)") if isinstance(channel, str) else []


def _rust_toolchain(text: str, path: str) -> list[Declaration]:
    if text.lstrip().startswith("["):  # the TOML form under the old name
        return _rust_toolchain_toml(text, path)
    return _rust(_first_line(text), path)


def _rust(channel: str, source: str) -> list[Declaration]:
    channel = channel.strip()
    if not channel:
        return []
    return [Declaration(tool="rust", spec=channel, source=source, kind="channel")]


READERS = {
    "package.json": _package_json,
    ".nvmrc": _nvmrc,
    ".node-version": _nvmrc,
    "pyproject.toml": _pyproject,
    "uv.lock": _uv_lock,
    ".python-version": _python_version,
    "go.mod": _go_mod,
    "go.work": _go_mod,
    "rust-toolchain.toml": _rust_toolchain_toml,
    "rust-toolchain": _rust_toolchain,
}


def _first_line(text: str) -> str:
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            return line
    return ""


def _json(data: bytes) -> dict[str, Any]:
    try:
        value = json.loads(data.decode("utf-8", "replace"))
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _toml(text: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return {}


def _table(data: dict[str, Any], key: str) -> dict[str, Any]:
    value = data.get(key)
    return value if isinstance(value, dict) else {}
