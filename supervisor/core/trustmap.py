"""The trust map: every input the host reads from a repository or a worktree, and how far it is
believed.

A cloned repository is written by someone else, and so is everything a worker leaves in its
worktree. Each input the supervisor reads from them has one class:

- `data`: read as bytes or validated YAML, never interpreted as code, never able to switch a
  protection off;
- `needs-trust`: honoured only from the user's own configuration, or from the repository once
  the user ran `supervisor trust` there (which records exactly what was trusted: the settings'
  values, the files' hashes and text); until then it is ignored with a warning (a setting that
  weakens a protection, a template) or it stops the task (a setting that routes credentials, the
  project Dockerfile);
- `sandbox-only`: runs, but only inside a sandbox (gate commands, the worker's own files).

Code that reads a repository's `.supervisor/` path asks `repo_path()` for it and states the class
it expects, so that a reader that treats a needs-trust input as data fails at once; and a spec
(tests/test_trustmap.py) scans the source for `.supervisor` paths the map does not list. The
module imports nothing of the supervisor's own: it is the bottom of the trust boundary.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Literal

Kind = Literal["data", "needs-trust", "sandbox-only"]
DATA: Kind = "data"
NEEDS_TRUST: Kind = "needs-trust"
SANDBOX_ONLY: Kind = "sandbox-only"
STATE_DIR = ".supervisor"
# The repository's inputs by name, for the readers (each listed in REPOSITORY below).
CONFIG = ".supervisor/config.yaml"
TEMPLATES = ".supervisor/templates"
ROLES = ".supervisor/roles"
ROLE_PACKS = ".supervisor/roles/packs"
ROLES_LOCK = ".supervisor/roles.lock"
POLICY = ".supervisor/approval_policy.yaml"
DOCKERFILE = ".supervisor/sandbox/Dockerfile"
STRATEGIES = ".supervisor/context_strategies"
WORKFLOW = ".supervisor/workflow.yaml"
WORKFLOW_TEMPLATES = ".supervisor/workflow_templates"


@dataclass(frozen=True)
class Input:
    pattern: str
    """A path below the repository root; `*` is one name, `**` any depth."""
    kind: Kind
    why: str


REPOSITORY: tuple[Input, ...] = (
    Input(
        ".supervisor/config.yaml",
        NEEDS_TRUST,
        "validated YAML; the settings in SETTINGS need trust, `state` is refused and "
        "`notifications.webhook` and `telemetry` are never honoured from a repository",
    ),
    Input(
        ".supervisor/templates/**",
        NEEDS_TRUST,
        "Jinja2 prompt templates: rendered in the sandboxed environment, and used only while "
        "their content is the one trusted (else the built-in template)",
    ),
    Input(
        ".supervisor/roles/*.yaml",
        NEEDS_TRUST,
        "role files: `env` and `flags` route credentials, `allow_paths` opens protected paths",
    ),
    Input(
        ".supervisor/roles/packs/**",
        DATA,
        "installed role packs: verified against roles.lock; keys that route credentials or "
        "weaken a protection are refused, templates render sandboxed",
    ),
    Input(".supervisor/roles.lock", DATA, "sources, commits and file hashes of installed packs"),
    Input(
        ".supervisor/approval_policy.yaml",
        NEEDS_TRUST,
        "could lower every approval level: ignored until its content is trusted",
    ),
    Input(
        ".supervisor/sandbox/Dockerfile",
        NEEDS_TRUST,
        "built with network on the host's Docker engine, and the workers run in its image: "
        "built only while its content is the one trusted",
    ),
    Input(
        ".supervisor/context_strategies/*.yaml",
        DATA,
        "which files a role's context pack holds (validated YAML)",
    ),
    Input(".supervisor/workflow.yaml", DATA, "the steps (validated; disabling needs trust)"),
    Input(".supervisor/workflow_templates/*.yaml", DATA, "named workflows (validated YAML)"),
    Input(".supervisor/init.json", DATA, "hashes of the files `supervisor init` wrote"),
    # The supervisor's own state, written by the host (gitignored; a committed copy is data).
    Input(".supervisor/state.db", DATA, "task state (SQLite, queried, never executed)"),
    Input(".supervisor/worktrees/**", SANDBOX_ONLY, "step worktrees: the workers' files"),
    Input(".supervisor/trash/**", DATA, "worktrees being deleted"),
    Input(".supervisor/bases/**", SANDBOX_ONLY, "overlay bases: a commit's files for workers"),
    Input(".supervisor/homes/**", SANDBOX_ONLY, "kept CLI homes of continued sessions"),
    Input(".supervisor/locks/**", DATA, "flock files"),
    Input(".supervisor/probe", DATA, "start-up probe of the sandbox"),
)

WORKTREE: tuple[Input, ...] = (
    Input("**", SANDBOX_ONLY, "a worker's files run only in sandboxes (gates, later workers)"),
    Input("<dependency files>", DATA, "read as data (python_deps), installed in the image build"),
    Input("<candidate diff>", DATA, "the change as git sees it: checked, committed, never run"),
    Input("<context files>", DATA, "packed as text into prompts (redacted)"),
    Input("<CLI output>", DATA, "parsed JSON, validated by pydantic, escaped when shown"),
)

# -- settings of .supervisor/config.yaml and role files --------------------------------------

Concern = Literal["routing", "weakening", "never", "sandbox-only", "data"]
"""`routing` and `weakening` need trust, `never` is refused from a repository; `sandbox-only`
(a command) and `data` (validated names and paths) shape the work and need none."""


@dataclass(frozen=True)
class Setting:
    key: str
    """Dotted; `*` stands for one name (a CLI, a limit, a role)."""
    concern: Concern
    effect: str


SETTINGS: tuple[Setting, ...] = (
    *(
        Setting(f"clis.*.{key}", "routing", "decides where the CLI's credentials are sent")
        for key in ("base_url", "credential_env", "login_files", "extra_env", "extra_flags")
    ),
    Setting("sandbox.image", "routing", "the image every worker runs in, with the keys"),
    Setting("sandbox.egress_network", "routing", "the network the workers reach out on"),
    Setting(
        "projects.*.sandbox.image",
        "routing",
        "the image this project's workers and gates run in, with the keys",
    ),
    *(
        Setting(f"temporal.{key}", "routing", "where tasks (and their code) are sent")
        for key in ("address", "namespace", "remote")
    ),
    Setting(
        "forge.comments_from",
        "never",
        "whose pull request comments reach a worker's prompt: honoured only from your own config",
    ),
    Setting("forge.*", "routing", "where the forge token is sent, what a pull request links to"),
    Setting("roles.*.env", "routing", "environment handed to the role's CLI"),
    Setting("roles.*.flags", "routing", "flags handed to the role's CLI"),
    *(
        Setting(
            f"roles.*.{key}",
            "routing",
            "the pool of workers (hosts) the role's steps are sent to, unless your config's "
            "worker_pools.allowed names it",
        )
        for key in ("preferred_worker", "fallback_worker", "requires")
    ),
    Setting(
        "protected_paths.remove",
        "weakening",
        "workers may change these protected paths (their edits are committed)",
    ),
    Setting(
        "sandbox.dependency_changes",
        "weakening",
        "`allow`: a worker's dependency change rebuilds the image (network on) unapproved",
    ),
    Setting("limits.*", "weakening", "raises a limit on what a step may take or change"),
    Setting("budgets.*.*", "weakening", "raises a spend limit"),
    Setting("workflow.disable", "weakening", "removes these steps (gates, reviews) from the run"),
    Setting(
        "workflow.overrides.*.human_approval",
        "weakening",
        "`false`: the step no longer waits for a human",
    ),
    Setting("roles.*.allow_paths", "weakening", "the role may change these protected paths"),
    Setting(
        "notifications.webhook",
        "never",
        "routes task data off the machine: honoured only from your own config",
    ),
    Setting(
        "worker",
        "never",
        "this host's worker pools: honoured only from your own config on that host",
    ),
    Setting(
        "worker_pools",
        "never",
        "which pools a repository's or a pack's role may send steps to: your own config only",
    ),
    Setting(
        "telemetry",
        "never",
        "exports the task's traces and metrics (OpenTelemetry): honoured only from your own config",
    ),
    # Settings a repository sets without trust: they shape the work, never run on the host.
    Setting("gates.*", "sandbox-only", "a command run only in the gate sandbox (no network)"),
    Setting(
        "projects.*.gates.*",
        "sandbox-only",
        "a project's gate command: run only in the gate sandbox (no network), in its directory",
    ),
    Setting(
        "projects.*.roles",
        "data",
        "role names (validated names, no paths) shown to the planner; each role file keeps "
        "its own trust",
    ),
    Setting(
        "projects.*.path",
        "data",
        "a directory below the root (validated: inside the repository, no overlap)",
    ),
    Setting(
        "cross_project_dependencies.*.depends_on",
        "data",
        "build order and which projects' gates a change runs (validated: known names, no cycle)",
    ),
    Setting(
        "shared_paths",
        "data",
        "files every project's components may change; a change to one runs every project's gates",
    ),
)

NEVER_FROM_REPOSITORY = tuple(s.key for s in SETTINGS if s.concern == "never")
"""Settings a repository's config never sets (dropped from its layer): where data goes."""

