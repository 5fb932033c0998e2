"""The board: every workflow of every repository this person ran tasks in (the per-user registry,
supervisor/state/registry.py), or in team mode every task of the shared database.

Each repository keeps its `Monitor` (supervisor/views/monitor.py) between requests, as the TUI
does, so a refresh reads only what changed since the last one.
"""

from __future__ import annotations

import hashlib
import sqlite3
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from supervisor.core.errors import SupervisorError
from supervisor.views.monitor import Monitor, Row

if TYPE_CHECKING:
    from collections.abc import Iterable

NEEDS_YOU = ("awaiting_approval", "budget_exceeded")
"""Statuses that wait for a person's decision (once decided, `resume` has it)."""


@dataclass(frozen=True)
class Repository:
    key: str
    """What the dashboard's addresses name it by: never the path, which a URL would leak."""
    root: Path
    db: Path

    @property
    def name(self) -> str:
        return self.root.name or str(self.root)


def key_of(root: Path) -> str:
    return hashlib.sha256(str(root).encode()).hexdigest()[:12]


@dataclass(frozen=True)
class BoardRow:
    repo: Repository
    row: Row

    @property
    def needs_you(self) -> bool:
        shown = self.row.status
        return shown in NEEDS_YOU or (shown.startswith("running") and not self.row.supervised)

    def json(self) -> dict[str, object]:
        """The row as the page's script updates it (text only: it is set as textContent)."""
        wf = self.row.workflow
        return {
            "key": f"{self.repo.key}-{wf.id}",
            "repo": self.repo.name,
            "id": wf.id,
            "status": self.row.status,
            "step": self.row.step,
            "elapsed": self.row.elapsed,
            "tokens": self.row.tokens,
            "cost": f"${self.row.cost:.2f}",
            "task": wf.description[:300],
            "needs_you": self.needs_you,
        }


@dataclass
class Board:
    """The repositories shown and their monitors."""

    fixed: Iterable[Path] | None = None
    """Fixed roots (team mode: the server's own repository); None: the registry, re-read on
    every refresh so that a repository's first task appears without a restart."""
    extra: Iterable[Path] = ()
    """Roots shown beside the registry's (the repository `supervisor web` was started in)."""
    _monitors: dict[Path, Monitor] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def repositories(self) -> list[Repository]:
        if self.fixed is not None:
            roots = list(self.fixed)
        else:
            from supervisor.state.registry import repositories

            roots = [*self.extra, *repositories()]
        from supervisor.lifecycle.task_state import state_db

        unique = list(dict.fromkeys(root.resolve() for root in roots))
        return [Repository(key_of(root), root, state_db(root)) for root in unique]

    def repository(self, key: str) -> Repository | None:
        return next((r for r in self.repositories() if r.key == key), None)

    def rows(
        self, repo: str | None = None, status: str | None = None, needs_you: bool = False
    ) -> list[BoardRow]:
        """Every workflow, newest first, filtered by repository key, shown status and need."""
        found: list[BoardRow] = []
        with self._lock:
            for repository in self.repositories():
                if repo and repository.key != repo:
                    continue
                monitor = self._monitors.setdefault(repository.db, Monitor(repository.db))
                try:
                    rows = monitor.rows()
                except (SupervisorError, sqlite3.Error, OSError):
                    continue  # one unreadable repository must not hide the others
                found += [BoardRow(repository, row) for row in rows]
        if status:
            found = [r for r in found if r.row.status.startswith(status)]
        if needs_you:
            found = [r for r in found if r.needs_you]
        return sorted(found, key=lambda r: r.row.workflow.updated_at, reverse=True)
