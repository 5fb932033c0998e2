"""The `supervisor` command run inside the test process, as a shell would run it.

A `python -m supervisor` process spends ~0.4 s importing before it does anything, and the fast
specs of errors, dry runs and approvals call it dozens of times. `supervisor()` runs the same
entry point (supervisor/cli/entry.py) here instead, with what a process would have: its own
arguments, environment, working directory, an empty standard input that is not a terminal, and
standard output and error as pipes. It returns what a process returns: exit code, stdout,
stderr. An exception the command line lets escape fails the spec with its traceback, as it
would end the process with one. The end-to-end specs still start real processes.
"""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from pathlib import Path

from supervisor.cli.entry import main
from supervisor.cli.failure import console, err_console


def supervisor(
    *args: str, cwd: Path | None = None, env: dict[str, str] | None = None, columns: int = 200
) -> subprocess.CompletedProcess[str]:
    """`supervisor *args` in `cwd`, with `env` added to the environment (COLUMNS=`columns`)."""
    out, err = io.StringIO(), io.StringIO()
    saved_env, saved_argv, saved_stdin = dict(os.environ), sys.argv, sys.stdin
    saved_widths = [c._width for c in (console, err_console)]  # fit_to_output changes them
    os.environ.update({"COLUMNS": str(columns), **(env or {})})
    sys.argv, sys.stdin = ["supervisor", *args], io.StringIO("")
    code: int = 0
    try:
        with (
            contextlib.chdir(cwd or Path.cwd()),
            contextlib.redirect_stdout(out),
            contextlib.redirect_stderr(err),
        ):
            try:
                main()
            except SystemExit as e:
                code = _exit_code(e.code, err)
    finally:
        os.environ.clear()
        os.environ.update(saved_env)
        sys.argv, sys.stdin = saved_argv, saved_stdin
        console._width, err_console._width = saved_widths
    return subprocess.CompletedProcess(["supervisor", *args], code, out.getvalue(), err.getvalue())


def _exit_code(code: object, err: io.StringIO) -> int:
    """What the interpreter makes of `sys.exit(code)`: None is 0, a message is printed and 1."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=err)
    return 1