# Limits where a larger value is the weaker protection (all numeric ones and the memory sizes),
# and the orders of the ones that are words.
_ORDERED = {"component_scope": ["feedback", "replan", "allow"]}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([bkmgt]?)b?\s*$", re.IGNORECASE)


def setting(key: str) -> Setting | None:
    """The map's entry for a dotted setting key, or None (a setting that needs no trust)."""
    parts = key.split(".")
    for entry in SETTINGS:
        pattern = entry.key.split(".")
        if len(pattern) == len(parts) and all(
            p in ("*", k) for p, k in zip(pattern, parts, strict=True)
        ):
            return entry
    return None


def weakenings(project: dict[str, Any], below: dict[str, Any]) -> dict[str, Any]:
    """The settings of a repository's config layer that weaken a protection the layers below
    it (package and user) set, by dotted key, with the repository's value."""
    found: dict[str, Any] = {}
    removed = _get(project, "protected_paths.remove")
    if removed:
        found["protected_paths.remove"] = removed
    if (
        _get(project, "sandbox.dependency_changes")
        == "allow"
        != _get(below, "sandbox.dependency_changes")
    ):
        found["sandbox.dependency_changes"] = "allow"
    limits = project.get("limits")
    automatic = _get(below, "limits")
    automatic = (
        {k for k, v in automatic.items() if v is None} if isinstance(automatic, dict) else set()
    )
    for name, value in (limits if isinstance(limits, dict) else {}).items():
        # A limit the layers below leave to the supervisor (null) has nothing to compare with:
        # the repository fixing it is a raise all the same (`prepare_containers`).
        fixed = name in automatic and _number(value) is not None
        if fixed or _raises(name, value, _get(below, f"limits.{name}")):
            found[f"limits.{name}"] = value
    budgets = project.get("budgets")
    for scope in ("task", "step"):
        spec = budgets.get(scope) if isinstance(budgets, dict) else None
        for name, value in (spec if isinstance(spec, dict) else {}).items():
            lower = _get(below, f"budgets.{scope}.{name}")
            if lower is not None and _raises(name, value, lower):
                found[f"budgets.{scope}.{name}"] = value
    disabled = _get(project, "workflow.disable")
    if disabled:
        found["workflow.disable"] = disabled
    overrides = _get(project, "workflow.overrides")
    for step, fields in (overrides if isinstance(overrides, dict) else {}).items():
        if isinstance(fields, dict) and fields.get("human_approval") is False:
            found[f"workflow.overrides.{step}.human_approval"] = False
    return found


