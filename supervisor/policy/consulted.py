"""What a policy reads of the step that consults it.

The risk assessment and the dependency review are asked by a step (the engine's StepContext),
but policy sits below the workflow: it names the few things it reads as a Protocol, and the
step's context satisfies it without policy importing the workflow.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from pathlib import Path

    from supervisor.core.config import Settings
    from supervisor.state.store import Store
    from supervisor.workspace.worktrees import Workspace


class Informs(Protocol):
    def info(self, text: str) -> None: ...


class Consulting(Protocol):
    """The step asking: its repository, settings, state, git, and where to tell a person."""

    @property
    def repo(self) -> Path: ...
    @property
    def settings(self) -> Settings: ...
    @property
    def store(self) -> Store: ...
    @property
    def ws(self) -> Workspace: ...
    @property
    def reporter(self) -> Informs: ...
