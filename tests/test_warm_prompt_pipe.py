"""A prepared run's prompt and its CLI's pipe (supervisor/sandbox/warm.py `writer`): the prompt
waits for a pipe its container has not opened yet (started just before its step, on a loaded
host), and gives up only when the container is gone, so a good preparation is not thrown away
for being a little late; and never waits for a container that will not open it."""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING

from supervisor.sandbox import warm

if TYPE_CHECKING:
    from pathlib import Path


def test_a_pipe_opened_after_the_prompt_is_ready_still_gets_it(tmp_path: Path) -> None:
    fifo = tmp_path / "stdin"
    os.mkfifo(fifo, 0o600)
    opened = threading.Event()
    read: list[bytes] = []

    def late_reader() -> None:
        opened.wait()  # only once the writer has found no reader at least once
        with fifo.open("rb") as pipe:
            read.append(pipe.read())

    reader = threading.Thread(target=late_reader)
    reader.start()

    def alive() -> bool:
        opened.set()
        return True

    fd = warm.writer(fifo, alive)
    assert fd is not None
    with os.fdopen(fd, "wb") as pipe:
        pipe.write(b'{"type": "user"}\n')
    reader.join()
    assert read == [b'{"type": "user"}\n']


def test_no_reader_from_a_container_that_is_gone_is_no_prompt(tmp_path: Path) -> None:
    fifo = tmp_path / "stdin"
    os.mkfifo(fifo, 0o600)
    assert warm.writer(fifo, lambda: False, wait=60) is None


def test_no_reader_within_the_wait_is_no_prompt(tmp_path: Path) -> None:
    fifo = tmp_path / "stdin"
    os.mkfifo(fifo, 0o600)
    assert warm.writer(fifo, lambda: True, wait=0) is None


def test_a_run_folder_that_is_gone_is_no_prompt(tmp_path: Path) -> None:
    assert warm.writer(tmp_path / "stdin", lambda: True) is None
