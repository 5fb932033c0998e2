"""What waits for a step run's end to be recorded: its container, worktree and model record.

A worker's answer and changes live in what its run leaves behind (the exited container's log,
the worktree, the proxy's record) until the engine records the step's end. Removed before that,
a kill in between loses them, and `resume` buys the same model answers again (a run that ended
while the supervisor was down is adopted from exactly these: sandbox/adopt.py). So a run's
clean-up is handed to the store, which does it once the transaction recording that step's end
has committed (`Store.transition`, `finish_step`, `checkpoint`). A process that dies first
leaves them to the next `resume`, which adopts the run or removes them with the task's other
leftovers.
"""

from __future__ import annotations

import contextlib
import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable


class AfterRecord:
    """Clean-ups by step id, each run once, after its step's end commits."""

    def __init__(self) -> None:
        self._waiting: dict[int, Callable[[], None]] = {}
        self._lock = threading.Lock()  # component steps record from their own threads

    def wait_for(self, step_id: int, cleanup: Callable[[], None]) -> None:
        with self._lock:
            self._waiting[step_id] = cleanup

    def recorded(self, step_ids: Iterable[int]) -> None:
        """The steps' ends committed: their clean-ups run (one that fails is not the step's
        failure; the task's own clean-up removes what it left)."""
        for step_id in step_ids:
            with self._lock:
                cleanup = self._waiting.pop(step_id, None)
            if cleanup is not None:
                with contextlib.suppress(Exception):
                    cleanup()
