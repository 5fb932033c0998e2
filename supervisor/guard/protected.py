"""Protected paths: the files that define how a candidate is checked are read-only for workers.

A worker that may rewrite the test target of the Makefile, a `conftest.py`, the pytest options or
the supervisor's own configuration can make any gate pass on broken code. So the files that make
up the gate harness are protected the way locked interfaces are: a candidate that changes one
fails its step, and the worker gets that back as feedback. Two files hold both harness and
ordinary content (`pyproject.toml`, `package.json`); for those only the harness part is compared
(an entry `FILE#key.path`), parsed from both commits, so a dependency edit stays possible.

What is protected, and the gate commands themselves, are pinned into the workflow at
`start-task` (`Pinned`, kept in the workflow's context): a candidate can never widen its own
allowance, and editing the configuration mid-task changes only later tasks. A monorepo's project
map (its projects, their dependencies and the shared paths) is pinned the same way: which
projects a change reaches, and so which gates run, is decided by the map the task started with.
"""

from __future__ import annotations

import json
import tomllib
from typing import TYPE_CHECKING, Any, Literal

import pathspec
from pydantic import Field

from supervisor.core import process
from supervisor.core.projects import ProjectDef, ProjectDependency, ProjectMap
from supervisor.core.strict_model import StrictModel

if TYPE_CHECKING:
    from pathlib import Path

    from supervisor.core.config import Settings

PINNED_KEY = "pinned"

GATE_CONFIG: tuple[str, ...] = (
    ".coveragerc",
    ".flake8",
    "ruff.toml",
    ".ruff.toml",
    "mypy.ini",
    ".mypy.ini",
    "pyrightconfig.json",
    "pyproject.toml#tool.ruff",
    "pyproject.toml#tool.mypy",
    "pyproject.toml#tool.pyright",
    "pyproject.toml#tool.coverage",
    "pyproject.toml#tool.hatch.envs",
    "vite.config.*",  # vitest reads it when there is no vitest.config.*
    "vitest.workspace.*",
    "vitest.setup.*",
    "jest.setup.*",
    "karma.conf.*",
    "ava.config.*",
    "playwright.config.*",
    "eslint.config.*",
    ".eslintrc*",
    ".eslintignore",
    "tsconfig*.json",
    "jsconfig*.json",
    ".prettierrc*",
    "prettier.config.*",
    ".prettierignore",
    "babel.config.*",
    ".babelrc*",
    ".swcrc",
    "biome.json",
    "biome.jsonc",
    "package.json#mocha",
    "package.json#ava",
    "package.json#c8",
    "package.json#nyc",
    "package.json#babel",
    "package.json#eslintConfig",
    "package.json#prettier",
    # Node's module resolution: a committed node_modules or Plug'n'Play map decides what
    # `vitest` or `jest` even is.
    "node_modules/",
    ".pnp.cjs",
    ".pnp.js",
    ".pnp.loader.mjs",
    ".yarn/**",
    # Go and Rust: lint configuration and test harness switches (`test = false`).
    ".golangci.yml",
    ".golangci.yaml",
    ".golangci.toml",
    "clippy.toml",
    ".clippy.toml",
    "Cargo.toml#lib",
    "Cargo.toml#bin",
    "Cargo.toml#test",
    "Cargo.toml#lints",
    "Cargo.toml#workspace.lints",
)
"""Runner, lint and type-check configuration of every stack a gate runs (issue 24): a config that
includes nothing, skips everything or relaxes a rule passes any code."""

