"""Everything the workflow page shows, read once per request: the detail `status <id>` shows
(supervisor/views/detail.py, the depth verdict among it), each worker run's CLI, model, time and
cost, the latest events, the gates' results, the reviews, and the candidate's diff per file.

Reads only, as the TUI does: the state through the read-only reader (or the shared store), git
with hooks and drivers off on blobs, never a worktree's files.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from supervisor.lifecycle import task_state
from supervisor.lifecycle.diffs import changed_files, diff_text, head_of
from supervisor.state.reader import StateReader
from supervisor.views import detail as details
from supervisor.views.monitor import (
    Review,
    decision,
    latest_reviews,
    needs_you,
    status_shown,
)

if TYPE_CHECKING:
    from supervisor.state.records import Event
    from supervisor.state.store import Store
    from supervisor.web.board import Repository

SHOWN_EVENTS = 100
"""Events the page is first drawn with; the stream brings every later one."""
OUTPUT_TAIL = 4_000
"""Characters of a gate's output shown (the record keeps up to that)."""


@dataclass(frozen=True)
class Run:
    step: str
    role: str
    cli: str
    model: str
    seconds: float
    tokens: int
    cost: float
    success: bool


@dataclass(frozen=True)
class GateResult:
    step: str
    status: str
    command: str
    exit_code: str
    output: str


@dataclass(frozen=True)
class FileDiff:
    path: str
    added: str
    deleted: str
    text: str


@dataclass
class WorkflowPage:
    repo: Repository
    shown: details.Detail
    status: str
    runs: list[Run]
    events: list[Event]
    gates: list[GateResult]
    reviews: list[Review]
    files: list[FileDiff]
    about: list[str] = field(default_factory=list)
    """What a waiting approval is about (supervisor.policy.approvals.pending)."""
    decided: str | None = None
    blocked: list[str] = field(default_factory=list)
    pull_request: dict[str, Any] | None = None
    """The task's latest `pull_request` event's payload: the page offers a sync with it."""

    @property
    def last_event(self) -> int:
        return self.events[-1].id if self.events else 0

    @property
    def decidable(self) -> bool:
        """Whether the approval panel offers a decision (one not yet made)."""
        return self.status in ("awaiting_approval", "budget_exceeded") and self.decided is None


def workflow_page(repo: Repository, wf_id: int) -> WorkflowPage:
    with task_state.reading(repo.root) as state:
        wf = state.workflow(wf_id)
        pids = task_state.supervisors(repo.root, [wf])
        waiting = wf.status in ("awaiting_approval", "budget_exceeded")
        about: list[str] | None = None
        if waiting:
            from supervisor.policy.approvals import pending

            about = pending(wf, repo.root)
        shown = details.workflow_detail(state, wf_id, about, pids)
        approval = state.latest_approval(wf_id)
        decided = decision(wf, approval)  # on the approval it waits for; a budget has none
        recent = _recent(state, wf_id)
        judged = _of_types(state, wf_id, ("gate", "review"))
        opened = _of_types(state, wf_id, ("pull_request",))
        runs = _runs(state, wf_id)
    supervised = pids.get(wf.id, 0) is not None
    head = head_of(wf)
    diff = diff_text(repo.root, wf.base_sha, head)
    return WorkflowPage(
        repo,
        shown,
        status_shown(wf, decided, supervised),
        runs,
        recent,
        [_gate(e) for e in judged if e.type == "gate"],
        latest_reviews([e for e in judged if e.type == "review"]),
        _per_file(changed_files(repo.root, wf.base_sha, head), diff),
        about or [],
        decided,
        needs_you(wf.context),
        dict(opened[-1].payload) if opened else None,
    )


def _recent(state: StateReader | Store, wf_id: int) -> list[Event]:
    if isinstance(state, StateReader):
        row = state.conn.execute(
            "SELECT id FROM events WHERE workflow_id = ? ORDER BY id DESC LIMIT 1 OFFSET ?",
            (wf_id, SHOWN_EVENTS - 1),
        ).fetchone()
        return state.events(wf_id, after_id=row[0] - 1 if row else 0)
    return state.events(wf_id)[-SHOWN_EVENTS:]


