"""When a worker counts as hung: silence measured against its last output and its model stream.

Kept apart from the container code because the credential proxy's daemon reads it too (it bumps
the activity file this reads), and the specs time it without a container.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

    from supervisor.sandbox.run_spec import RunSpec

RECHECK = 5.0
"""How often a worker's wait looks at its model stream again (one engine request each time)."""
STARTUP_ALLOWANCE = 90.0
"""How long a worker may stay silent before its first model request. A CLI's own start-up
(gemini's especially) can be silent for tens of seconds on a loaded machine, and no model
stream vouches for it yet; once the proxy has seen a request, the idle timeout applies."""


def idle_limit(spec: RunSpec) -> float | None:
    """The silence after which the run counts as hung: the idle timeout, or the start-up
    allowance while the proxy has recorded no request of the run."""
    if spec.idle_timeout is None:
        return None
    if spec.record_dir is not None and not (spec.record_dir / "activity").exists():
        return max(spec.idle_timeout, STARTUP_ALLOWANCE)
    return spec.idle_timeout


def last_activity(last_output: float, record_dir: Path | None) -> float:
    """When the worker last showed life, on the monotonic clock: its last line of output, or
    the last bytes of its model stream (the proxy bumps `<record_dir>/activity`), whichever is
    later. The file's mtime is wall-clock time, carried over by its age."""
    if record_dir is None:
        return last_output
    try:
        age = time.time() - (record_dir / "activity").stat().st_mtime
    except OSError:
        return last_output
    return max(last_output, time.monotonic() - max(age, 0.0))
