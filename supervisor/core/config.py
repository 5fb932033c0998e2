"""Loading and validating the YAML configuration: defaults, limits and the settings cascade.

Precedence (lowest first): package `config/` < user `~/.supervisor/config.yaml` < project
`.supervisor/config.yaml` < command-line flags. Every file is validated by a pydantic model that
forbids unknown keys (the settings' models are in supervisor/core/settings.py, a workflow's in
supervisor/core/workflow_schema.py), and every error names the file (and line, for YAML syntax)
and the fix. The project layer's settings that decide where credentials go are honoured only once
the user trusted them (supervisor/guard/trust.py).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from supervisor.core.errors import ConfigError

# The package's directories, re-exported (`X as X`, so that mypy --strict sees them as exported)
# for the modules that read them from here; supervisor.core.resources is where they are found.
from supervisor.core.resources import CONFIG_DIR as CONFIG_DIR
from supervisor.core.resources import NODE_BIN as NODE_BIN
from supervisor.core.resources import PROMPTS_DIR as PROMPTS_DIR
from supervisor.core.resources import SANDBOX_DIR as SANDBOX_DIR
from supervisor.core.resources import data_root
from supervisor.core.settings import USER_ONLY_SANDBOX_KEYS

# The models, re-exported for the modules that import them with their loading from here.
from supervisor.core.settings import AdaptiveSettings as AdaptiveSettings
from supervisor.core.settings import AdaptiveWeights as AdaptiveWeights
from supervisor.core.settings import CliSettings as CliSettings
from supervisor.core.settings import DecompositionLimits as DecompositionLimits
from supervisor.core.settings import DepthSettings as DepthSettings
from supervisor.core.settings import FailoverSettings as FailoverSettings
from supervisor.core.settings import Limits as Limits
from supervisor.core.settings import RolePackSettings as RolePackSettings
from supervisor.core.settings import Settings as Settings
from supervisor.core.settings import TemplateChoice as TemplateChoice
from supervisor.core.settings import TemporalSettings as TemporalSettings
from supervisor.core.settings import login_file_problem as login_file_problem
from supervisor.core.workflow_schema import StepDef as StepDef
from supervisor.core.workflow_schema import TemplateDepth as TemplateDepth
from supervisor.core.workflow_schema import WorkflowDef as WorkflowDef

if TYPE_CHECKING:
    from collections.abc import Sequence

PACKAGE_ROOT = data_root()
ModelT = TypeVar("ModelT", bound=BaseModel)


def user_dir() -> Path:
    """~/.supervisor, or $SUPERVISOR_USER_DIR (lets tests and CI isolate user config)."""
    return Path(os.environ.get("SUPERVISOR_USER_DIR") or Path.home() / ".supervisor")


# libyaml's safe loader when PyYAML was built with it: the same documents and errors, and every
# step reads the settings cascade again (it may have changed), so the pure-Python parser was a
# tenth of an engine run's time.
_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def read_yaml(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise ConfigError(f"Cannot read {path}: {e.strerror}.", "Check the path.") from e
    try:
        return yaml.load(text, Loader=_SAFE_LOADER)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(e, "problem", None) or str(e)
        raise ConfigError(
            f"{path} is not valid YAML{where}: {problem}.",
            "Fix the YAML syntax there (indentation, quotes, colons).",
        ) from e


def validate(
    model: type[ModelT],
    data: Any,
    source: Path | str,
    layers: Sequence[tuple[str, Any]] | None = None,
) -> ModelT:
    """`data` as `model`, or a ConfigError naming, for each problem, the file that holds it
    (of `layers`, the cascade merged into `data`; else `source`), the key's path, what it must
    be, and for a misspelt key the known one it was likely meant to be
    (supervisor/core/config_errors.py)."""
    try:
        return model.model_validate(data if data is not None else {})
    except ValidationError as e:
        from supervisor.core.config_errors import message

        raise ConfigError(
            message(model, e, layers or [(str(source), data)]),
            "Correct each key named there in its file, or remove it: unknown keys are errors, "
            "not ignored.",
        ) from e


def deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def config_layers(
    repo: Path | None, overrides: dict[str, Any] | None = None
) -> list[tuple[str, dict[str, Any]]]:
    """Each layer of the cascade with its data, lowest precedence first. The repository's layer
    comes without what it may not set (supervisor/guard/trust.py: its webhook, and the settings that
    weaken a protection until the user trusted them)."""
    return _layers(repo, overrides)[0]


def ignored_settings(repo: Path | None) -> list[Any]:
    """The repository's settings left out of the cascade (trust.Ignored), for `config show`."""
    return _layers(repo, None)[1]


