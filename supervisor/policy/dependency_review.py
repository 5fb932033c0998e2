"""Dependency changes by a worker wait for a person before they get a network.

Building the project image installs packages with network access (it is the one build step that
has it), and a package's install hooks run whatever its author chose. When the dependency files
of a candidate differ from those the task started with, the worker chose what gets installed, so
the rebuild waits: the workflow stops in `awaiting_approval` with the dependency diff in its
events and in `supervisor status`, and nothing is built until `supervisor approve`. A rejection
sends the change back to the step that made it, with the reason as feedback. A project that
trusts its workers' dependency edits sets `sandbox: {dependency_changes: allow}`.
"""

from __future__ import annotations

import difflib
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from supervisor.core.errors import ApprovalRequired, SandboxError
from supervisor.guard import protected
from supervisor.policy.approvals import REQUEST_KEY, pending_request  # noqa: F401 (re-exported)
from supervisor.state.store import EventSpec, StepRecord

if TYPE_CHECKING:
    from supervisor.gates.asking import Asking
    from supervisor.project.project_image import ProjectImage
    from supervisor.state.store import Store, Workflow

MAX_DIFF = 20_000
_LOCK = threading.Lock()  # parallel reviewers may reach the same rebuild at once


@dataclass
class DependencyWait:
    """The wait `await_approval` decided on, for the engine to commit (it alone writes workflow
    progress): the workflow awaits approval at `waiting`, a rejection goes to `producer`, and
    the runs of step `name` that asked for the image close as waiting."""

    wf_id: int
    name: str
    producer: str
    waiting: str
    request: dict[str, Any]
    event: EventSpec

    def records(self, store: Store) -> list[StepRecord]:
        """The runs of the step that asked for the image, closed as waiting (they run again
        after the decision); read when the engine commits, once every parallel run stopped."""
        return [
            StepRecord(row["id"], "waiting", error="waits for approval of a dependency change")
            for row in store.steps(self.wf_id)
            if row["status"] == "running" and row["name"] == self.name
        ]


class DependencyApprovalRequired(ApprovalRequired):
    """A worker changed the dependency files; the rebuild waits for a person. `wait` is what
    the engine records before the error reaches the user."""

    def __init__(self, message: str, hint: str, wait: DependencyWait) -> None:
        super().__init__(message, hint)
        self.wait = wait


def await_approval(
    engine: Asking, wf: Workflow, name: str, source: object, wanted: ProjectImage
) -> None:
    """Return when the image for the candidate's dependency files (`wanted`, read as blobs;
    `source` is the worktree or commit it was computed from) may be built; otherwise remove
    this step's worktree and raise DependencyApprovalRequired with the wait, which the engine
    records (Engine._await_dependencies)."""
    before = base_dependencies(engine.ws.git_dir, wf.base_sha)
    after = {f: wanted.contents.get(f, b"").decode(errors="replace") for f in wanted.files}
    if before == after:
        return  # the dependencies the user's own commit named
    if protected.pinned(wf.context, engine.settings).dependency_changes == "allow":
        return
    request = wf.context.get(REQUEST_KEY) or {}
    approval = engine.store.latest_approval(wf.id)
    if (
        request.get("hash") == wanted.content_hash
        and approval is not None
        and approval.status == "approved"
        and approval.step == request.get("producer")
    ):
        return
    changed = sorted(f for f in set(before) | set(after) if before.get(f) != after.get(f))
    diff = dependency_diff(before, after)
    with _LOCK:
        current = engine.store.workflow(wf.id)
        # The workflow-level step (a component's gate runs inside its fan-out step), and where a
        # rejection goes: both must be steps of the definition.
        waiting = current.current_step or name
        producer = _producer(engine, wf.id)
        if producer is None or producer not in current.definition.get("steps", {}):
            producer = waiting
        wait = DependencyWait(
            wf.id,
            name,
            producer,
            waiting,
            {
                "hash": wanted.content_hash,
                "files": changed,
                "step": waiting,
                "producer": producer,
                "diff": diff,
            },
            EventSpec(
                "dependency_approval_requested",
                step=name,
                status="pending",
                payload={
                    "files": changed,
                    "changed_by": producer,
                    "image": wanted.tag,
                    "diff": diff,
                },
            ),
        )
        _remove_worktrees(engine, wf.id, name)
    engine.reporter.info(f"dependency change by '{producer}' waits for approval:\n{diff}")
    raise DependencyApprovalRequired(
        f"Workflow {wf.id} waits for approval of a dependency change by step '{producer}' "
        f"({', '.join(changed)}): building it installs packages with network access, so nothing "
        "is built before a person has read the diff.",
        f"Read the diff (`supervisor status {wf.id}`), then `supervisor approve {wf.id}` to build "
        f"it, or `supervisor reject {wf.id} --reason \"...\"` to send it back to '{producer}'; "
        f"then `supervisor resume {wf.id}`.",
        wait,
    )


def base_dependencies(git_dir: Path, commit: str) -> dict[str, str]:
    """The dependency files of `commit`, read as git blobs: the same set the image is built
    from (a workspace's members' manifests too), so an unchanged member is no change."""
    from supervisor.project.project_image import dependency_files
    from supervisor.workspace.treedata import CommitFiles

    try:
        found = dependency_files(CommitFiles(git_dir, commit))
    except SandboxError:  # a linked dependency file in the base: every file of the candidate
        return {}  # is then shown as new
    return {name: data.decode(errors="replace") for name, data in found.items()}


def dependency_diff(before: dict[str, str], after: dict[str, str]) -> str:
    lines: list[str] = []
    for name in sorted(set(before) | set(after)):
        old, new = before.get(name), after.get(name)
        if old == new:
            continue
        lines += difflib.unified_diff(
            (old or "").splitlines(keepends=True),
            (new or "").splitlines(keepends=True),
            fromfile=f"a/{name}" if old is not None else "/dev/null",
            tofile=f"b/{name}" if new is not None else "/dev/null",
        )
    text = "".join(line if line.endswith("\n") else line + "\n" for line in lines)
    if len(text) > MAX_DIFF:
        text = text[:MAX_DIFF] + "\n[... diff truncated ...]\n"
    return text


def _producer(engine: Asking, wf_id: int) -> str | None:
    """The step whose implementation made the current candidate: where a rejection goes."""
    done = [
        e
        for e in engine.store.events(wf_id)
        if e.type == "implementation" and e.status == "succeeded"
    ]
    return done[-1].step if done else None


def _remove_worktrees(engine: Asking, wf_id: int, name: str) -> None:
    """The step that asked for the image stops here: its worktree goes (the engine closes its
    running row as waiting, `DependencyWait.records`; it runs again after the decision)."""
    for row in engine.store.steps(wf_id):
        if row["status"] == "running" and row["name"] == name and row["worktree"]:
            engine.ws.remove_worktree(Path(row["worktree"]))
