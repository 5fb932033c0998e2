"""How fast this machine is right now, apart from the supervisor: a pure-Python loop, process
creation, an interpreter's start and a no-op container of the sandbox image. The same code
measured twice as slow on a machine up for a day as on a fresh one (benchmarks/test-durations.md,
eighteenth pass), so a figure from another day is compared only after these agree:

    .venv/bin/python benchmarks/machine.py

On the fresh 2-core machine of 2026-11-28 (uptime ~70 min, idle): loop 0.088-0.090 s, 200 x
/bin/true 0.104-0.106 s, 20 interpreters 0.324-0.328 s, a container 0.192-0.196 s.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import timeit
from collections.abc import Callable
from pathlib import Path

IMAGE = os.environ.get("SUPERVISOR_IMAGE", "supervisor-sandbox:latest")


def timed(action: Callable[[], object], repeat: int) -> float:
    return statistics.median(timeit.repeat(action, number=1, repeat=repeat))


def loop() -> int:
    total = 0
    for i in range(3_000_000):
        total += i * i
    return total


def main() -> None:
    uptime = float(Path("/proc/uptime").read_text().split()[0])
    print(f"uptime {uptime / 3600:.1f} h, load {os.getloadavg()}")
    print(f"pure-Python loop of 3M:        {timed(loop, 5):.3f} s")
    spawn = timed(lambda: [subprocess.run(["/bin/true"], check=True) for _ in range(200)], 3)
    print(f"200 x /bin/true:               {spawn:.3f} s")
    start = [sys.executable, "-c", "pass"]
    interpreters = timed(lambda: [subprocess.run(start, check=True) for _ in range(20)], 3)
    print(f"20 x `python -c pass`:         {interpreters:.3f} s")
    container = ["docker", "run", "--rm", "--network", "none", IMAGE, "true"]
    print(
        f"a no-op container of {IMAGE}: "
        f"{timed(lambda: subprocess.run(container, capture_output=True, check=True), 3):.3f} s"
    )


if __name__ == "__main__":
    main()
