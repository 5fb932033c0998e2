"""Ctrl-C during `start-task` or `resume`: the task keeps every step it finished (the engine
commits each one as it ends), so the person is told which workflow that was and how to continue
it, instead of click's bare "Aborted!"."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

INTERRUPTED = 130
"""What a shell reports for a command ended by SIGINT (128 + 2)."""


@contextlib.contextmanager
def resumable(repo: Path, workflow_id: int | None = None) -> Iterator[None]:
    """Run a command that runs a workflow; on Ctrl-C say how to resume it and exit 130.
    `workflow_id`: the workflow it resumes; None for a new one (the one this process created
    since, supervisor/starting.py `CREATED`: asking the state database which is newest opened it
    once more, a connection and a schema check with a shared PostgreSQL database)."""
    from supervisor.starting import CREATED

    before = len(CREATED)
    try:
        yield
    except KeyboardInterrupt:
        from supervisor.cli.failure import err_console  # here: a submission loads no rich

        found = workflow_id or (CREATED[-1] if len(CREATED) > before else None)
        if found is None:
            err_console.print("Interrupted before the task was created; nothing to resume.")
        else:
            err_console.print(
                f"Interrupted. Workflow {found} keeps the steps it finished; continue it with: "
                f"supervisor resume {found}",
                highlight=False,
                markup=False,
            )
        raise SystemExit(INTERRUPTED) from None  # typer's Exit would load typer
