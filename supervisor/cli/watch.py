"""`supervisor status --watch`: the `status` view redrawn in place, for those who stay in the shell.

It reads the state database read-only on each refresh (like `status`), so it never blocks the task
it watches. It ends on Ctrl-C, or, when it watches one workflow, once that workflow has finished.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from rich.live import Live

from supervisor.cli.render import fit, workflow_detail, workflows_table
from supervisor.guard.textsafe import Guarded

if TYPE_CHECKING:
    from pathlib import Path

    from rich.console import Console, RenderableType

FINISHED = ("completed", "failed")


def _view(console: Console, repo: Path, wf_id: int | None) -> tuple[RenderableType, bool]:
    """The view to draw, and whether the watched workflow has finished."""
    from supervisor import task_state as access

    # Guarded here, not only by the console: a live display draws past the console's hooks.
    if wf_id is None:
        return Guarded(fit(console, workflows_table(access.workflows(repo)))), False
    with access.reading(repo) as store:
        wf = store.workflow(wf_id)
        about: list[str] = []
        if wf.status == "awaiting_approval":
            from supervisor.policy.approvals import pending

            about = pending(wf, access.state_db(repo).parent.parent)
        view = Guarded(fit(console, workflow_detail(store, wf_id, about)))
        return view, wf.status in FINISHED


def watch(console: Console, repo: Path, wf_id: int | None, interval: float) -> None:
    view, done = _view(console, repo, wf_id)
    with Live(view, console=console, auto_refresh=False, transient=False) as live:
        try:
            while not done:
                time.sleep(interval)
                view, done = _view(console, repo, wf_id)
                live.update(view, refresh=True)
        except KeyboardInterrupt:
            pass
