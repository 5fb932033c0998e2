"""Every external program on the host (git, repomix, ...) runs through here.

One runner means one place that turns ENOENT, non-zero exits and time-outs into typed errors with a
fix, and one place that closes stdin (several tools wait for EOF on an open pipe).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from supervisor.core.errors import CommandTimeoutError, ToolFailedError, ToolMissingError

INSTALL_HINTS = {
    "git": "Install git (Debian: apt-get install git).",
    "repomix": "Run `supervisor setup` (or scripts/setup.sh): it installs the pinned Repomix.",
    "docker": "Install Docker, or run `supervisor setup` (or scripts/setup.sh): it starts one.",
}


@dataclass(frozen=True)
class Completed:
    args: list[str]
    returncode: int
    stdout: str
    stderr: str


def find_program(name: str, extra_dirs: list[Path] | None = None) -> str:
    """Locate a program on PATH or in `extra_dirs` (e.g. the project's node_modules/.bin)."""
    for directory in extra_dirs or []:
        candidate = directory / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    found = shutil.which(name)
    if found is None:
        raise ToolMissingError(
            f"'{name}' is not installed or not on PATH.",
            INSTALL_HINTS.get(name, f"Install {name} and make sure it is on PATH."),
        )
    return found


def run(
    args: list[str],
    *,
    cwd: Path | str | None = None,
    input_text: str | None = None,
    timeout: float | None = 120,
    check: bool = True,
    env: dict[str, str] | None = None,
) -> Completed:
    """Run a program to completion and capture its output as text."""
    program = args[0]
    try:
        proc = subprocess.run(
            args,
            cwd=cwd,
            input=input_text,
            stdin=None if input_text is not None else subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
            check=False,
        )
    except FileNotFoundError as e:
        name = Path(program).name
        raise ToolMissingError(
            f"'{name}' is not installed or not on PATH.",
            INSTALL_HINTS.get(name, f"Install {name} and make sure it is on PATH."),
        ) from e
    except subprocess.TimeoutExpired as e:
        raise CommandTimeoutError(
            f"'{' '.join(args[:3])}' did not finish within {timeout:.0f} s.",
            "Check that the program is not waiting for input, or raise its time limit.",
        ) from e
    result = Completed(list(args), proc.returncode, proc.stdout, proc.stderr)
    if check and proc.returncode != 0:
        detail = (proc.stderr or proc.stdout).strip()
        raise ToolFailedError(
            f"'{' '.join(args[:4])}' failed with exit code {proc.returncode}: {detail[-2000:]}",
            returncode=proc.returncode,
            output=proc.stdout + proc.stderr,
        )
    return result
