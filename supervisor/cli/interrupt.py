"""Ctrl-C or SIGTERM during `start-task` or `resume`, and a fault of the machine under them: the
task keeps every step it finished (the engine commits each one as it ends), so the person is told
which workflow that was and how to continue it, instead of click's bare "Aborted!" or a
traceback.

SIGTERM is how systemd, `docker stop` and a CI runner's cancel ask a process to stop. While a
workflow runs, it stops the run as Ctrl-C does (supervisor/core/errors.py `Terminated`, a
KeyboardInterrupt), except that a worker container still running is left running for `resume` to
adopt; the process exits 143 (128 + 15), as a shell reports a command ended by SIGTERM. The
handler is installed only around the run, only in the main thread (the only one Python lets set
one), and the previous handler is put back after.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from typing import TYPE_CHECKING

from supervisor.core.errors import Terminated

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path
    from types import FrameType

INTERRUPTED = 130
"""What a shell reports for a command ended by SIGINT (128 + 2)."""
TERMINATED = 143
"""What a shell reports for a command ended by SIGTERM (128 + 15)."""


@contextlib.contextmanager
def resumable(repo: Path, workflow_id: int | None = None) -> Iterator[None]:
    """Run a command that runs a workflow; on Ctrl-C (exit 130) or SIGTERM (exit 143) say how
    to resume it; a full disk or a locked state database (supervisor/core/host_faults.py) becomes
    its typed error, its fix naming the `resume` that continues the task. `workflow_id`: the
    workflow it resumes; None for a new one (the one this process created since,
    supervisor/lifecycle/starting.py `CREATED`: asking the state database which is newest opened it
    once more, a connection and a schema check with a shared PostgreSQL database)."""
    from supervisor.lifecycle.starting import CREATED

    before = len(CREATED)

    def found() -> int | None:
        return workflow_id or (CREATED[-1] if len(CREATED) > before else None)

    try:
        with _terminating():
            yield
    except KeyboardInterrupt as stop:
        _say_stopped(found(), isinstance(stop, Terminated))
        raise SystemExit(TERMINATED if isinstance(stop, Terminated) else INTERRUPTED) from None
    except Exception as e:
        from supervisor.core import host_faults  # here: only a failed run needs it

        fault = host_faults.machine_fault(e, found(), near=_written(repo))
        if fault is None or fault is e:
            raise
        raise fault from e


@contextlib.contextmanager
def _terminating() -> Iterator[None]:
    """SIGTERM raises `Terminated` in the main thread while the block runs; once only (a second
    signal while the run unwinds is ignored: the first one's clean stop is under way)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, frame: FrameType | None) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        raise Terminated

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        # None: a handler not set from Python; the default is what it was then.
        signal.signal(signal.SIGTERM, previous if previous is not None else signal.SIG_DFL)


def _say_stopped(wf_id: int | None, terminated: bool) -> None:
    from supervisor.cli.failure import err_console  # here: a submission loads no rich

    how = "Stopped (SIGTERM)" if terminated else "Interrupted"
    if wf_id is None:
        err_console.print(f"{how} before the task was created; nothing to resume.")
        return
    kept = " and leaves its running workers to `resume`" if terminated else ""
    err_console.print(
        f"{how}. Workflow {wf_id} keeps the steps it finished{kept}; continue it with: "
        f"supervisor resume {wf_id}",
        highlight=False,
        markup=False,
    )


def _written(repo: Path) -> list[Path]:
    """Where a run writes: the state folder (database, worktrees, bases), the repository's git
    directory (objects and refs) and the repository."""
    from supervisor.core.trustmap import STATE_DIR

    state = repo / STATE_DIR
    return [state / "worktrees", state, repo / ".git", repo]
