"""The randomized kill spec's supervisor processes, forked from one that has already loaded what
a run loads (tests/kill_fork_warm.py: the package, SQLAlchemy, pydantic, tiktoken's encoding).

Each run of tests/kill_driver.py is still a process of its own, started afresh from the
environment given, SIGKILLed from outside or at its fault-injection point, and resumed by another:
what the spec kills is the same. Only the interpreter's start-up and imports, the same in every
one of the ~36 runs, are paid once per test process (about 1.5 CPU-s a run) instead of each time.
"""

from __future__ import annotations

import importlib
import multiprocessing
import os
import runpy
import sys
from pathlib import Path

_CONTEXT = multiprocessing.get_context("forkserver")
_CONTEXT.set_forkserver_preload(["kill_fork_warm"])


def start(argv: list[str], env: dict[str, str], output: Path) -> multiprocessing.Process:
    """Run the script `argv[0]` with `argv` and exactly `env`, its stdout and stderr to
    `output`; the caller joins it (`exitcode` -9: killed) or kills it."""
    proc = _CONTEXT.Process(target=_run, args=(argv, env, str(output)), daemon=False)
    proc.start()
    return proc


def _run(argv: list[str], env: dict[str, str], output: str) -> None:
    fd = os.open(output, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    os.environ.clear()
    os.environ.update(env)
    from supervisor.core import faults

    importlib.reload(faults)  # it reads SUPERVISOR_KILL_AT when imported
    sys.argv = list(argv)
    runpy.run_path(argv[0], run_name="__main__")
