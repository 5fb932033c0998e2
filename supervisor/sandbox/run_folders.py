"""The host folders a run gets (its prompt, schema and login files; the proxy's record): their
names say which repository and task own them, so a crashed run's are found and removed by the
next start of the same repository, never another's.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from supervisor.sandbox.labels import LABEL_PROBE, LABEL_REPO, LABEL_WORKFLOW, RUN_PREFIX


def run_dir_label(labels: dict[str, str]) -> str:
    """What a run folder's name says about its owner: the repository, and the task if any."""
    label = labels.get(LABEL_REPO, "none")
    if LABEL_WORKFLOW in labels:
        return f"{label}-wf{labels[LABEL_WORKFLOW]}"
    return f"{label}-probe{labels[LABEL_PROBE]}" if LABEL_PROBE in labels else label


def record_dir_path(run_label: str, step_id: int) -> Path:
    """Where the credential proxy records a step's run (workflow/steps/witnessing.py): one name
    per step, outside every folder a container sees."""
    return Path(tempfile.gettempdir()) / f"{run_label}-record{step_id}"


def probe_run_dir_owners(repo: str) -> set[str]:
    """The owners named by this repository's probe run folders ("<prefix><repo>-probe<owner>-
    <random>"): a supervisor killed after making the folder but before its container leaves a
    folder no container points to."""
    prefix = f"{RUN_PREFIX}{repo}-probe"
    found = Path(tempfile.gettempdir()).glob(f"{prefix}*")
    return {p.name.removeprefix(prefix).rpartition("-")[0] for p in found if p.is_dir()}


def remove_stale_run_dirs(label: str, keep: set[Path] | None = None) -> list[Path]:
    """Run folders (prompt, schema, login files) a crashed run of this repository left behind."""
    found = sorted(Path(tempfile.gettempdir()).glob(f"{RUN_PREFIX}{label}-*"))
    found = [p for p in found if p not in (keep or set())]
    for path in found:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
    return found
