"""A leftover names its owner by pid and start time, so that a later supervisor tells a dead
owner from a live one even after the pid was reused. Real processes, no mocks."""

from __future__ import annotations

import os
import subprocess
import sys

from supervisor.core import owners


def test_this_process_is_alive_by_its_pid_and_start_time() -> None:
    me = owners.this_process()

    pid, _, start = me.partition(owners.SEPARATOR)
    assert pid == str(os.getpid()) and start.isdigit()
    assert owners.alive(me)


def test_a_process_that_ended_is_dead() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=-1)
    start = owners.start_time(child.pid)
    owner = f"{child.pid}{owners.SEPARATOR}{start}"
    assert owners.alive(owner)

    child.communicate(b"")

    assert not owners.alive(owner)


def test_a_reused_pid_does_not_keep_a_dead_owner_alive() -> None:
    """The pid now belongs to another process (this one) that started at another moment."""
    me = owners.start_time(os.getpid())
    assert me is not None
    earlier = f"{os.getpid()}{owners.SEPARATOR}{int(me) - 1}"

    assert not owners.alive(earlier)


def test_an_older_supervisor_s_bare_pid_is_judged_by_the_pid_alone() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()

    assert owners.alive(str(os.getpid()))
    assert not owners.alive(str(child.pid))


def test_what_names_no_process_is_left_alone() -> None:
    for text in ("", "abc", "12x.5", "-1"):
        assert not owners.is_owner(text) or owners.alive(text)
    assert owners.alive("abc")  # unattributable: never removed as if dead
