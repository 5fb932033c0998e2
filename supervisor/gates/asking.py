"""What a check reads of the step that asks for it: a gate run, and the policies (risk, the
dependency review) that the commit and image steps consult.

Both wings sit below the workflow: they name what they read of the step's context as this
Protocol, which the engine's StepContext satisfies, instead of importing the workflow's own type.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from pathlib import Path

    from supervisor.core.config import Settings
    from supervisor.sandbox.base import Sandbox
    from supervisor.state.store import Store
    from supervisor.workspace.worktrees import Workspace


class Shows(Protocol):
    def step(self, wf_id: int, name: str, detail: str) -> None: ...
    def output(self, text: str) -> None: ...
    def info(self, text: str) -> None: ...


class Asking(Protocol):
    """The step asking: its repository, settings, state, git, sandbox and reporter."""

    @property
    def repo(self) -> Path: ...
    @property
    def settings(self) -> Settings: ...
    @property
    def store(self) -> Store: ...
    @property
    def ws(self) -> Workspace: ...
    @property
    def sandbox(self) -> Sandbox: ...
    @property
    def reporter(self) -> Shows: ...
    def labels(self, wf_id: int, step: str) -> dict[str, str]: ...
