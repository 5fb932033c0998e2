"""Project auto-detection for `supervisor init`: stacks, frameworks, role packs and gate commands.

It reads manifests (pyproject, requirements, package.json, Cargo.toml, go.mod, docker-compose)
and looks for telling files (`*.sol`, `*.tf`, Kubernetes manifests) in a bounded walk that skips
dependency and build folders, so it stays fast on a large repository.
"""

from __future__ import annotations

import json
import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from supervisor.project import build_first

if TYPE_CHECKING:
    from supervisor.project.toolchain_resolve import Resolved

SKIP_DIRS = {
    ".git",
    "node_modules",
    ".venv",
    "venv",
    "__pycache__",
    "dist",
    "build",
    "target",
    ".supervisor",
    ".tox",
    ".mypy_cache",
    ".pytest_cache",
    "vendor",
}
MAX_FILES = 20_000
MAX_DEPTH = 6

PY_FRAMEWORKS = {
    "pandas": "pandas",
    "apache-airflow": "airflow",
    "airflow": "airflow",
    "dbt-core": "dbt",
    "pyspark": "pyspark",
    "django": "django",
    "fastapi": "fastapi",
    "flask": "flask",
    "click": "click",
    "typer": "typer",
    "ccxt": "ccxt",
    "backtrader": "backtrader",
    "zipline": "zipline",
    "alpaca-trade-api": "alpaca",
    "ib-insync": "ib_insync",
    "psycopg2": "postgres",
    "psycopg2-binary": "postgres",
    "psycopg": "postgres",
    "asyncpg": "postgres",
    "sqlalchemy": "sqlalchemy",
    "pytest": "pytest",
    "ruff": "ruff",
    "flake8": "flake8",
}
JS_FRAMEWORKS = {
    "react": "react",
    "vue": "vue",
    "next": "nextjs",
    "svelte": "svelte",
    "express": "express",
    "fastify": "fastify",
    "commander": "commander",
    "yargs": "yargs",
    "hardhat": "hardhat",
    "ccxt": "ccxt",
    "pg": "postgres",
    "eslint": "eslint",
    "vitest": "vitest",
    "jest": "jest",
    "mocha": "mocha",
}
PACKS = {
    "web_frontend": {"react", "vue", "nextjs", "svelte"},
    "backend_api": {"fastapi", "django", "flask", "express", "fastify", "postgres"},
    "data_pipeline": {"pandas", "airflow", "dbt", "pyspark"},
    "trading": {"ccxt", "backtrader", "zipline", "alpaca", "ib_insync"},
    "cli_tooling": {"click", "typer", "commander", "yargs", "cli-entry-point"},
    "infrastructure": {"terraform", "kubernetes", "docker-compose"},
    "smart_contracts": {"solidity", "hardhat", "foundry"},
    "rust": {"rust"},
    "go": {"go"},
}
REQUIREMENT_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._\-]*)")


@dataclass
class Detection:
    stacks: list[str] = field(default_factory=list)
    frameworks: list[str] = field(default_factory=list)
    evidence: dict[str, str] = field(default_factory=dict)
    role_packs: list[str] = field(default_factory=list)
    optional_packs: list[str] = field(default_factory=lambda: ["security"])
    gates: dict[str, str] = field(default_factory=dict)
    package_manager: str = ""
    """Node only: npm, pnpm or yarn, as the project declares it."""
    package_manager_version: str = ""
    toolchains: list[Resolved] = field(default_factory=list)
    """The toolchain versions the project declares, resolved (supervisor/project/
    toolchain_sources.py); empty until resolved, and for a project that declares none."""
    toolchain_problem: str = ""
    """Why a declared toolchain cannot be had here (the build stops on it, with the fix)."""

    def found(self, kind: str, name: str, source: str) -> None:
        target = self.stacks if kind == "stack" else self.frameworks
        if name not in target:
            target.append(name)
            self.evidence[name] = source


