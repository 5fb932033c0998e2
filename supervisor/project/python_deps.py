"""Every dependency a Python project declares, read as data: the requirements the image installs.

Projects declare dependencies in many places: pyproject's `[project]` (and optional groups, PEP 735
`[dependency-groups]`, Poetry, PDM, uv and Hatch tables), `setup.py` `install_requires`,
`setup.cfg`, Pipfile, requirements and constraints files; lock files (poetry.lock, pdm.lock,
uv.lock, Pipfile.lock) pin the versions. The host reads all of it without running anything:
`setup.py` through `ast` (only literal lists, or names bound to literals at module level), never
executed, because it comes from a worktree a worker may have written. The result is two pip files,
requirements and constraints, which the project image's build installs with `pip install -r -c`.
"""

from __future__ import annotations

import ast
import configparser
import json
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REQUIREMENTS_FILE = re.compile(r"^requirements[\w.\-]*\.txt$")
CONSTRAINTS_FILE = re.compile(r"^constraints[\w.\-]*\.txt$")
LOCAL = re.compile(r"^(-e\b|--editable\b|\.|/|file:)")
NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._\-]*)")
INDEX_OPTION = re.compile(r"^(--index-url|-i|--extra-index-url|--find-links|-f|--pre)\b")
MAX_INCLUDE_DEPTH = 5


@dataclass
class PythonDeps:
    requirements: list[str] = field(default_factory=list)
    constraints: list[str] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)
    """Which files declared something, for the build log and `sandbox status`."""

    def add(self, source: str, reqs: list[str]) -> None:
        new = [r.strip() for r in reqs if isinstance(r, str) and r.strip()]
        new = [r for r in new if not LOCAL.match(r) and _name(r) != "python"]
        if new and source not in self.sources:
            self.sources.append(source)
        for req in new:
            if req not in self.requirements:
                self.requirements.append(req)

    def requirements_text(self) -> str:
        return "".join(f"{r}\n" for r in self.requirements)

    def constraints_text(self) -> str:
        return "".join(f"{c}\n" for c in self.constraints)


def read(tree: Path) -> PythonDeps:
    """The dependencies declared in `tree` (a worktree), read without executing anything."""
    deps = PythonDeps()
    pyproject = _toml(tree / "pyproject.toml")
    _pyproject(pyproject, deps)
    _setup_py(tree / "setup.py", deps)
    _setup_cfg(tree / "setup.cfg", deps)
    _pipfile(tree, deps)
    for path in sorted(_files(tree)):
        if REQUIREMENTS_FILE.match(path.name):
            _requirements_file(tree, path, deps, depth=0)
        elif CONSTRAINTS_FILE.match(path.name):
            pinned, included = _pip_lines(tree, path, depth=0)
            deps.constraints += [c for c in pinned + included if not c.startswith("-")]
            deps.sources.append(path.name)
    for lock in ("poetry.lock", "pdm.lock", "uv.lock"):
        pins = _lock_pins(tree / lock, own=_project_name(pyproject))
        if pins:
            deps.constraints += [p for p in pins if p not in deps.constraints]
            deps.sources.append(lock)
    return deps


def _pyproject(data: dict[str, Any], deps: PythonDeps) -> None:
    project = data.get("project", {})
    deps.add("pyproject.toml [project]", _strings(project.get("dependencies")))
    for group, reqs in (project.get("optional-dependencies") or {}).items():
        deps.add(f"pyproject.toml [project.optional-dependencies] {group}", _strings(reqs))
    for group, reqs in (data.get("dependency-groups") or {}).items():
        deps.add(f"pyproject.toml [dependency-groups] {group}", _strings(reqs))
    tool = data.get("tool", {})
    poetry = tool.get("poetry", {})
    tables = [poetry.get("dependencies"), poetry.get("dev-dependencies")]
    tables += [g.get("dependencies") for g in (poetry.get("group") or {}).values()]
    for table in tables:
        deps.add("pyproject.toml [tool.poetry]", _poetry(table or {}))
    for group, reqs in (tool.get("pdm", {}).get("dev-dependencies") or {}).items():
        deps.add(f"pyproject.toml [tool.pdm.dev-dependencies] {group}", _strings(reqs))
    deps.add("pyproject.toml [tool.uv]", _strings(tool.get("uv", {}).get("dev-dependencies")))
    for name, env in (tool.get("hatch", {}).get("envs") or {}).items():
        if isinstance(env, dict) and name in ("default", "test", "tests", "dev"):
            reqs = _strings(env.get("dependencies")) + _strings(env.get("extra-dependencies"))
            deps.add(f"pyproject.toml [tool.hatch.envs.{name}]", reqs)


def _poetry(table: dict[str, Any]) -> list[str]:
    """Poetry's `name = "^1.2"` entries as names (poetry.lock, when present, pins them)."""
    reqs = []
    for name, spec in table.items():
        if name.lower() == "python":
            continue
        if isinstance(spec, dict) and ("path" in spec or "git" in spec or "url" in spec):
            continue
        extras = spec.get("extras") if isinstance(spec, dict) else None
        reqs.append(f"{name}[{','.join(extras)}]" if extras else name)
    return reqs


def _setup_py(path: Path, deps: PythonDeps) -> None:
    """`install_requires`, `extras_require` and `tests_require` of the `setup()` call, where
    they are literals or module-level names bound to literals (the common shapes)."""
    if not path.is_file() or path.is_symlink():
        return
    try:
        tree = ast.parse(path.read_text(errors="replace"))
    except (SyntaxError, ValueError):
        return
    bound: dict[str, ast.expr] = {}
    node: ast.AST
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, ast.Name):
                bound[target.id] = node.value
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and _call_name(node.func) == "setup"):
            continue
        for keyword in node.keywords:
            value = _literal(keyword.value, bound)
            if keyword.arg in ("install_requires", "tests_require"):
                deps.add(f"setup.py {keyword.arg}", _strings(value))
            elif keyword.arg == "extras_require" and isinstance(value, dict):
                for extra, reqs in value.items():
                    deps.add(f"setup.py extras_require {extra}", _strings(reqs))


