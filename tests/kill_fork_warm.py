"""Loaded once by the fork server of tests/kill_fork.py, before any run is forked from it: what
every run of tests/kill_driver.py loads, with the collector's threshold the command sets first."""

import contextlib
import gc

from supervisor.cli.entry import GC_THRESHOLD

gc.set_threshold(GC_THRESHOLD, *gc.get_threshold()[1:])

import supervisor.sandbox.standin  # noqa: E402
import supervisor.tasks  # noqa: E402, F401
from supervisor.context import tokens  # noqa: E402

with contextlib.suppress(Exception):  # a run that needs it then reports why
    tokens.encoding()
