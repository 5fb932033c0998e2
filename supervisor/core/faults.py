"""Fault injection for the crash-safety tests: SIGKILL the supervisor at a named point.

`SUPERVISOR_KILL_AT=<event type>[#n][:during]` kills this process when it records the n-th event
of that type (default the first): just after the transaction commits, or with `:during`, inside
it, before the commit. Every state change writes an event, so event types name the points between
and inside steps, merges and database writes. Unset (always, outside tests), it costs a lookup.
"""

from __future__ import annotations

import os
import signal
import threading
from collections import Counter

_SPEC = os.environ.get("SUPERVISOR_KILL_AT", "")
_point, _, _phase = _SPEC.partition(":")
_TYPE, _, _NTH = _point.partition("#")
_seen: Counter[str] = Counter()
_armed = threading.local()
_lock = threading.Lock()


def event_written(event_type: str) -> None:
    """Called inside the transaction that records an event."""
    if _hit(event_type):
        if _phase == "during":
            _kill()
        _armed.pending = True


def committed() -> None:
    """Called after a transaction commits."""
    if getattr(_armed, "pending", False):
        _kill()


def reached(point: str) -> None:
    """A named point that writes no event (e.g. "probe": the preflight probe's container made,
    not yet started; "worker_ran": a worker's container ended and read, its step's end not yet
    recorded; "merging", "committing", "gate_worktree": before a component's merge, the commit
    of the task branch, a gate's worktree), counted like an event type. The specs of machine
    faults (tests/test_machine_fault_moments.py) put a SIGTERM, a lock or a full disk here
    instead of the SIGKILL."""
    if _hit(point):
        _kill()


def _hit(name: str) -> bool:
    """Whether this is the n-th time `name` comes, the one to kill at."""
    if not _TYPE or name != _TYPE:
        return False
    with _lock:
        _seen[name] += 1
        return _seen[name] == int(_NTH or 1)


def _kill() -> None:
    os.kill(os.getpid(), signal.SIGKILL)
