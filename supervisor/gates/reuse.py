"""A gate's result reused instead of run again on the same tree (issue 30, item 5).

A gate's verdict depends on what it ran (the command pinned at task start), what it ran on (the
candidate's git tree), where (the image's id: a rebuilt image may judge differently) and which
test files were pinned (they decide what the suite must still hold). With all four the same, a
second run can only repeat the first: in the enterprise template `pnpm test` ran three times on
one commit because the test engineer changed nothing. So each run is remembered in the task's
state (`gate_runs` in the workflow's context, written by the engine with the step's outcome,
never in a worktree a worker could write), and a later gate step with the same key takes the
stored result and records a `gate_reused` event (its test count is still judged against the
task's current floor). Only passing runs are remembered: a failure may be the machine's (a flaky
test, a full disk) and runs again when asked, and a worker that changes nothing after a failure
is already caught as a no-op; a run that timed out or could not start has no result at all.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from supervisor.gates.run import GateResult

if TYPE_CHECKING:
    from supervisor.sandbox.base import Sandbox

KEPT = 8
"""Runs remembered per task, the newest: the gates of the last few candidates."""
OUTPUT_KEPT = 32_000
"""A run whose output is longer is not remembered: the test count reads every runner summary
in the whole output, so a shortened one could judge differently, and the state stays small."""


@dataclass(frozen=True)
class GateRun:
    """One gate run as the task's state remembers it."""

    key: str
    gate: str
    command: str
    tree: str
    commit: str
    image: str
    exit_code: int
    output: str
    duration: float

    @classmethod
    def of(
        cls, key: str, gate: str, tree: str, commit: str, image: str, result: GateResult
    ) -> GateRun:
        """A fresh run's result, as the task's state remembers it."""
        return cls(
            key=key,
            gate=gate,
            command=result.command,
            tree=tree,
            commit=commit,
            image=image,
            exit_code=result.exit_code,
            output=result.output,
            duration=result.duration,
        )

    def result(self, name: str) -> GateResult:
        return GateResult(
            name=name,
            command=self.command,
            passed=self.exit_code == 0,
            exit_code=self.exit_code,
            output=self.output,
            duration=self.duration,
        )


def key_of(tree: str, command: str, image: str, pins: dict[str, Any], directory: str = "") -> str:
    """The identity of a run: tree, command, image id, pinned test files and, for a project of
    a monorepo, the project's directory it ran in (the same `pnpm test` elsewhere is another
    run)."""
    material = json.dumps(
        [tree, command, image, pins, *([directory] if directory else [])], sort_keys=True
    )
    return hashlib.sha256(material.encode()).hexdigest()


def image_id(sandbox: Sandbox, image: str | None) -> str:
    """The id of the image a gate runs in (a tag can be moved to another image)."""
    if image is None:
        return sandbox.base_image_id()
    if sandbox.client is None:
        return image
    return str(sandbox.client.images.get(image).id)


def find(context: dict[str, Any], key: str) -> GateRun | None:
    for stored in reversed(context.get("gate_runs") or []):
        if stored.get("key") == key:
            return GateRun(**stored)
    return None


def remembered(context: dict[str, Any], run: GateRun) -> list[dict[str, Any]]:
    """The task's runs with `run` added (a new list, for an Outcome's context)."""
    kept = [r for r in context.get("gate_runs") or [] if r.get("key") != run.key]
    if run.exit_code != 0 or len(run.output) > OUTPUT_KEPT:
        return kept
    return [*kept, asdict(run)][-KEPT:]
