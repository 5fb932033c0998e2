"""How long a change to the SQLite state database waits for another program's lock on it.

Supervisor processes hold the write lock for one short transaction at a time, so the wait is for
a program that holds it longer (an open `sqlite3` shell in a transaction, a database browser):
past it, the change is refused whole and the holder is named (supervisor/core/host_faults.py). Every
connection to the file takes the same wait: the store's, the task lease's, the fast reader's and
writer's. Standard library only: `status` and submissions read this without SQLAlchemy.
"""

from __future__ import annotations

import os

BUSY_TIMEOUT_ENV = "SUPERVISOR_STATE_BUSY_TIMEOUT"
"""Seconds (default 30)."""
DEFAULT_S = 30.0


def busy_timeout() -> float:
    try:
        return max(0.0, float(os.environ.get(BUSY_TIMEOUT_ENV, DEFAULT_S)))
    except ValueError:
        return DEFAULT_S


def busy_timeout_pragma() -> str:
    return f"PRAGMA busy_timeout={int(busy_timeout() * 1000)}"