def detect(repo: Path, workspace_root: Path | None = None) -> Detection:
    """What `repo` is; `workspace_root`: the monorepo `repo` is a package of, whose package
    manager (declared or by its lock file) the package's gates use."""
    d = Detection()
    files = _walk(repo)
    names = {Path(f).name for f in files}
    _python(repo, files, d)
    _node(repo, d, workspace_root)
    if "Cargo.toml" in names and (repo / "Cargo.toml").is_file():
        d.found("stack", "rust", "Cargo.toml")
    if (repo / "go.mod").is_file():
        d.found("stack", "go", "go.mod")
    if (repo / "go.work").is_file():  # a workspace of modules, with or without a root one
        d.found("stack", "go", "go.work")
        d.found("framework", "go-workspace", "go.work")
    for f in files:
        if f.endswith(".sol"):
            d.found("stack", "solidity", f)
        elif f.endswith(".tf"):
            d.found("framework", "terraform", f)
        elif f.startswith("docker-compose") or Path(f).name.startswith(
            ("docker-compose", "compose.y")
        ):
            _compose(repo / f, f, d)
        elif f.endswith((".yaml", ".yml")) and _is_k8s(repo / f):
            d.found("framework", "kubernetes", f)
        elif Path(f).name in ("foundry.toml",):
            d.found("framework", "foundry", f)
        elif Path(f).name == "Dockerfile":
            d.found("stack", "docker", f)
    _packs(d)
    _gates(repo, files, d)
    return d


def _walk(repo: Path) -> list[str]:
    found: list[str] = []
    stack = [(repo, 0)]
    while stack and len(found) < MAX_FILES:
        directory, depth = stack.pop()
        try:
            entries = list(os.scandir(directory))
        except OSError:
            continue
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                if entry.name not in SKIP_DIRS and depth < MAX_DEPTH:
                    stack.append((Path(entry.path), depth + 1))
            elif entry.is_file(follow_symlinks=False):
                found.append(os.path.relpath(entry.path, repo).replace(os.sep, "/"))
    return sorted(found)


def _python(repo: Path, files: list[str], d: Detection) -> None:
    deps: dict[str, str] = {}
    pyproject = repo / "pyproject.toml"
    if pyproject.is_file():
        d.found("stack", "python", "pyproject.toml")
        data = _toml(pyproject)
        project = data.get("project", {})
        for req in [
            *project.get("dependencies", []),
            *(r for group in project.get("optional-dependencies", {}).values() for r in group),
        ]:
            deps.setdefault(_req_name(req), "pyproject.toml")
        poetry = data.get("tool", {}).get("poetry", {})
        for section in ("dependencies", "dev-dependencies"):
            for name in poetry.get(section, {}):
                deps.setdefault(name.lower(), "pyproject.toml")
        for group in poetry.get("group", {}).values():
            for name in group.get("dependencies", {}):
                deps.setdefault(name.lower(), "pyproject.toml")
        if project.get("scripts") or poetry.get("scripts"):
            d.found("framework", "cli-entry-point", "pyproject.toml [project.scripts]")
    for f in files:
        name = Path(f).name
        if "/" not in f and (re.fullmatch(r"requirements.*\.txt", name) or name == "Pipfile"):
            d.found("stack", "python", f)
            for line in (repo / f).read_text(errors="replace").splitlines():
                if line.strip() and not line.lstrip().startswith(("#", "-", "[")):
                    deps.setdefault(_req_name(line), f)
        elif f in ("setup.py", "setup.cfg"):
            d.found("stack", "python", f)
            text = (repo / f).read_text(errors="replace").lower()
            for dep in PY_FRAMEWORKS:
                if re.search(rf"['\"\s]{re.escape(dep)}[\s<>=~!'\",;]", text):
                    deps.setdefault(dep, f)
    if "python" not in d.stacks:
        modules = [f for f in files if "/" not in f and f.endswith(".py")]
        if modules:  # a project of plain modules, without packaging metadata
            d.found("stack", "python", modules[0])
    for dep, source in deps.items():
        framework = PY_FRAMEWORKS.get(dep.replace("_", "-"))
        if framework:
            d.found("framework", framework, source)


