"""`supervisor worker` and the Temporal side of start-task, approve and reject (issue 15).

Imported by those commands only when they need it: temporalio is not loaded by the others.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from supervisor.cli.common import RepoOption, err_console


def _at_least_one(value: int) -> int:
    """`--max-parallel`'s check, said in its help rather than as typer's `[x>=1]` label."""
    if value < 1:
        raise typer.BadParameter(f"{value} steps at once runs nothing; give 1 or more.")
    return value


def worker(
    repo: RepoOption = Path(),
    queue: Annotated[
        str | None,
        typer.Option(
            help="The task queue's name (default: temporal.task_queue, else 'supervisor'); "
            "the repository's identity is appended, as a submission does."
        ),
    ] = None,
    max_parallel: Annotated[
        int,
        typer.Option(
            "--max-parallel",
            metavar="N",
            callback=_at_least_one,
            help="Steps this host runs at once (1 or more).",
        ),
    ] = 2,
    address: Annotated[
        str | None, typer.Option(metavar="HOST:PORT", help="The Temporal server.")
    ] = None,
    namespace: Annotated[str | None, typer.Option(help="The Temporal namespace.")] = None,
    capabilities: Annotated[
        str | None,
        typer.Option(
            metavar="POOL[,POOL...]",
            help="The worker pools this host serves, e.g. large_context,isolated (default: "
            "worker.capabilities in your config): it also runs the steps of roles that prefer "
            "or require them (docs/worker-pools.md).",
        ),
    ] = None,
    max_tasks: Annotated[
        int | None,
        typer.Option(
            "--max-tasks",
            metavar="N",
            callback=lambda v: v if v is None else _at_least_one(v),
            help="Exit (0) once steps of N tasks ran here and none still runs: a CI runner's "
            "worker.",
        ),
    ] = None,
) -> None:
    """Run the steps of tasks submitted with `start-task --backend temporal`, on this host."""
    from supervisor.lifecycle import opening as projects
    from supervisor.temporal.worker import run_worker

    proj = projects.open_project(repo)
    projects.require_trust(proj)
    cfg = proj.settings.temporal
    run_worker(
        proj.root,
        address or cfg.address,
        namespace or cfg.namespace,
        queue or cfg.task_queue,
        max_parallel,
        _pools(capabilities),
        max_tasks,
    )


def _pools(given: str | None) -> list[str] | None:
    """`--capabilities a,b` as pool names, checked as the config's `worker.capabilities`."""
    if given is None:
        return None
    from pydantic import ValidationError

    from supervisor.core.pool_settings import WorkerSettings

    names = [n.strip() for n in given.split(",") if n.strip()]
    try:
        return WorkerSettings(capabilities=names).capabilities
    except ValidationError as e:
        said = "; ".join(str(error["msg"]) for error in e.errors())
        raise typer.BadParameter(said, param_hint="--capabilities") from None


def resume_elsewhere(repo: Path, workflow_id: int, here: bool) -> bool:
    """`resume` of a task Temporal owns hands it back to Temporal (a new run of its workflow
    from the recorded state) instead of running it here; `--here` runs it here, warned."""
    from supervisor.lifecycle.task_state import reading

    with reading(repo) as state:
        owned = any(e.type == "temporal_submitted" for e in state.events(workflow_id))
    if not owned:
        return False
    if here:
        err_console.print(
            f"Warning: task {workflow_id} was submitted to Temporal; running it here, in this "
            "checkout. Its workflow may still be retrying: whichever holds the task first runs "
            "it, the other waits.",
            highlight=False,
            markup=False,
        )
        return False
    from supervisor.lifecycle import opening
    from supervisor.temporal.client import hand_back

    handed = hand_back(opening.open_project(repo), workflow_id)
    for said in handed.said:  # what it found: a workflow closed in Temporal, an old queue
        err_console.print(f"Task {workflow_id}: {said}.", highlight=False, markup=False)
    err_console.print(
        f"Task {workflow_id} handed back to Temporal: a worker on queue {handed.queue} continues "
        f"it (`supervisor status {workflow_id}`; `resume --here` runs it in this checkout).",
        highlight=False,
        markup=False,
    )
    return True


def signal_decision(repo: Path, workflow_id: int) -> bool:
    """After approve/reject: wake the task's Temporal workflow, when it has one."""
    from supervisor.lifecycle.task_state import reading

    with reading(repo) as state:
        if not any(e.type == "temporal_submitted" for e in state.events(workflow_id)):
            return False
        from supervisor.temporal.client import SUBMITTED, signal_decided

        where = next(e.payload for e in reversed(state.events(workflow_id)) if e.type == SUBMITTED)
    signal_decided(where)
    err_console.print("Sent to the task's Temporal workflow; a worker continues it.")
    return True
