"""`r` in the TUI: start `supervisor resume <id>` for the person, detached, and say when it ends.

The resume is this supervisor's own command, run as its own process in its own session: Ctrl-C
or quitting the TUI does not stop it (as a second terminal would not), and the TUI shows its
progress the way it shows any task's, from the state database. Its output goes to
`.supervisor/resume-<id>.log`, which the TUI names when the process ends.

Nothing of the repository runs here. The interpreter starts with `-P` and this code's directory
first on PYTHONPATH, so a `supervisor/` package in the repository (the working directory) is not
what `-m supervisor` imports; the log is opened with O_NOFOLLOW, so a symlink planted at its
name does not send the output into another file.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from supervisor.core.errors import StateError

ENDINGS = ("error:", "⏸")
"""How the command line begins what a command ends on: an error, or a wait for a person."""
SAID = 600
"""Characters of it a toast shows; the log has the rest."""


@dataclass
class Resuming:
    """A resume this TUI started."""

    wf_id: int
    process: subprocess.Popen[bytes]
    log: Path

    def ended(self) -> int | None:
        """The exit code once the process has ended; None while it runs."""
        return self.process.poll()

    def last_said(self) -> str:
        """What the resume said last, as one line: on a failure its `error:` and `fix:`
        (supervisor/cli/failure.py), which the log holds wrapped over several lines; the last
        line alone was only the fix, and the toast dropped the error. Else the last line."""
        try:
            with self.log.open("rb") as f:
                f.seek(max(0, self.log.stat().st_size - 8192))
                tail = f.read().decode(errors="replace")
        except OSError:
            return ""
        lines = [line.strip() for line in tail.splitlines() if line.strip()]
        starts = [i for i, line in enumerate(lines) if line.startswith(ENDINGS)]
        said = " ".join(lines[starts[-1] :]) if starts else (lines[-1] if lines else "")
        return said if len(said) <= SAID else said[: SAID - 1] + "…"


def log_path(state_dir: Path, wf_id: int) -> Path:
    return state_dir / f"resume-{wf_id}.log"


def start(repo: Path, state_dir: Path, wf_id: int) -> Resuming:
    import supervisor

    code = str(Path(supervisor.__file__).resolve().parent.parent)  # this code, not another copy
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([code, os.environ.get("PYTHONPATH", "")])}
    state_dir.mkdir(parents=True, exist_ok=True)
    log = log_path(state_dir, wf_id)
    try:
        fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600)
    except OSError as e:
        raise StateError(
            f"Cannot write the resume's log {log}: {e.strerror}.",
            f"Remove {log} (it must be a plain file), or run `supervisor resume {wf_id}` in "
            "a terminal.",
        ) from e
    try:
        process = subprocess.Popen(
            [sys.executable, "-P", "-m", "supervisor", "resume", str(wf_id), "--repo", str(repo)],
            stdin=subprocess.DEVNULL,
            stdout=fd,
            stderr=fd,
            start_new_session=True,
            cwd=repo,
            env=env,
        )
    finally:
        os.close(fd)
    return Resuming(wf_id, process, log)