def _node(repo: Path, d: Detection, workspace_root: Path | None = None) -> None:
    path = repo / "package.json"
    if not path.is_file():
        return
    d.found("stack", "node", "package.json")
    try:
        data = json.loads(path.read_text())
    except ValueError:
        return
    if not isinstance(data, dict):
        return
    deps = {**(data.get("dependencies") or {}), **(data.get("devDependencies") or {})}
    for dep in deps:
        framework = JS_FRAMEWORKS.get(dep) or JS_FRAMEWORKS.get(dep.split("/")[-1])
        if framework:
            d.found("framework", framework, f"package.json ({dep})")
    if "typescript" in deps:
        d.found("framework", "typescript", "package.json (typescript)")
    elif (repo / "tsconfig.json").is_file():
        d.found("framework", "typescript", "tsconfig.json")
    if data.get("bin"):
        d.found("framework", "cli-entry-point", "package.json (bin)")
    d.package_manager, d.package_manager_version, source = _package_manager(repo, data)
    if workspace_root is not None and source.startswith("default"):
        d.package_manager, d.package_manager_version, source = _workspace_manager(workspace_root)
    d.evidence["package-manager"] = source


def _package_manager(repo: Path, data: dict[str, Any]) -> tuple[str, str, str]:
    """(npm|pnpm|yarn, the declared version or "", the evidence): the `packageManager` field
    first (what corepack honours), then the lock file present."""
    declared = data.get("packageManager")
    if isinstance(declared, str):
        match = re.fullmatch(r"(npm|pnpm|yarn)@([0-9][\w.\-]*)(\+.*)?", declared.strip())
        if match:
            return match.group(1), match.group(2), "package.json (packageManager)"
    for lock, manager in (
        ("pnpm-lock.yaml", "pnpm"),
        ("yarn.lock", "yarn"),
        ("package-lock.json", "npm"),
        ("npm-shrinkwrap.json", "npm"),
    ):
        if (repo / lock).is_file():
            return manager, "", lock
    return "npm", "", "default (no lock file)"


def _workspace_manager(root: Path) -> tuple[str, str, str]:
    """The package manager of the monorepo a package belongs to (a package declares none)."""
    try:
        data = json.loads((root / "package.json").read_text())
    except (ValueError, OSError):
        data = {}
    manager, version, source = _package_manager(root, data if isinstance(data, dict) else {})
    if source.startswith("default") and (root / "pnpm-workspace.yaml").is_file():
        return "pnpm", "", "pnpm-workspace.yaml (workspace root)"
    return manager, version, f"{source} (workspace root)"


def _compose(path: Path, rel: str, d: Detection) -> None:
    d.found("framework", "docker-compose", rel)
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except (yaml.YAMLError, OSError):
        return
    for service in (data.get("services") or {}).values():
        image = str((service or {}).get("image", ""))
        for db in ("postgres", "mysql", "redis", "mongo"):
            if image.startswith(db):
                d.found("framework", db, f"{rel} (image {image})")


def _is_k8s(path: Path) -> bool:
    try:
        head = path.read_text(errors="replace")[:4000]
    except OSError:
        return False
    return bool(re.search(r"^apiVersion:", head, re.M) and re.search(r"^kind:", head, re.M))


def _packs(d: Detection) -> None:
    signals = set(d.stacks) | set(d.frameworks)
    d.role_packs = [pack for pack, keys in PACKS.items() if signals & keys]


def _gates(repo: Path, files: list[str], d: Detection) -> None:
    """Commands that run the project's own checks, only where their evidence is in the tree
    (a `test` target in the Makefile, a test script in package.json, test files for pytest)."""
    targets = _make_targets(repo)
    runner = d.package_manager or "npm"
    if "test" in targets:
        d.gates["test"] = "make test"
        d.evidence["gate:test"] = "Makefile (target test)"
    elif "python" in d.stacks and (why := _pytest_evidence(repo, files, d)):
        d.gates["test"] = "python3 -m pytest -q"
        d.evidence["gate:test"] = why
    elif "node" in d.stacks and _npm_script(repo, "test"):
        d.gates["test"] = f"{runner} test"
        d.evidence["gate:test"] = "package.json (scripts.test)"
        if unbuilt := build_first.unbuilt_entry(repo, files):  # the tests import the build
            d.gates["test"] = f"{runner} run build && {runner} test"
            d.evidence["gate:test"] += f"; scripts.build first: {unbuilt} is built, not committed"
    elif "rust" in d.stacks:
        d.gates["test"] = "cargo test"
        d.evidence["gate:test"] = "Cargo.toml"
    elif "go" in d.stacks and (repo / "go.mod").is_file():  # a go.work's modules: their own
        d.gates["test"] = "go test ./..."
        d.evidence["gate:test"] = "go.mod"
    lint = _lint(repo, targets, runner, d)
    if lint is not None:
        d.gates["lint"], d.evidence["gate:lint"] = lint
    if "node" in d.stacks and "typescript" in d.frameworks and "types" not in d.gates:
        if _npm_script(repo, "typecheck"):
            d.gates["types"] = f"{runner} run typecheck"
            d.evidence["gate:types"] = "package.json (scripts.typecheck)"
        elif (repo / "tsconfig.json").is_file():
            d.gates["types"] = "tsc --noEmit -p ."
            d.evidence["gate:types"] = "tsconfig.json"


