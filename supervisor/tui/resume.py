"""`r` in the TUI: start `supervisor resume <id>` for the person, detached, and say when it ends.

The resume runs as its own process in its own session (supervisor/lifecycle/detached.py, which the
MCP server's `resume_task` uses too): Ctrl-C or quitting the TUI does not stop it, as a second
terminal would not, and the TUI shows its progress the way it shows any task's, from the state
database. Its output goes to `.supervisor/resume-<id>.log`, which the TUI names when the process
ends.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from supervisor.lifecycle.detached import ENDINGS, SAID, launch, log_path
from supervisor.lifecycle.detached import Detached as Resuming

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["ENDINGS", "SAID", "Resuming", "log_path", "start"]


def start(repo: Path, state_dir: Path, wf_id: int) -> Resuming:
    return launch(repo, state_dir, wf_id)
