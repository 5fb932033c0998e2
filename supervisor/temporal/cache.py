"""What a `supervisor worker` keeps between its activities: the repository's settings and
notifier, read once per configuration instead of once per step.

Reading the configuration (four YAML layers, validated) is most of what one step costs beyond
the step itself; the embedded runner reads it once per task. The cache is keyed by the repository
and a fingerprint of every layer file (path, size, modification time), so an edited config is
read again on the next step, as a new `supervisor resume` would. Only immutable values are kept:
each step still gets its own Workspace (it holds that step's overlay views) and its own sandbox.
"""

from __future__ import annotations

import threading
from pathlib import Path

from supervisor.core import trustmap
from supervisor.core.config import Settings, load_settings, user_dir
from supervisor.core.resources import CONFIG_DIR
from supervisor.lifecycle.opening import Project
from supervisor.policy import notify
from supervisor.workspace.worktrees import Workspace, locate

Fingerprint = tuple[tuple[str, int, int], ...]


def fingerprint(root: Path) -> Fingerprint:
    """Each configuration layer's path, size and modification time (-1 when absent)."""
    files = [
        CONFIG_DIR / "defaults.yaml",
        CONFIG_DIR / "limits.yaml",
        user_dir() / "config.yaml",
        trustmap.repo_path(root, trustmap.CONFIG, trustmap.NEEDS_TRUST),
        user_dir() / "trusted.json",  # trusting a setting changes the settings too
    ]
    marks = []
    for path in files:
        try:
            stat = path.stat()
            marks.append((str(path), stat.st_size, stat.st_mtime_ns))
        except OSError:
            marks.append((str(path), -1, -1))
    return tuple(marks)


class ProjectCache:
    """Settings and notifier per (repository, configuration fingerprint); thread-safe, since
    a worker runs up to --max-parallel steps at once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._roots: dict[Path, tuple[Path, Path]] = {}  # path -> (root, git dir): host_git.locate
        self._opened: dict[Path, tuple[Fingerprint, Settings, notify.Notifier]] = {}

    def settings(self, path: Path) -> tuple[Path, Settings, notify.Notifier]:
        """The repository's root, settings and notifier, without a Workspace: what a check that
        reads only the settings needs."""
        root = self._located(path)[0]
        marks = fingerprint(root)
        with self._lock:
            kept = self._opened.get(root)
        if kept is None or kept[0] != marks:
            settings = load_settings(root)
            kept = (marks, settings, notify.Notifier.from_config(root, settings))
            with self._lock:
                self._opened[root] = kept
        return root, kept[1], kept[2]

    def open(self, path: Path) -> tuple[Project, notify.Notifier]:
        root, settings, notifier = self.settings(path)
        return Project(root, settings, Workspace(root, self._located(path)[1])), notifier

    def _located(self, path: Path) -> tuple[Path, Path]:
        """The repository's root and git dir, found once per path (one git call)."""
        with self._lock:
            found = self._roots.get(path)
        if found is None:
            found = locate(path)
            with self._lock:
                self._roots[path] = found
        return found

    def clear(self) -> None:
        with self._lock:
            self._roots.clear()
            self._opened.clear()