def without(data: dict[str, Any], keys: list[str]) -> dict[str, Any]:
    """`data` with the dotted keys removed (the layers below then decide)."""
    out = {k: (without(v, []) if isinstance(v, dict) else v) for k, v in data.items()}
    for key in keys:
        *parents, last = key.split(".")
        node: Any = out
        for part in parents:
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, dict):
            node.pop(last, None)
    return out


def _get(data: dict[str, Any], key: str) -> Any:
    node: Any = data
    for part in key.split("."):
        if not isinstance(node, dict):
            return None
        node = node.get(part)
    return node


def _raises(name: str, value: Any, below: Any) -> bool:
    if name in _ORDERED:
        order = _ORDERED[name]
        return value in order and (below not in order or order.index(value) > order.index(below))
    new, old = _number(value), _number(below)
    if new is None:
        return False  # not a number: the settings' validation names it
    return old is not None and new > old  # an unknown limit: validation names it


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    match = _SIZE.match(value) if isinstance(value, str) else None
    if match is None:
        return None
    scale = {"": 1, "b": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}
    return float(match.group(1)) * scale[match.group(2).lower()]


# -- the accessor ------------------------------------------------------------------------------


class UnmappedInputError(RuntimeError):
    """Code asked for a repository path the trust map does not list, or under another class:
    a programming error, caught by the specs before it ships."""


def classify(rel: str) -> Input | None:
    """The map's entry for a path below the repository root, or None."""
    posix = PurePosixPath(rel).as_posix()
    for entry in REPOSITORY:
        if _matches(posix, entry.pattern):
            return entry
    return None


def repo_path(repo: Path, rel: str, kind: Kind) -> Path:
    """`repo/rel`, once the map confirms the reader treats it as the map says."""
    entry = classify(rel)
    if entry is None:
        raise UnmappedInputError(f"{rel} is read from the repository but not in the trust map.")
    if entry.kind != kind:
        raise UnmappedInputError(
            f"{rel} is {entry.kind} in the trust map ({entry.why}), but read as {kind}."
        )
    return repo / rel


def _matches(path: str, pattern: str) -> bool:
    """`path` is the pattern's file, or the directory its files are in (a reader lists it)."""
    if "*" in pattern and path == pattern.split("*")[0].rstrip("/"):
        return True
    if pattern.endswith("/**"):
        base = pattern[:-3]
        return path == base or path.startswith(base + "/")
    return fnmatch.fnmatchcase(path, pattern) and path.count("/") == pattern.count("/")
