"""Worker pools (docs/worker-pools.md): what this host's `supervisor worker` offers, and which
pools a repository's or a role pack's role may send a step to. Both are read from the user's
own config only (supervisor/core/trustmap.py: `never` from a repository), because a pool
decides which machine a step's code, prompt and credentials go to.
"""

from __future__ import annotations

import re

from pydantic import Field, field_validator

from supervisor.core.strict_model import StrictModel

POOL_NAME = re.compile(r"^[a-z][a-z0-9_]{0,31}$")
ANY_WORKER = ("any", "local")
"""Names that mean no pool: any worker of the repository's queue."""


def check_pool_names(names: list[str], what: str) -> list[str]:
    """`names` as pool names (lower-case words), each once; ValueError naming the bad one."""
    for name in names:
        if name != "*" and not POOL_NAME.match(name):
            raise ValueError(
                f"{what}: {name!r} is not a pool name (a lower-case word of letters, digits "
                "and underscores, e.g. large_context)"
            )
    if len(set(names)) != len(names):
        raise ValueError(f"{what}: a pool is named twice in {names}")
    return names


class WorkerSettings(StrictModel):
    """This host's `supervisor worker` (your own config on that host)."""

    capabilities: list[str] = Field(default_factory=list, max_length=4)
    """The pools this host's worker serves, e.g. [large_context, isolated] (`--capabilities`
    wins over it): it polls the repository's queue and one queue per pool (per set of pools)."""

    @field_validator("capabilities")
    @classmethod
    def _names(cls, value: list[str]) -> list[str]:
        if "*" in value or any(v in ANY_WORKER for v in value):
            raise ValueError("worker.capabilities names pools; `any`, `local` and `*` are not")
        return check_pool_names(value, "worker.capabilities")


class WorkerPoolSettings(StrictModel):
    """Which pools a role from a repository (`.supervisor/roles/`) or a role pack may route its
    steps to; your own roles route anywhere. Read from your own config only."""

    allowed: list[str] = Field(default_factory=list)
    """Pools any role may name (`*`: every pool); a repository's role naming another pool needs
    `supervisor trust`, and a pack's is refused at task start."""

    @field_validator("allowed")
    @classmethod
    def _names(cls, value: list[str]) -> list[str]:
        return check_pool_names(value, "worker_pools.allowed")
