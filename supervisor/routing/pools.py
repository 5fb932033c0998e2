"""Which pool of workers runs a role's steps, in team mode (docs/worker-pools.md).

A host's `supervisor worker --capabilities large_context,isolated` serves pools; a role names
the pool it prefers (`preferred_worker`, with `fallback_worker` when none of that pool takes the
step within temporal.pool_wait_seconds) or the pools it requires (`requires: [isolated]`: it
waits, never falls back). A step's route is its role's (the first role of a parallel step that
names one); gates and the commit have none and run on any worker of the repository.

A pool is where a step's code, prompt and credentials go, so a role from the repository
(`.supervisor/roles/`) or from a role pack routes only to pools the user's own config allows
(`worker_pools: {allowed: [...]}`); a repository's role may also be trusted as it is
(`supervisor trust`). Anything else is refused (`PoolNotAllowedError`) when the task starts,
and again by the worker that would route a step (the role file may have changed since).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from supervisor.context.roles import ResolvedRole, RoleFile, resolve_role
from supervisor.core.config import read_yaml, user_dir
from supervisor.core.errors import ConfigError
from supervisor.core.pool_settings import ANY_WORKER, POOL_NAME
from supervisor.guard import trust

if TYPE_CHECKING:
    from pathlib import Path

    from supervisor.core.config import Settings
    from supervisor.core.workflow_schema import WorkflowDef

KEYS = ("preferred_worker", "fallback_worker", "requires")
SEPARATOR = "@"  # the repository's queue, then the pool: `supervisor-<id>@isolated`


class PoolNotAllowedError(ConfigError):
    """A repository's or a role pack's role routes steps to a pool the user did not allow."""


@dataclass(frozen=True)
class Route:
    """Where one step's activity goes: the pool's queue; unless `required`, the fallback's
    (None: any worker of the repository) once `wait_s` passed with no worker taking it."""

    role: str
    pool: str  # one pool, or several joined by '+' (a worker serving all of them)
    required: bool
    fallback: str | None = None
    wait_s: float = 0.0

    def data(self) -> dict[str, Any]:
        """As the workflow carries it (plain data: supervisor/temporal/workflow.py)."""
        return asdict(self)

    @classmethod
    def from_data(cls, data: dict[str, Any] | None) -> Route | None:
        return cls(**data) if data else None

    def same_place(self, other: Route | None) -> bool:
        """The same pool, need and fallback (the wait may differ between hosts' configs)."""
        return other is not None and (self.pool, self.required, self.fallback) == (
            other.pool,
            other.required,
            other.fallback,
        )


def queue(base: str, pool: str | None) -> str:
    """The task queue of `pool` for the repository's queue `base` (`base` for no pool)."""
    return f"{base}{SEPARATOR}{pool}" if pool else base


def pool_of(task_queue: str) -> str:
    """The pool a queue serves ("any": the repository's own queue)."""
    return task_queue.split(SEPARATOR, 1)[1] if SEPARATOR in task_queue else "any"


def served(capabilities: list[str]) -> list[str]:
    """The pools a worker with `capabilities` serves: each one, and each set of them (a role may
    require several), as `+`-joined sorted names."""
    from itertools import combinations

    names = sorted(set(capabilities))
    sizes = range(1, len(names) + 1)
    return ["+".join(chosen) for size in sizes for chosen in combinations(names, size)]


def role_route(resolved: ResolvedRole, settings: Settings, repo: Path) -> Route | None:
    """The route of `resolved`'s steps (None: any worker), its fields checked and allowed."""
    role = resolved.role
    _check(resolved)
    refuse_unallowed(resolved, settings, repo)
    if role.requires:
        return Route(role.name, "+".join(sorted(set(role.requires))), required=True)
    preferred = role.preferred_worker
    if preferred is None or preferred in ANY_WORKER:
        return None
    fallback = role.fallback_worker
    fallback = None if fallback is None or fallback in ANY_WORKER else fallback
    return Route(role.name, preferred, False, fallback, settings.temporal.pool_wait_seconds)


def step_route(
    definition: WorkflowDef, step: str | None, settings: Settings, repo: Path
) -> Route | None:
    """The route of step `step` of `definition` (None: any worker)."""
    found = definition.steps.get(step) if step else None
    if found is None:
        return None
    for name in [found.role] if found.role else found.roles or []:
        route = role_route(resolve_role(name, repo), settings, repo)
        if route is not None:
            return route
    return None


def check_definition(definition: WorkflowDef, settings: Settings, repo: Path) -> None:
    """Every step's route, checked before a task starts (a pool nobody allowed stops it)."""
    for step in definition.steps:
        step_route(definition, step, settings, repo)


def _check(resolved: ResolvedRole) -> None:
    role, where = resolved.role, resolved.chain[0].path
    named = [role.preferred_worker, role.fallback_worker, *role.requires]
    bad = [n for n in named if n is not None and n not in ANY_WORKER and not POOL_NAME.match(n)]
    problem = (
        f"names {bad[0]!r}, which is not a pool name (a lower-case word such as large_context)"
        if bad
        else "sets both `requires` and `preferred_worker`/`fallback_worker` (a required pool "
        "never falls back)"
        if role.requires and (role.preferred_worker or role.fallback_worker)
        else "sets `fallback_worker` without `preferred_worker`"
        if role.fallback_worker and not role.preferred_worker
        else "names `any`/`local` in `requires` (it requires no pool then)"
        if any(r in ANY_WORKER for r in role.requires)
        else None
    )
    if problem is not None:
        raise ConfigError(
            f"Role '{role.name}' ({where}) {problem}.",
            "Write `preferred_worker: large_context` (optionally `fallback_worker: local`), or "
            "`requires: [isolated]`; see docs/worker-pools.md.",
        )


def refuse_unallowed(resolved: ResolvedRole, settings: Settings, repo: Path) -> None:
    """Raise unless every pool the role names comes from the user's own or a built-in role
    file, is allowed by the user's `worker_pools.allowed`, or (a repository's role) is trusted."""
    allowed = settings.worker_pools.allowed
    for key in KEYS:
        value = getattr(resolved.role, key)
        pools = [p for p in (value if isinstance(value, list) else [value]) if p]
        pools = [p for p in pools if p not in (*ANY_WORKER, *allowed) and "*" not in allowed]
        if not pools:
            continue
        for source in _sources(resolved, key):
            if source.layer in ("user", "package"):
                continue
            raw = _raw(source, key)
            if not raw:
                continue
            name = f"roles.{source.name}.{key}"
            if source.layer == "project" and trust.role_pool_trusted(repo, name, raw):
                continue
            _refuse(resolved, source, key, pools)


def _refuse(resolved: ResolvedRole, source: RoleFile, key: str, pools: list[str]) -> None:
    whose = f"role pack '{source.pack}'" if source.pack else "the repository"
    trusting = (
        " or run `supervisor trust` there once you checked the role"
        if source.layer == "project"
        else ""
    )
    raise PoolNotAllowedError(
        f"Role '{resolved.role.name}' sends its steps to worker pool {', '.join(pools)} "
        f"(`{key}` in {source.path}, from {whose}); your config does not allow that pool, "
        "so the task is not started.",
        f"Add it to `worker_pools: {{allowed: [{', '.join(pools)}]}}` in "
        f"{user_dir() / 'config.yaml'}{trusting}; or remove `{key}` from the role.",
    )


def _sources(resolved: ResolvedRole, key: str) -> list[RoleFile]:
    """The role files `key` came from (a list merges several: 'a + b')."""
    paths = [p.strip() for p in resolved.provenance.get(key, "").split(" + ") if p.strip()]
    return [f for f in resolved.chain if str(f.path) in paths]


def _raw(source: RoleFile, key: str) -> Any:
    data = read_yaml(source.path)
    return data.get(key) if isinstance(data, dict) else None
