"""`supervisor status --watch`: the `status` view redrawn in place, for those who stay in the shell.

It reads the state database read-only on each refresh (like `status`), so it never blocks the task
it watches. It ends on Ctrl-C, or, when it watches one workflow, once nothing will move it without
a person: it finished, it waits for an approval (or a resume after one), or no supervisor runs it
any more (killed: it says so, with the command that continues it). With `--exit-status` (as `gh
run watch`) the exit code says how it ended (supervisor/cli/watch.py `Ending`). Ctrl-C exits 130,
with or without it, as docs/commands.md says of an interrupt: `status --watch --exit-status &&
supervisor complete-task 1` must not take a person's Ctrl-C for a completed task.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rich.live import Live

from supervisor.cli.interrupt import INTERRUPTED
from supervisor.guard.textsafe import Guarded
from supervisor.views.render import fit, workflow_detail, workflows_table

if TYPE_CHECKING:
    from pathlib import Path

    from rich.console import Console, RenderableType

    from supervisor.state.records import Workflow

WAITING_CODE = 10
"""The exit code of a workflow that waits for a person, as `start-task` and `resume` use it."""


@dataclass(frozen=True)
class Ending:
    """Why the watch stopped: the line it prints, and its exit code under --exit-status."""

    message: str
    code: int


def ending(wf: Workflow, supervised: bool, temporal: bool = False) -> Ending | None:
    """Whether the watched workflow stands where only a person moves it; None: keep watching.
    `supervised`: a process runs it (a `running` task with none was killed); `temporal`: the
    task is Temporal's, so "a process" is a worker of its queue (supervisor/state/runner_view.py
    `runner_alive`)."""
    from supervisor.state.status_label import decision

    resume = f"supervisor resume {wf.id}"
    if wf.status == "completed":
        return Ending(f"Workflow {wf.id} completed.", 0)
    if wf.status == "failed":
        return Ending(f"Workflow {wf.id} failed. After fixing the cause: {resume}", 1)
    if wf.status == "interrupted":
        return Ending(f"Workflow {wf.id} was interrupted. Continue it with: {resume}", 1)
    if wf.status == "awaiting_approval":
        if decision(wf) is not None:
            return Ending(f"Workflow {wf.id} is {decision(wf)}; continue it with: {resume}", 10)
        return Ending(
            f"Workflow {wf.id} waits for approval: supervisor approve {wf.id} "
            f'(or supervisor reject {wf.id} --reason "..."), then {resume}',
            WAITING_CODE,
        )
    if wf.status == "budget_exceeded":
        return Ending(
            f"Workflow {wf.id} paused at its budget: supervisor approve {wf.id} --extend "
            f"<dollars>, then {resume}",
            WAITING_CODE,
        )
    if wf.status == "running" and not supervised and temporal:
        return Ending(
            f"No worker runs workflow {wf.id} or polls its Temporal queue any more. Start one "
            f"(supervisor worker) and it continues the task; or hand it back: {resume}",
            1,
        )
    if wf.status == "running" and not supervised:
        return Ending(
            f"No supervisor runs workflow {wf.id} any more (it was stopped or crashed). "
            f"Continue it with: {resume}",
            1,
        )
    return None


def _view(
    console: Console, repo: Path, wf_id: int | None
) -> tuple[RenderableType, Workflow | None, bool | None]:
    """The view to draw; the watched workflow and whether a supervisor runs it (None: it is
    Temporal's task and no worker runs it or polls its queue)."""
    from supervisor.lifecycle import task_state as access
    from supervisor.state.runner_view import runner_alive

    # Guarded here, not only by the console: a live display draws past the console's hooks.
    if wf_id is None:
        found = access.workflows(repo)
        table = workflows_table(found, access.supervisors(repo, found))
        return Guarded(fit(console, table)), None, True
    with access.reading(repo) as store:
        wf = store.workflow(wf_id)
        about: list[str] = []
        if wf.status == "awaiting_approval":
            from supervisor.policy.approvals import pending

            about = pending(wf, access.state_db(repo).parent.parent)
        pids = access.supervisors(repo, [wf])
        view = Guarded(fit(console, workflow_detail(store, wf_id, about, pids)))
        supervised: bool | None = pids.get(wf.id, 0) is not None
        if not supervised:  # a Temporal task has no local pid: its workers and queue say
            alive = runner_alive(store, wf)
            supervised = (alive or None) if alive is not None else False
        return view, wf, supervised


def watch(
    console: Console, repo: Path, wf_id: int | None, interval: float, exit_status: bool = False
) -> int:
    """Watch until Ctrl-C (130) or an ending; the exit code (0 unless `exit_status`)."""
    view, wf, supervised = _view(console, repo, wf_id)
    orphaned_at: str | None = None  # the update seen with no supervisor, to see it twice
    end: Ending | None = None
    interrupted = False
    with Live(view, console=console, auto_refresh=False, transient=False) as live:
        try:
            while True:
                if wf is not None:
                    # A task between its creation and its lock has no supervisor for a moment:
                    # only the same state seen twice with none counts as a dead supervisor.
                    stamp = f"{wf.status} {wf.updated_at}"
                    dead = not supervised and orphaned_at == stamp
                    orphaned_at = None if supervised else stamp
                    end = ending(wf, bool(supervised) or not dead, temporal=supervised is None)
                    if end is not None:
                        break
                time.sleep(interval)
                view, wf, supervised = _view(console, repo, wf_id)
                live.update(view, refresh=True)
        except KeyboardInterrupt:
            interrupted = True  # the watched task goes on: only this reader stopped
    if not console.is_terminal:  # rich ends its last drawing with a line break on a terminal only
        console.line()
    if interrupted:
        return INTERRUPTED
    if end is None:
        return 0
    console.print(end.message, highlight=False, markup=False)
    return end.code if exit_status else 0
