"""The answers that assess a task rather than change it: the analyzer's verdict and the
investigator's report (supervisor/workflow/depth.py).

Both were validated against their schema before they get here (a bad one went back to the worker
with the reason, like any answer); they pass into the workflow's state for the engine, which
chooses the path from the verdict (workflow/decide.py) and hands the report to the planner.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from supervisor.workflow.steps.base import Outcome

if TYPE_CHECKING:
    from supervisor.workflow.steps.results import Answer


def answer(a: Answer) -> Outcome:
    data = a.data
    if a.role.output == "analysis":
        record = a.record("succeeded", "analysis", f"{data['path']} ({data['complexity']}/10)")
        return Outcome("passed", records=[record], context={"analysis": data})
    record = a.record("succeeded", "research", f"{len(data['findings'])} findings")
    return Outcome("passed", records=[record], context={"research": data})
