"""The largest component implementer prompt at N components, with the whole plan and with its view.

    .venv/bin/python benchmarks/prompt_size.py [--components 20 40]

Renders, through the real implementer role, templates and context packing, the prompt of every
component of a synthetic N-component plan (three phases, a chain of depends_on, plan-like
descriptions) on the demo repository, the way the engine does (task text and targets included),
and prints the largest: with the whole plan as JSON in every prompt (how the engine did it before
supervisor/context/plan_view.py) and with the component's view of the plan (how it does it now).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from supervisor.context import prompts  # noqa: E402
from supervisor.context.plan_view import plan_for_prompt  # noqa: E402
from supervisor.context.roles import load_role  # noqa: E402
from supervisor.core.dag import WorkGraph  # noqa: E402
from supervisor.core.schemas import PlanOutput  # noqa: E402
from supervisor.lifecycle.demo import make_demo_repo  # noqa: E402
from supervisor.workflow.steps.worker import component_task as _component_task  # noqa: E402

TASK = "Build the inventory service: items, stock levels, orders and their HTTP API."


def synthetic_plan(n: int) -> dict[str, Any]:
    phases: list[dict[str, Any]] = [
        {"id": f"phase{p}", "description": f"Phase {p} of the service", "components": []}
        for p in range(3)
    ]
    for i in range(n):
        phases[i * 3 // n]["components"].append(
            {
                "id": f"component_{i:02d}",
                "description": f"Implements part {i} of the service: its data model, the "
                "validation of its inputs and the HTTP handlers that expose it, with tests.",
                "files": [f"app/part_{i:02d}.py", f"tests/test_part_{i:02d}.py"],
                "depends_on": [f"component_{i - 1:02d}"] if i else [],
            }
        )
    return PlanOutput.model_validate(
        {
            "status": "COMPLETE",
            "summary": "Build the service in parts, each with its tests.",
            "phases": phases,
            "estimated_components": n,
            "risks": ["The parts share a database schema."],
        }
    ).model_dump()


def largest(repo: Path, plan: dict[str, Any], whole: bool) -> tuple[int, int]:
    """(largest prompt in bytes, total bytes over all components)."""
    role = load_role("implementer", repo)
    work = WorkGraph.from_plan(PlanOutput.model_validate(plan))
    sizes = []
    for component in work.components.values():
        prompt, _ = prompts.compose(
            role,
            repo,
            repo,
            task=TASK + _component_task(component),
            feedback=[],
            plan=json.dumps(plan, indent=2) if whole else plan_for_prompt(plan, component),
            targets=component.files,
            diff="",
        )
        sizes.append(len(prompt.encode()))
    return max(sizes), sum(sizes)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--components", type=int, nargs="+", default=[20, 40])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["SUPERVISOR_USER_DIR"] = str(Path(tmp) / "user")
        repo = make_demo_repo(Path(tmp) / "demo")
        print(f"{'N':>4}  {'whole plan: largest / all':>28}  {'own view: largest / all':>28}")
        for n in args.components:
            plan = synthetic_plan(n)
            before, before_all = largest(repo, plan, whole=True)
            after, after_all = largest(repo, plan, whole=False)
            print(
                f"{n:>4}  {before / 1000:>10.1f} KB / {before_all / 1000:>8.0f} KB"
                f"    {after / 1000:>10.1f} KB / {after_all / 1000:>8.0f} KB"
            )


if __name__ == "__main__":
    main()