DEFAULT_PROTECTED: tuple[str, ...] = (
    # Build files whose targets gates run (and what they include).
    "Makefile",
    "GNUmakefile",
    "makefile",
    "*.mk",
    "[Jj][Uu][Ss][Tt][Ff][Ii][Ll][Ee]",  # `just` finds its file in any letter case
    ".[Jj][Uu][Ss][Tt][Ff][Ii][Ll][Ee]",
    # Test-runner configuration and start-up hooks a gate's interpreter loads by itself.
    "conftest.py",
    "pytest.ini",
    ".pytest.ini",
    "setup.cfg",
    "tox.ini",
    "noxfile.py",
    "sitecustomize.py",
    "usercustomize.py",
    "pyproject.toml#tool.pytest",
    # A module of the repository that shadows the test runner itself (the working directory and
    # /workspace come first on the gate's import path).
    "unittest.py",
    "unittest/**",
    "pytest.py",
    "pytest/**",
    "_pytest/**",
    # Node and Rust: what `npm test` / `cargo test` run, and how.
    "package.json#scripts",
    "package.json#jest",
    ".npmrc",
    ".yarnrc",
    ".yarnrc.yml",
    "jest.config.*",
    "vitest.config.*",
    ".mocharc*",
    ".cargo/**",
    # CI, the supervisor's own configuration, and Repomix's.
    ".github/**",
    ".gitlab-ci.yml",
    ".circleci/**",
    ".supervisor/**",
    "repomix.config.json",
    ".repomixignore",
    *GATE_CONFIG,
)

# cli_project_files: what the AI CLIs load from a worktree by themselves (instructions sent to
# the model, hooks and MCP servers that run commands, skills). Workers run with them switched off
# and masked (workers/*.py, sandbox/run_files.py), but a branch that gained one would speak to the
# user's own `claude`/`codex`/`gemini` in that repository next time.
CLI_PROJECT_FILES: tuple[str, ...] = (
    "CLAUDE.md",
    "CLAUDE.local.md",
    "AGENTS.md",
    "AGENTS.override.md",
    "GEMINI.md",
    ".mcp.json",
    "**/.claude/**",
    "**/.codex/**",
    "**/.gemini/**",
    "**/.agents/**",
)
DEFAULT_PROTECTED += CLI_PROJECT_FILES


class PinnedProjects(StrictModel):
    """A monorepo's project map as the task started with it (empty: one project)."""

    projects: list[ProjectDef] = Field(default_factory=list)
    cross_project_dependencies: dict[str, ProjectDependency] = Field(default_factory=dict)
    shared_paths: list[str] = Field(default_factory=list)


class Pinned(StrictModel):
    """What a task's checks are, fixed when it starts."""

    gates: dict[str, str] = Field(default_factory=dict)
    protected: list[str] = Field(default_factory=list)
    allowed: list[str] = Field(default_factory=list)
    """`start-task --allow-protected PATTERN`: protected paths this one task may change."""
    dependency_changes: Literal["approve", "allow"] = "approve"
    project_gates: dict[str, dict[str, str]] = Field(default_factory=dict)
    """A monorepo's projects' own gates (project -> gate -> command), fixed like `gates`."""
    projects: PinnedProjects | None = None
    """The project map; None: a task started before maps were pinned (today's is used)."""


def protected_list(settings: Settings) -> list[str]:
    """The package defaults, with the configuration's `protected_paths: {add, remove}`."""
    spec = settings.protected_paths
    entries = [e for e in DEFAULT_PROTECTED if e not in spec.remove]
    return entries + [e for e in spec.add if e not in entries]


def pin(settings: Settings, allowed: list[str] | None = None) -> Pinned:
    return Pinned(
        gates=dict(settings.gates),
        protected=protected_list(settings),
        allowed=list(allowed or []),
        dependency_changes=settings.sandbox.dependency_changes,
        project_gates={p.name: dict(p.gates) for p in settings.projects},
        projects=PinnedProjects(
            projects=[p.model_copy(deep=True) for p in settings.projects],
            cross_project_dependencies=dict(settings.cross_project_dependencies),
            shared_paths=list(settings.shared_paths),
        ),
    )


