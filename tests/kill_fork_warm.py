"""Loaded once by the fork server of tests/kill_fork.py, before any run is forked from it: what
every run of tests/kill_driver.py loads, with the collector's threshold the command sets first."""

import contextlib
import gc

from supervisor.cli.entry import GC_THRESHOLD

gc.set_threshold(GC_THRESHOLD, *gc.get_threshold()[1:])

from supervisor.context import tokens  # noqa: E402

with contextlib.suppress(Exception):  # a run that needs it then reports why
    tokens.encoding()
