"""Context packs gathered ahead, while the step before runs (issue 30: pipelined steps).

Why: reading, redacting, counting and packing a role's context with Repomix was most of a
step's own set-up (0.05-0.2 s on the 2-core host) and sat between one step's end and the next
CLI's first request. None of it depends on how the running step ends when the next step starts
from the same commit (supervisor/workflow/lookahead.py), so the preparation gathers it then
(supervisor/workflow/steps/prepare.py) and the next step fits it to its budget.

A gathered pack is used only for exactly the inputs it was made from, compared in full, not
trusted: the commit's files (every path with its blob, as listed by git), the role's context
settings and its strategy's content, the targets in order, the diff. The prompt around the pack
is not among them: what the prompt leaves of the budget is applied by the step itself
(`assemble.fit`), so a fix-up whose feedback is not known yet still uses what was gathered. A
monorepo component's scoped pack is not made ahead (its scope is the plan's, read by the
fan-out), nor is a pack of a directory (a preview of the user's checkout, which may change).
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from concurrent.futures import Future
from dataclasses import dataclass
from typing import TYPE_CHECKING

from supervisor.workspace.treedata import CommitFiles

if TYPE_CHECKING:
    from collections.abc import Callable

    from supervisor.context.assemble import Gathered, Source, Strategy
    from supervisor.context.project_scope import ProjectScope
    from supervisor.context.roles import Role

KEEP = 8
"""Gathered packs kept per engine run: the next step's few candidates, and a retry's."""


@dataclass(frozen=True)
class Key:
    """Everything a gathered pack follows from."""

    files: str
    """The commit's tree: every path, mode and blob (the commit may be named any way)."""
    role: str
    """The role's output kind and context settings."""
    strategy: str
    targets: tuple[str, ...]
    diff: str


def key(
    source: Source,
    role: Role,
    strategy: Strategy,
    targets: list[str],
    diff: str,
    scope: ProjectScope | None,
) -> Key | None:
    """The key of these inputs; None for inputs never gathered ahead (module docstring)."""
    if scope is not None or not isinstance(source, CommitFiles):
        return None
    tree = [(p, e.mode, e.sha) for p in source.files() if (e := source.entry(p)) is not None]
    return Key(
        files=_digest(tree),
        role=_digest([role.output, role.context.model_dump(mode="json")]),
        strategy=_digest(strategy.model_dump(mode="json")),
        targets=tuple(targets),
        diff=hashlib.sha256(diff.encode()).hexdigest(),
    )


def _digest(value: object) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()


class Ahead:
    """Gathered packs by key, made in the preparation's thread and taken by the step's.
    Thread-safe; a pack still being made is waited for (it is further along than a new one)."""

    def __init__(self, keep: int = KEEP) -> None:
        self.keep = keep
        self._lock = threading.Lock()
        self._made: OrderedDict[Key, Future[Gathered | None]] = OrderedDict()
        self.hits = 0

    def gather(
        self, source: Source, role: Role, strategy: Strategy, targets: list[str], diff: str
    ) -> bool:
        """Gather and keep the pack of these inputs (in the calling thread); False when they
        are never gathered ahead, or already are."""
        return self.gather_all(source, role, strategy, [targets], diff) > 0

    def gather_all(
        self,
        source: Source,
        role: Role,
        strategy: Strategy,
        targets: list[list[str]],
        diff: str,
        promised: Callable[[], None] | None = None,
    ) -> int:
        """Gather the packs of several targets in order, each promised before the first is
        made (`promised()` is told then): a step that asks for a later one meanwhile waits for
        it rather than making its own beside it. How many were new."""
        from supervisor.context import assemble

        made_here: list[tuple[list[str], Future[Gathered | None]]] = []
        with self._lock:
            for each in targets:
                found = key(source, role, strategy, each, diff, None)
                if found is None or found in self._made:
                    continue
                future: Future[Gathered | None] = Future()
                self._made[found] = future
                made_here.append((each, future))
            while len(self._made) > self.keep:
                self._made.popitem(last=False)
        if promised is not None:
            promised()
        try:
            for each, future in made_here:
                try:
                    made = assemble.gather(source, role, strategy, each, diff, None, whole=True)
                except Exception:  # gathered again by the step, which then says what is wrong
                    made = None
                future.set_result(made)
        finally:  # never a promise left that a step would wait for in vain
            for _, future in made_here:
                if not future.done():
                    future.set_result(None)
        return len(made_here)

    def take(
        self,
        source: Source,
        role: Role,
        strategy: Strategy,
        targets: list[str],
        diff: str,
        scope: ProjectScope | None,
    ) -> Gathered | None:
        """What was gathered from exactly these inputs, or None."""
        found = key(source, role, strategy, targets, diff, scope)
        if found is None:
            return None
        with self._lock:
            future = self._made.get(found)
        made = future.result() if future is not None else None
        if made is not None:
            self.hits += 1
        return made

    def clear(self) -> None:
        with self._lock:
            self._made.clear()