def pinned_start(settings: Settings, allowed: list[str] | None) -> dict[str, Any]:
    """The workflow row's initial context and the event recording what was pinned."""
    from supervisor.state.records import EventSpec

    pins = pin(settings, allowed)
    payload: dict[str, Any] = {"gates": pins.gates, "protected": pins.protected}
    if pins.allowed:
        payload["allowed_for_this_task"] = pins.allowed
    if pins.project_gates:
        payload["project_gates"] = pins.project_gates
    if pins.projects is not None and pins.projects.projects:
        payload["projects"] = pins.projects.model_dump(mode="json", exclude_defaults=True)
    return {
        "context": {PINNED_KEY: pins.model_dump()},
        "events": [
            EventSpec("checks_pinned", status="allowed" if allowed else None, payload=payload)
        ],
    }


def pinned(context: dict[str, Any], settings: Settings) -> Pinned:
    """The workflow's pinned checks; a workflow from before pinning gets today's settings."""
    data = context.get(PINNED_KEY)
    return Pinned.model_validate(data) if data else pin(settings)


def project_map(context: dict[str, Any], settings: Settings) -> ProjectMap:
    """The task's project map as pinned at start (what a component may touch, which projects
    its change reaches, which gates run): a project added, removed or rewired in the
    configuration mid-task, by a person or by a pull, changes only later tasks; a task from
    before maps were pinned gets today's."""
    pins = pinned(context, settings).projects
    if pins is None:
        return settings.project_map()
    return ProjectMap.build(
        pins.projects,
        pins.cross_project_dependencies,
        pins.shared_paths,
        "the projects pinned when the task started",
    )


def _spec(patterns: list[str]) -> pathspec.GitIgnoreSpec:
    return pathspec.GitIgnoreSpec.from_lines(patterns)


def changed_protected(
    repo: Path,
    pins: Pinned,
    allow_paths: list[str],
    base: str,
    head: str,
    changed: list[str],
) -> list[str]:
    """The protected files among `changed` (from `base` to `head`) that are not allowed; a
    `FILE#key` entry is reported as `FILE (key)` and only when that part differs."""
    allowed = _spec([*allow_paths, *pins.allowed])
    whole = _spec([e for e in pins.protected if "#" not in e])
    parts = [e.split("#", 1) for e in pins.protected if "#" in e]
    found: list[str] = []
    for path in changed:
        if allowed.match_file(path):
            continue
        if whole.match_file(path):
            found.append(path)
            continue
        for pattern, key in parts:
            if _spec([pattern]).match_file(path):
                before, after = _part(repo, base, path, key), _part(repo, head, path, key)
                if before is _UNREADABLE or after is _UNREADABLE or before != after:
                    found.append(f"{path} ({key})")
                    break
    return found


_UNREADABLE = object()


def _part(repo: Path, commit: str, path: str, key: str) -> Any:
    """The value at `key` (dotted) in a TOML or JSON file of `commit`, read as a git blob;
    None when the file or key is absent, a marker that never compares equal when unparsable."""
    try:
        blob = process.run(
            ["git", "-C", str(repo), "cat-file", "blob", f"{commit}:{path}"], check=False
        )
    except UnicodeDecodeError:
        return _UNREADABLE
    if blob.returncode != 0:
        return None
    return part_of(path, blob.stdout, key)


def part_of(path: str, text: str, key: str) -> Any:
    """The value at dotted `key` in the TOML (`*.toml`) or JSON text of `path`."""
    try:
        data: Any = tomllib.loads(text) if path.endswith(".toml") else json.loads(text)
    except (tomllib.TOMLDecodeError, json.JSONDecodeError, UnicodeDecodeError):
        return _UNREADABLE
    for name in key.split("."):
        if not isinstance(data, dict):
            return None
        data = data.get(name)
    return data


def feedback(files: list[str]) -> str:
    return (
        f"The step changed {', '.join(files)}, which define how the work is checked (the gate "
        "harness, the supervisor's configuration, or the AI CLIs' own project files): they are "
        "read-only for workers. Leave them "
        "exactly as they are and make the code pass the unchanged checks (if one really must "
        "change, report it under blockers; a person can allow it for one task with "
        "`supervisor start-task --allow-protected PATTERN`)."
    )
