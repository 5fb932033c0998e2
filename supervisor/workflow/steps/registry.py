"""Which module runs which kind of step: the one interface the engine calls.

Why a separate module: the engine imports only this (and `base`), so a new step kind is a new
module plus one line here, and no step module needs the engine.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from supervisor.workflow.steps.base import Outcome, StepContext
from supervisor.workflow.steps.commit import commit
from supervisor.workflow.steps.components import ComponentFanOut
from supervisor.workflow.steps.gate import gate_step
from supervisor.workflow.steps.interfaces import lock_interfaces
from supervisor.workflow.steps.parallel import parallel
from supervisor.workflow.steps.worker import run_worker

if TYPE_CHECKING:
    from supervisor.core.config import StepDef
    from supervisor.state.store import Workflow


def run(c: StepContext, wf: Workflow, name: str, step: StepDef) -> Outcome:
    """Act out step `name` of `wf` and say how it went; no workflow progress is written here."""
    if step.for_each == "component":
        return ComponentFanOut(c, wf, name, step).run()
    if step.kind == "action":
        return commit(c, wf)
    if step.kind == "gate":
        return gate_step(c, wf, name, step)
    if step.kind == "parallel":
        return parallel(c, wf, name, step.roles or [])
    outcome = run_worker(c, wf, name, step.role or "")
    if step.interfaces and outcome.result == "passed" and outcome.git_sha:
        return lock_interfaces(c, wf, name, outcome)
    return outcome
