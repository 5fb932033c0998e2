"""The `supervisor` command as a process of its own, its workers scripted on the stand-in sandbox
(supervisor/sandbox/standin.py), for the specs of what a process meets from outside: a signal,
a file system that fills up, a state database another program holds locked
(tests/test_machine_faults.py).

`python tests/standin_cli.py ARGS...` runs `supervisor ARGS...` through the real entry point
(supervisor/cli/entry.py), exit code and output as the command's, with `tasks.open_sandbox`
giving the stand-in. The workflow's roles answer as below, chosen by the environment:

- the implementer writes answer.txt and reports it; with STANDIN_IMPLEMENTER=blocks it first
  touches STANDIN_MARK and waits there for a minute (the spec signals the process meanwhile);
  with `waits`, it touches STANDIN_MARK and waits until the spec creates STANDIN_RELEASE (a
  worker paused mid-step and woken later, or a step that lasts as long as the spec needs);
  with `fills`, after writing its file it fills the file system of STANDIN_BALLAST up to the
  last byte (another program filling the disk while the implementer runs), touches
  STANDIN_MARK and answers; with `fills-inodes`, the same with empty files in the folder
  STANDIN_BALLAST until no new file fits (its inodes run out);
- the reviewer approves.

Each worker run appends its role to STANDIN_LOG, flushed before it answers: the conversations
the task bought, however many processes ran it.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from supervisor.cli.entry import main
from supervisor.lifecycle import tasks
from supervisor.sandbox.standin import StandinSandbox, WorkerCall, answer

BLOCK_S = 60.0


def implement(call: WorkerCall) -> str:
    how = os.environ.get("STANDIN_IMPLEMENTER", "")
    if how == "blocks":
        Path(os.environ["STANDIN_MARK"]).touch()
        time.sleep(BLOCK_S)
    if how == "waits":
        Path(os.environ["STANDIN_MARK"]).touch()
        release, deadline = Path(os.environ["STANDIN_RELEASE"]), time.monotonic() + 2 * BLOCK_S
        while not release.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
    call.write("answer.txt", "right\n")
    if how in ("fills", "fills-inodes"):
        ballast = Path(os.environ["STANDIN_BALLAST"])
        fill(ballast) if how == "fills" else fill_inodes(ballast)
        Path(os.environ["STANDIN_MARK"]).touch()
    return answer(
        {
            "status": "SUCCESS",
            "summary": "wrote answer.txt",
            "files_created": ["answer.txt"],
            "files_modified": [],
            "tests_written": [],
            "blockers": [],
        }
    )


def fill(ballast: Path) -> None:
    """Write `ballast` until the file system has no byte left (ENOSPC ends it, as it would end
    any program's write)."""
    fd = os.open(ballast, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    block = b"\0" * 65536
    try:
        while True:
            try:
                os.write(fd, block)
            except OSError:
                if len(block) == 1:
                    break
                block = block[: len(block) // 2]
    finally:
        os.close(fd)


def fill_inodes(folder: Path) -> None:
    """Make empty files in `folder` until the file system has no entry left for one more (its
    inodes run out: ENOSPC too); the files there already can still grow."""
    folder.mkdir()
    n = 0
    while True:
        try:
            (folder / str(n)).touch()
        except OSError:
            return
        n += 1


def worker(call: WorkerCall) -> str:
    if call.role == "reviewer":
        reply = answer({"status": "APPROVED", "summary": "fine", "issues": []})
    else:
        reply = implement(call)
    log = os.environ.get("STANDIN_LOG")
    if log:
        with Path(log).open("a") as handle:
            handle.write(call.role + "\n")
            handle.flush()
            os.fsync(handle.fileno())
    return reply


if __name__ == "__main__":
    sandbox = StandinSandbox(worker)
    tasks.open_sandbox = lambda project, clis, **_: sandbox  # type: ignore[assignment]
    sys.argv = ["supervisor", *sys.argv[1:]]
    main()
