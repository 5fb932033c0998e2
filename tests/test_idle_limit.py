"""When a silent worker counts as hung: the idle timeout once its model stream has begun, a
start-up allowance before the first model request (a CLI's own start-up can be silent for tens
of seconds on a loaded machine, and no stream vouches for it yet)."""

from __future__ import annotations

import os
import time
from pathlib import Path

from supervisor.sandbox.docker import RunSpec
from supervisor.sandbox.idle import STARTUP_ALLOWANCE, idle_limit, last_activity


def spec(tmp_path: Path, idle: float | None = 20) -> RunSpec:
    record = tmp_path / "record"
    record.mkdir(exist_ok=True)
    return RunSpec(argv=["claude"], worktree=tmp_path, idle_timeout=idle, record_dir=record)


def test_before_the_first_model_request_the_start_up_allowance_applies(tmp_path: Path) -> None:
    assert idle_limit(spec(tmp_path)) == STARTUP_ALLOWANCE


def test_once_the_proxy_saw_a_request_the_idle_timeout_applies(tmp_path: Path) -> None:
    run = spec(tmp_path)
    assert run.record_dir is not None
    (run.record_dir / "activity").touch()
    assert idle_limit(run) == 20


def test_a_longer_idle_timeout_is_never_shortened(tmp_path: Path) -> None:
    assert idle_limit(spec(tmp_path, idle=600)) == 600


def test_no_idle_timeout_means_none_at_start_up_too(tmp_path: Path) -> None:
    assert idle_limit(spec(tmp_path, idle=None)) is None


def test_a_live_model_stream_counts_as_activity_though_nothing_is_printed(tmp_path: Path) -> None:
    run = spec(tmp_path)
    assert run.record_dir is not None
    activity = run.record_dir / "activity"
    activity.touch()
    printed_long_ago = time.monotonic() - 500
    assert time.monotonic() - last_activity(printed_long_ago, run.record_dir) < 5
    stale = time.time() - 400
    os.utime(activity, (stale, stale))
    assert time.monotonic() - last_activity(printed_long_ago, run.record_dir) > 390
