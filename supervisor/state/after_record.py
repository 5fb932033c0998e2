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
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable


class AfterRecord:
    """Clean-ups by step id, each run once, after its step's end commits: behind the engine, one
    at a time (removing a container takes 0.05-0.3 s that the next step should not wait for),
    and all done before the store closes or a task's own clean-up begins (`drain`)."""

    def __init__(self) -> None:
        self._waiting: dict[int, Callable[[], None]] = {}
        self._lock = threading.Lock()  # component steps record from their own threads
        self._pool: ThreadPoolExecutor | None = None
        self._running: list[Future[None]] = []

    def wait_for(self, step_id: int, cleanup: Callable[[], None]) -> None:
        with self._lock:
            self._waiting[step_id] = cleanup

    def recorded(self, step_ids: Iterable[int]) -> None:
        """The steps' ends committed: their clean-ups start (one that fails is not the step's
        failure; the task's own clean-up removes what it left)."""
        with self._lock:
            cleanups = [c for c in (self._waiting.pop(i, None) for i in step_ids) if c]
            if not cleanups:
                return
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="after-record")
            self._running = [f for f in self._running if not f.done()]
            self._running += [self._pool.submit(_quietly, c) for c in cleanups]

    def drain(self) -> None:
        """Wait until every clean-up started so far is done."""
        with self._lock:
            running = list(self._running)
        for future in running:
            future.result()


def _quietly(cleanup: Callable[[], None]) -> None:
    with contextlib.suppress(Exception):
        cleanup()
