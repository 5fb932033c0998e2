"""How busy the machine is, for the preparation of next steps (steps/prepare.py): a started
container that is not used costs its CLI's start-up, 2-5 s of CPU, which only idle cores
afford."""

from __future__ import annotations

import os
from pathlib import Path


def load() -> float:
    """The 1-minute load average; the number of cores (busy) where it cannot be read."""
    try:
        return os.getloadavg()[0]
    except OSError:
        return float(os.cpu_count() or 1)


def cpu_times() -> tuple[float, float] | None:
    """The machine's (idle, total) CPU time so far, from /proc/stat (Linux); None elsewhere."""
    try:
        with Path("/proc/stat").open(encoding="ascii") as stat:
            fields = [float(v) for v in stat.readline().split()[1:9]]
    except (OSError, ValueError):
        return None
    if len(fields) < 5:
        return None
    return fields[3] + fields[4], sum(fields)  # idle + iowait