def _lint(repo: Path, targets: set[str], runner: str, d: Detection) -> tuple[str, str] | None:
    """The lint command and its evidence, the project's own entry point first."""
    if "lint" in targets:
        return "make lint", "Makefile (target lint)"
    if "ruff" in d.frameworks:
        return "ruff check .", d.evidence.get("ruff", "ruff dependency")
    if "flake8" in d.frameworks:
        return "flake8", d.evidence.get("flake8", "flake8 dependency")
    if "node" in d.stacks and _npm_script(repo, "lint"):
        return f"{runner} run lint", "package.json (scripts.lint)"
    if "eslint" in d.frameworks:
        return "npx eslint .", d.evidence.get("eslint", "eslint dependency")
    if "rust" in d.stacks:
        return "cargo clippy -- -D warnings", "Cargo.toml"
    if "go" in d.stacks and (repo / "go.mod").is_file():
        return "go vet ./...", "go.mod"
    return None


def _make_targets(repo: Path) -> set[str]:
    """The Makefile's targets, read as text (it is never run on the host)."""
    makefile = repo / "Makefile"
    if not makefile.is_file() or makefile.is_symlink():
        return set()
    text = makefile.read_text(errors="replace")
    return set(re.findall(r"^([A-Za-z0-9_\-.]+)\s*:(?!=)", text, re.M))


def _pytest_evidence(repo: Path, files: list[str], d: Detection) -> str | None:
    """Why pytest is this project's test runner, or None: pytest configuration, or test files
    that pytest collects (written for pytest or for unittest, which pytest also runs)."""
    if "pytest" in d.frameworks:
        return d.evidence.get("pytest", "pytest dependency")
    data = _toml(repo / "pyproject.toml") if (repo / "pyproject.toml").is_file() else {}
    if "pytest" in data.get("tool", {}):
        return "pyproject.toml [tool.pytest.ini_options]"
    for name, needle in (("pytest.ini", ""), ("setup.cfg", "[tool:pytest]"), ("tox.ini", "pytest")):
        path = repo / name
        if path.is_file() and needle in path.read_text(errors="replace"):
            return name
    if (repo / "noxfile.py").is_file() and "pytest" in (repo / "noxfile.py").read_text(
        errors="replace"
    ):
        return "noxfile.py (runs pytest)"
    for f in files:
        name = Path(f).name
        if not name.endswith(".py") or not (
            name.startswith("test") or name.endswith("_test.py") or f.startswith("tests/")
        ):
            continue
        text = (repo / f).read_text(errors="replace")[:20_000]
        if re.search(r"^\s*(import|from)\s+(pytest|unittest)\b|^def test_", text, re.M):
            return f"{f} (tests)"
    return None


def _npm_script(repo: Path, name: str) -> bool:
    try:
        scripts = json.loads((repo / "package.json").read_text()).get("scripts", {})
    except (ValueError, OSError):
        return False
    script = scripts.get(name, "")
    return bool(script) and "no test specified" not in script


def _toml(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text())
    except (tomllib.TOMLDecodeError, OSError):
        return {}


def _req_name(requirement: str) -> str:
    match = REQUIREMENT_NAME.match(requirement)
    return match.group(1).lower().replace("_", "-") if match else ""