def _layers(
    repo: Path | None, overrides: dict[str, Any] | None
) -> tuple[list[tuple[str, dict[str, Any]]], list[Any]]:
    from supervisor.core import trustmap

    package: dict[str, Any] = _mapping(CONFIG_DIR / "defaults.yaml")
    limits = _mapping(CONFIG_DIR / "limits.yaml")
    package["limits"] = limits.get("limits", {})
    package["adaptive"] = limits.get("adaptive", {})
    package["depth"] = limits.get("depth", {})
    package["continuity"] = limits.get("continuity", {})
    package["failover"] = limits.get("failover", {})
    found = [(f"package ({CONFIG_DIR})", package)]
    user = user_dir() / "config.yaml"
    if user.is_file():
        found.append((str(user), _mapping(user)))
    ignored: list[Any] = []
    project = (
        trustmap.repo_path(repo, trustmap.CONFIG, trustmap.NEEDS_TRUST)
        if repo is not None
        else None
    )
    if repo is not None and project is not None and project.is_file():
        data = _mapping(project)
        if "state" in data:
            raise ConfigError(
                f"{project} sets `state`: where task state is written (and the database "
                "password) is the user's choice, not the repository's.",
                "Move it to ~/.supervisor/config.yaml or $SUPERVISOR_STATE_URL.",
            )
        sandbox = data.get("sandbox")
        chosen = [k for k in USER_ONLY_SANDBOX_KEYS if isinstance(sandbox, dict) and k in sandbox]
        if chosen:
            raise ConfigError(
                f"{project} sets `sandbox.{chosen[0]}`: the container runtime that isolates "
                "workers and gates is the user's choice, not the repository's.",
                f"Remove it there; set it in {user_dir() / 'config.yaml'} if you want it.",
            )
        from supervisor.core import trust_records

        below: dict[str, Any] = {}
        for _, layer in found:
            below = deep_merge(below, layer)
        data, ignored = trust_records.filter_project_layer(repo, data, below)
        found.append((str(project), data))
    if overrides:
        found.append(("command line", overrides))
    return found, ignored


def load_settings(repo: Path | None, overrides: dict[str, Any] | None = None) -> Settings:
    data: dict[str, Any] = {}
    layers = config_layers(repo, overrides)
    for _, layer in layers:
        data = deep_merge(data, layer)
    settings = validate(Settings, data, " < ".join(name for name, _ in layers), layers)
    if settings.projects or settings.cross_project_dependencies:
        where = next((n for n, layer in reversed(layers) if "projects" in layer), "the config")
        settings.project_map(where)  # an unknown project, an overlap or a cycle: said here
    return settings


def settings_provenance(
    repo: Path | None, overrides: dict[str, Any] | None = None
) -> dict[str, str]:
    """Which layer each effective value came from, by dotted key."""
    origin: dict[str, str] = {}
    layers, ignored = _layers(repo, overrides)
    for name, layer in layers:
        for key in _flatten(layer):
            origin[key] = name
    for item in ignored:  # the value shown is not the repository's: say so where it is shown
        origin[item.key] = f"{origin.get(item.key, '(default)')}; IGNORED from the repository"
    return origin


def _flatten(data: dict[str, Any], prefix: str = "") -> list[str]:
    keys: list[str] = []
    for key, value in data.items():
        if isinstance(value, dict) and value:
            keys += _flatten(value, f"{prefix}{key}.")
        else:
            keys.append(f"{prefix}{key}")
    return keys


def _mapping(path: Path) -> dict[str, Any]:
    data = read_yaml(path)
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(
            f"{path} must hold a mapping (key: value pairs) at the top level.",
            "Check the file's structure.",
        )
    return data
