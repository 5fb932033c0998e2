"""The engine's routing decision for one step: which CLI each of its roles runs on.

The engine calls `for_step` once per step run, before the step acts, and hands the result to the
step (StepContext.routes) and its `cli_chosen` events to its own transition; step modules never
choose. A dry run (`supervisor context`, the `start-task` preview) asks the same question through
`preview`, so what it shows is what the engine would do.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from supervisor.core.errors import ConfigError, CredentialsError
from supervisor.guard import credentials
from supervisor.routing import adaptive, history

if TYPE_CHECKING:
    from pathlib import Path

    from supervisor.context.roles import Role
    from supervisor.core.config import Settings, StepDef
    from supervisor.state.store import Store


def candidates(role: Role, default_cli: str) -> list[str]:
    """The CLIs a role may run on, its preferred first: its `cli` (or, when `cli` is an ordered
    list, that list), else the workflow's CLI, then every CLI it names a model for."""
    return list(dict.fromkeys([*(role.clis or [default_cli]), *role.models]))


def usable(settings: Settings, cli: str) -> bool:
    """A CLI the metrics may move a role to: configured, and its credentials at hand."""
    cli_settings = settings.clis.get(cli)
    if cli_settings is None:
        return False
    try:
        credentials.collect(cli, cli_settings)
    except CredentialsError:
        return False
    return True


def choose_for_role(
    repo: Path, settings: Settings, store: Store | None, role_name: str, default_cli: str
) -> adaptive.Choice:
    """One role's choice; with no state database yet, as if no run were recorded."""
    from supervisor.context.roles import load_role

    role = load_role(role_name, repo)
    found = candidates(role, default_cli)
    # The preferred CLI always stays first (a missing key is then reported by the step, as
    # before); the others are only candidates when they could actually run.
    clis = [found[0], *(c for c in found[1:] if usable(settings, c))]
    conf = settings.adaptive
    locked = conf.locked_assignments.get(role.name)
    if locked is not None and locked not in settings.clis:
        raise ConfigError(
            f"adaptive.locked_assignments sets role '{role.name}' to '{locked}', a CLI with no "
            "settings.",
            f"Use one of: {', '.join(sorted(settings.clis))}, or add `clis: {{{locked}: ...}}`.",
        )
    if store is None or locked is not None or not conf.enabled:
        snap = adaptive.Snapshot(
            role=role.name, task_type=role.output, window_days=conf.adaptation_interval_days
        )
    else:
        snap = history.snapshot(store, role.name, role.output, conf.adaptation_interval_days)
    return adaptive.choose(role.name, role.output, clis, snap, conf)


def for_step(
    repo: Path, settings: Settings, store: Store, default_cli: str, step: StepDef
) -> list[adaptive.Choice]:
    """The choice for every role the step runs (none for gates and actions)."""
    names = [step.role] if step.role else list(step.roles or [])
    return [choose_for_role(repo, settings, store, n, default_cli) for n in names if n]


def worth_recording(choice: adaptive.Choice) -> bool:
    """A choice is an event when something was chosen: a lock, or more than one candidate."""
    return choice.basis == "locked" or (choice.basis != "disabled" and len(choice.candidates) > 1)


def describe(choice: adaptive.Choice) -> str:
    """One line for a dry run: the CLI, and why."""
    return f"{choice.role} → {choice.cli} ({choice.basis}: {choice.reason})"


def preview(
    repo: Path, settings: Settings, state_db: Path, default_cli: str, roles: list[str]
) -> list[adaptive.Choice]:
    """What the engine would choose for each role now, for a dry run; writes nothing (a project
    with no state database yet has no recorded runs)."""
    if not state_db.exists():
        return [choose_for_role(repo, settings, None, r, default_cli) for r in roles]
    from supervisor.state.store import Store

    with Store(state_db) as store:
        return [choose_for_role(repo, settings, store, r, default_cli) for r in roles]
