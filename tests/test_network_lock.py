"""The lock around creating the workers' network (sandbox/egress.py): taken where it can be, and
never a way for another user to stop a supervisor."""

from __future__ import annotations

import fcntl
import os
import tempfile
import threading
import time
from pathlib import Path

import pytest

from supervisor.sandbox.egress import _host_lock


@pytest.fixture
def name() -> str:
    return f"supervisor-lock-spec-{os.getpid()}-{time.monotonic_ns()}.lock"


def test_two_creators_take_turns(name: str) -> None:
    inside: list[int] = []
    overlap: list[bool] = []

    def create(n: int) -> None:
        with _host_lock(name, wait=30):
            inside.append(n)
            overlap.append(len(inside) > 1)
            time.sleep(0.1)
            inside.remove(n)

    threads = [threading.Thread(target=create, args=(n,)) for n in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert overlap == [False, False, False]
    (Path(tempfile.gettempdir()) / name).unlink()


def test_a_link_planted_at_its_path_is_not_followed_and_the_creator_goes_on(
    name: str, tmp_path: Path
) -> None:
    target = tmp_path / "not-to-touch"
    link = Path(tempfile.gettempdir()) / name
    link.symlink_to(target)
    try:
        with _host_lock(name, wait=30):
            pass
        assert not target.exists()
    finally:
        link.unlink()


def test_a_lock_held_past_the_wait_leaves_the_creator_to_go_on(name: str) -> None:
    path = Path(tempfile.gettempdir()) / name
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)  # as a process that never lets go would
    try:
        began = time.monotonic()
        with _host_lock(name, wait=0.5):
            waited = time.monotonic() - began
        assert waited >= 0.5
    finally:
        os.close(fd)
        path.unlink()