def _of_types(state: StateReader | Store, wf_id: int, types: tuple[str, ...]) -> list[Event]:
    if isinstance(state, StateReader):
        from supervisor.state.records import Event

        marks = ",".join("?" * len(types))
        rows = state._rows(
            f"SELECT * FROM events WHERE workflow_id = ? AND type IN ({marks}) ORDER BY id",
            wf_id,
            *types,
        )
        return [Event(**r) for r in rows]
    return [e for kind in types for e in state.events(wf_id, of_type=kind)]


def _runs(state: StateReader | Store, wf_id: int) -> list[Run]:
    if isinstance(state, StateReader):
        try:
            rows = state._rows("SELECT * FROM invocations WHERE workflow_id = ? ORDER BY id", wf_id)
        except sqlite3.Error:
            rows = []
    else:
        rows = [r for r in state.invocations() if r.get("workflow_id") == wf_id]
    return [
        Run(
            str(r.get("step") or ""),
            str(r.get("role") or ""),
            str(r.get("cli") or ""),
            str(r.get("model") or ""),
            float(r.get("duration_s") or 0.0),
            int(r.get("input_tokens") or 0) + int(r.get("output_tokens") or 0),
            float(r.get("cost_usd") or 0.0),
            bool(r.get("success")),
        )
        for r in rows
    ]


def _gate(e: Event) -> GateResult:
    payload = e.payload if isinstance(e.payload, dict) else {}
    output = str(payload.get("output_tail") or payload.get("output") or payload.get("error") or "")
    return GateResult(
        e.step or "?",
        e.status or "?",
        str(payload.get("command") or ""),
        str(payload.get("exit_code", "")),
        output[-OUTPUT_TAIL:],
    )


def _per_file(files: list[tuple[str, str, str]], diff: str) -> list[FileDiff]:
    """The diff cut at each file's `diff --git` line, matched to `--numstat`'s files in order
    (both list the same files, in the same order)."""
    parts = [p for p in diff.split("\ndiff --git ") if p.strip()]
    parts = [parts[0], *("diff --git " + p for p in parts[1:])] if parts else []
    found = []
    for index, (added, deleted, path) in enumerate(files):
        text = parts[index] if index < len(parts) else ""
        found.append(FileDiff(path, added, deleted, text))
    return found


@dataclass
class Node:
    """One line of the work tree: feature, project, phase, component, sub-component."""

    kind: str
    name: str
    status: str
    note: str = ""
    children: list[Node] = field(default_factory=list)


def work_tree(page: WorkflowPage) -> Node | None:
    """Feature → (project →) phase → component, as the terminal's tree draws it
    (supervisor/views/render.py `work_tree`)."""
    from supervisor.core.dag import rollup

    work = page.shown.work
    if work is None:
        return None
    feature = Node("feature", page.shown.workflow.description[:200], work.feature_status())
    verdicts = page.shown.verdicts()
    projects: list[str | None] = list(work.projects()) or [None]
    for project in projects:
        parent = feature
        if project is not None:
            parent = Node(
                "project", project, work.project_status(project), verdicts.get(project, "")
            )
            feature.children.append(parent)
        for phase in work.phases:
            comps = work.in_phase(phase, project)
            if project is not None and not comps:
                continue
            status = rollup([c.status for c in comps]) if project else work.phase_status(phase)
            branch = Node("phase", phase, status)
            parent.children.append(branch)
            placed: dict[str, Node] = {}
            for comp in comps:
                kind = "sub-component" if comp.parent is not None else "component"
                node = Node(kind, comp.id, comp.status, ", ".join(comp.files)[:300])
                placed.get(comp.parent or "", branch).children.append(node)
                placed[comp.id] = node
    return feature
