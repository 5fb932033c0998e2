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
from typing import Any

import yaml

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

    def found(self, kind: str, name: str, source: str) -> None:
        target = self.stacks if kind == "stack" else self.frameworks
        if name not in target:
            target.append(name)
            self.evidence[name] = source


def detect(repo: Path) -> Detection:
    d = Detection()
    files = _walk(repo)
    names = {Path(f).name for f in files}
    _python(repo, files, d)
    _node(repo, d)
    if "Cargo.toml" in names and (repo / "Cargo.toml").is_file():
        d.found("stack", "rust", "Cargo.toml")
    if (repo / "go.mod").is_file():
        d.found("stack", "go", "go.mod")
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
    for dep, source in deps.items():
        framework = PY_FRAMEWORKS.get(dep.replace("_", "-"))
        if framework:
            d.found("framework", framework, source)


def _node(repo: Path, d: Detection) -> None:
    path = repo / "package.json"
    if not path.is_file():
        return
    d.found("stack", "node", "package.json")
    try:
        data = json.loads(path.read_text())
    except ValueError:
        return
    deps = {**data.get("dependencies", {}), **data.get("devDependencies", {})}
    for dep in deps:
        framework = JS_FRAMEWORKS.get(dep) or JS_FRAMEWORKS.get(dep.split("/")[-1])
        if framework:
            d.found("framework", framework, f"package.json ({dep})")
    if data.get("bin"):
        d.found("framework", "cli-entry-point", "package.json (bin)")


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
    makefile = repo / "Makefile"
    targets = set()
    if makefile.is_file():
        targets = set(
            re.findall(r"^([A-Za-z0-9_\-]+):", makefile.read_text(errors="replace"), re.M)
        )
    if "test" in targets:
        d.gates["test"] = "make test"
    elif "python" in d.stacks and (
        "pytest" in d.frameworks or any(f.startswith("tests/") for f in files)
    ):
        d.gates["test"] = "python3 -m pytest -q"
    elif "node" in d.stacks and _npm_script(repo, "test"):
        d.gates["test"] = "npm test"
    elif "rust" in d.stacks:
        d.gates["test"] = "cargo test"
    elif "go" in d.stacks:
        d.gates["test"] = "go test ./..."
    if "lint" in targets:
        d.gates["lint"] = "make lint"
    elif "ruff" in d.frameworks:
        d.gates["lint"] = "ruff check ."
    elif "flake8" in d.frameworks:
        d.gates["lint"] = "flake8"
    elif "node" in d.stacks and _npm_script(repo, "lint"):
        d.gates["lint"] = "npm run lint"
    elif "eslint" in d.frameworks:
        d.gates["lint"] = "npx eslint ."
    elif "rust" in d.stacks:
        d.gates["lint"] = "cargo clippy -- -D warnings"
    elif "go" in d.stacks:
        d.gates["lint"] = "go vet ./..."


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
