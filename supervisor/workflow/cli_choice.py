"""The one place a step asks which CLI it runs on.

The worker step (supervisor/workflow/steps/worker.py) calls `cli_for` instead of reading the
role's `cli:` itself, so what decides the CLI (the role's order of preference, the CLIs the engine
remembers as unavailable, and the metrics once adaptive assignment is on) is in one module, and a
dry run can ask the same question.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from supervisor.routing import failover
from supervisor.workflow.state import WorkflowState

if TYPE_CHECKING:
    from collections.abc import Mapping

    from supervisor.context.roles import Role


def cli_for(
    role: Role,
    task_cli: str,
    context: Mapping[str, Any],
    now: float | None = None,
    preferred: str | None = None,
) -> str:
    """The CLI a run of `role` uses now: the first of its list (or the task's CLI), led by the
    engine's adaptive choice when it made one, that the workflow's state does not hold
    unavailable."""
    state = WorkflowState.load(context)
    clis = failover.chain(role.clis, task_cli)
    if preferred is not None:
        clis = [preferred, *(c for c in clis if c != preferred)]
    return failover.choose(clis, state.unavailable, time.time() if now is None else now)