def _setup_cfg(path: Path, deps: PythonDeps) -> None:
    if not path.is_file() or path.is_symlink():
        return
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read_string(path.read_text(errors="replace"))
    except configparser.Error:
        return
    for key in ("install_requires", "tests_require"):
        if parser.has_option("options", key):
            deps.add(f"setup.cfg {key}", parser.get("options", key).splitlines())
    if parser.has_section("options.extras_require"):
        for extra, value in parser.items("options.extras_require"):
            deps.add(f"setup.cfg extras_require {extra}", value.splitlines())


def _pipfile(tree: Path, deps: PythonDeps) -> None:
    data = _toml(tree / "Pipfile")
    for section in ("packages", "dev-packages"):
        reqs = []
        for name, spec in (data.get(section) or {}).items():
            if isinstance(spec, str) and spec not in ("*", ""):
                reqs.append(f"{name}{spec}")
            elif not isinstance(spec, dict) or not ({"path", "git", "file"} & set(spec)):
                reqs.append(name)
        deps.add(f"Pipfile [{section}]", reqs)
    try:
        lock = json.loads((tree / "Pipfile.lock").read_text())
    except (OSError, ValueError):
        return
    for section in ("default", "develop"):
        for name, spec in (lock.get(section) or {}).items():
            version = spec.get("version") if isinstance(spec, dict) else None
            if isinstance(version, str) and version.startswith("=="):
                deps.constraints.append(f"{name}{version}")


def _requirements_file(tree: Path, path: Path, deps: PythonDeps, depth: int) -> None:
    reqs, constraints = _pip_lines(tree, path, depth)
    deps.add(path.name, reqs)
    deps.constraints += [c for c in constraints if c not in deps.constraints]


def _pip_lines(tree: Path, path: Path, depth: int) -> tuple[list[str], list[str]]:
    """A pip requirements file's requirements and constraints, its `-r`/`-c` includes inlined
    (only files inside the tree), local paths and editables left out (the source is not in the
    image), index options kept."""
    reqs: list[str] = []
    constraints: list[str] = []
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return reqs, constraints
    for raw in lines:
        line = raw.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        include = re.match(r"^(-r|--requirement|-c|--constraint)[\s=]+(\S+)$", line)
        if include:
            target = (path.parent / include.group(2)).resolve()
            if depth < MAX_INCLUDE_DEPTH and _inside(tree, target) and target.is_file():
                more, more_constraints = _pip_lines(tree, target, depth + 1)
                if include.group(1) in ("-c", "--constraint"):
                    constraints += more
                else:
                    reqs += more
                constraints += more_constraints
            continue
        if INDEX_OPTION.match(line) or (not line.startswith("-") and not LOCAL.match(line)):
            reqs.append(line)
    return reqs, constraints


def _lock_pins(path: Path, own: str) -> list[str]:
    """`name==version` for each package a TOML lock file holds (but the project itself)."""
    data = _toml(path)
    pins = []
    for package in data.get("package") or []:
        name, version = package.get("name"), package.get("version")
        source = package.get("source") or {}
        if not isinstance(name, str) or not isinstance(version, str) or _name(name) == own:
            continue
        local = {"editable", "virtual", "directory", "path"}
        if isinstance(source, dict) and local & set(source):
            continue
        pins.append(f"{name}=={version}")
    return pins


def _files(tree: Path) -> list[Path]:
    found = [p for p in tree.iterdir() if p.is_file() and not p.is_symlink()]
    folder = tree / "requirements"
    if folder.is_dir() and not folder.is_symlink():
        found += [p for p in folder.glob("*.txt") if p.is_file() and not p.is_symlink()]
    return found


def _inside(tree: Path, path: Path) -> bool:
    try:
        path.relative_to(tree.resolve())
    except ValueError:
        return False
    return True


def _literal(node: ast.expr, bound: dict[str, ast.expr], depth: int = 0) -> Any:
    if isinstance(node, ast.Name) and node.id in bound and depth < 3:
        return _literal(bound[node.id], bound, depth + 1)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):  # base + ["extra"]
        left, right = _literal(node.left, bound, depth), _literal(node.right, bound, depth)
        if isinstance(left, list) and isinstance(right, list):
            return left + right
    if isinstance(node, ast.Dict):
        keys = [_literal(k, bound, depth) if k is not None else None for k in node.keys]
        values = [_literal(v, bound, depth) for v in node.values]
        return {k: v for k, v in zip(keys, values, strict=True) if isinstance(k, str)}
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None


def _call_name(func: ast.expr) -> str:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return ""


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return value.splitlines()
    if isinstance(value, (list, tuple)):
        return [v for v in value if isinstance(v, str)]
    return []


def _project_name(data: dict[str, Any]) -> str:
    name = data.get("project", {}).get("name") or data.get("tool", {}).get("poetry", {}).get("name")
    return _name(name) if isinstance(name, str) else ""


def _name(requirement: str) -> str:
    match = NAME.match(requirement)
    return re.sub(r"[-_.]+", "-", match.group(1)).lower() if match else ""


def _toml(path: Path) -> dict[str, Any]:
    if not path.is_file() or path.is_symlink():
        return {}
    try:
        return tomllib.loads(path.read_text(errors="replace"))
    except (tomllib.TOMLDecodeError, OSError):
        return {}
