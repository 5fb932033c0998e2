"""Naming the process that owns a leftover (a probe container, a run folder, a HEAD worktree) so
that a later supervisor can tell whether that process is still alive.

A bare pid is not enough: pids wrap, and a long-dead supervisor's pid may belong to any process
today, which would keep its leftovers forever (or, the other way, a new process could be taken
for the dead one). The owner is therefore the pid together with the process's start time (the
kernel's clock ticks since boot, /proc/<pid>/stat field 22): both together name one process for
the life of the machine. Without /proc (not Linux) the pid alone is all there is.
"""

from __future__ import annotations

import os
from pathlib import Path

SEPARATOR = "."


def start_time(pid: int) -> str | None:
    """The process's start (clock ticks since boot), or None when it does not exist or /proc
    cannot say."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) is in parentheses and may hold spaces and ')': read after the
    # last one.
    fields = stat[stat.rfind(")") + 2 :].split()
    return fields[19] if len(fields) > 19 else None


def this_process() -> str:
    """This process as an owner: "<pid>.<start>", or "<pid>" without /proc."""
    pid = os.getpid()
    start = start_time(pid)
    return f"{pid}{SEPARATOR}{start}" if start else str(pid)


def alive(owner: str) -> bool:
    """Whether the process `owner` names still runs. A bare pid (an older supervisor's label,
    or a machine without /proc) is judged by the pid alone; anything unreadable counts as alive,
    so that what cannot be attributed is left alone rather than removed under a live process."""
    pid, _, start = owner.partition(SEPARATOR)
    if not pid.isdigit():
        return True
    if not start:
        return process_alive(int(pid))
    found = start_time(int(pid))
    if found is None:  # gone, or /proc hides it (another user's, hidepid): ask the kernel
        return process_alive(int(pid))
    return found == start


def is_owner(text: str) -> bool:
    pid, _, start = text.partition(SEPARATOR)
    return pid.isdigit() and (not start or start.isdigit())


def process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # alive, another user's
    return True
