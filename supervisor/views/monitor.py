"""What the TUI and the web dashboard show of a repository's tasks, read from the state database
and git, without Textual or a web stack.

A face must never block a running task, so it only reads: the database through the read-only
sqlite3 reader (supervisor.state.reader), git with hooks and external diff/textconv drivers off and
the candidate read as data (blobs through `git diff`), never a worktree's files. Refreshing is
incremental: usage totals are summed once, then only events newer than the last one seen are
added, so a refresh costs the same with 100 events as with 100,000.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from supervisor.core.errors import SupervisorError
from supervisor.lifecycle.diffs import changed_files, diff_text, head_of
from supervisor.state.reader import StateReader

if TYPE_CHECKING:
    from pathlib import Path

    from supervisor.state.records import Approval, Event, Workflow
    from supervisor.state.store import Store

WAITING = ("awaiting_approval", "rate_limited")
DECIDED = ("approved", "rejected")


@dataclass
class Row:
    """One line of the workflow list."""

    workflow: Workflow
    step: str
    elapsed: str
    tokens: int
    cost: float
    decided: str | None = None  # a decision recorded on the waiting approval, not yet applied
    supervised: bool = True  # False: `running`, and no supervisor holds its task lock

    @property
    def status(self) -> str:
        return status_shown(self.workflow, self.decided, self.supervised)


def status_shown(wf: Workflow, decided: str | None, supervised: bool = True) -> str:
    """What the list says a workflow stands at. A decision (`approve`, `reject`, the TUI's
    buttons) only records itself on the pending approval; the workflow stays
    `awaiting_approval` until `resume` applies it (supervisor.lifecycle.task_state.decide,
    supervisor.workflow.resuming). Saying `awaiting_approval` and offering [A]pprove again
    after the person approved was wrong, so the list says what was decided. A `running` task
    whose supervisor died says so in `status`'s words (supervisor.state.status_label): the TUI once
    showed it `running`, its clock ticking, while `status` said no supervisor ran it."""
    if wf.status == "awaiting_approval" and decided in DECIDED:
        return decided
    if wf.status == "running" and not supervised:
        from supervisor.state.status_label import shown_status

        return shown_status(wf, supervised=False, degraded=False)
    return wf.status


def live(state_dir: Path, found: list[Workflow]) -> dict[int, bool]:
    """Whether a supervisor runs each `running` workflow, read where `status` reads it (the task
    locks, and across hosts the shared database's leases:
    supervisor.lifecycle.task_state.supervisors)."""
    from supervisor.lifecycle.task_state import supervisors_in

    return {wf_id: pid is not None for wf_id, pid in supervisors_in(state_dir, found).items()}


def resumable(status: str) -> bool:
    """Whether `supervisor resume` has something to do: not a finished task, nor one that still
    waits for a person's decision (the core refuses both, and says so)."""
    return status not in ("completed", "awaiting_approval")


@dataclass
class Usage:
    tokens: int = 0
    cost: float = 0.0


def elapsed(wf: Workflow, now: datetime | None = None, supervised: bool = True) -> str:
    """Time since the task started; a finished or abandoned one stops at its last update, and so
    does an interrupted one or a `running` one that no supervisor runs any more (nothing happens
    to it until a resume)."""
    stopped = wf.status in ("completed", "failed", "abandoned", "interrupted") or (
        wf.status == "running" and not supervised
    )
    end = wf.updated_at if stopped else None
    stop = end or (now or datetime.now(UTC).replace(tzinfo=None))  # the state's times: naive UTC
    seconds = max(0, int((stop - wf.created_at).total_seconds()))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


def step_shown(wf: Workflow) -> str:
    from supervisor.core.degradation import worst

    level = worst(wf.context)
    mark = f" [degraded: {level}]" if level else ""
    if wf.status == "awaiting_approval" and wf.context.get("approval_step"):
        return f"{wf.context['approval_step']} (approval){mark}"
    return (wf.current_step or "-") + mark


@dataclass
class Monitor:
    """The state database of one repository, read again on every refresh."""

    db: Path
    usage: dict[int, Usage] = field(default_factory=dict)
    last_event: int = 0
    changed: set[int | None] = field(default_factory=set)  # workflows with new events
    stamps: dict[int, str] = field(default_factory=dict)  # updated_at as stored, per workflow
    known: dict[int, Workflow] = field(default_factory=dict)
    decided: dict[int, str] = field(default_factory=dict)  # latest approval's status, if decided
    supervised: dict[int, bool] = field(default_factory=dict)  # per running workflow

    def _reader(self) -> StateReader | None:
        reader = StateReader.open(self.db)
        if reader is None and self.db.is_file():
            # An older schema: let the store migrate it once (what `status` would do).
            from supervisor.state.store import Store

            Store(self.db).close()
            reader = StateReader.open(self.db)
        return reader

    def rows(self) -> list[Row]:
        shared = _shared(self.db)
        if shared is not None:  # PostgreSQL: every workflow and its totals, read again
            with shared as store:
                found = store.workflows()
                self.decided = {}
                for wf in found:
                    totals = store.usage_totals(wf.id)
                    tokens = int(totals["input_tokens"]) + int(totals["output_tokens"])
                    self.usage[wf.id] = Usage(tokens, float(totals["cost_usd"]))
                    approval = store.latest_approval(wf.id) if _waits(wf) else None
                    if approval is not None and approval.status in DECIDED:
                        self.decided[wf.id] = approval.status
            self.changed = {wf.id for wf in found}
            self.supervised = live(self.db.parent, found)
            return self._rows(found)
        reader = self._reader()
        if reader is None:
            return []
        with reader:
            found = self._workflows(reader)
            self._add_usage(reader.conn)
            self._decisions(reader.conn, [wf.id for wf in found if _waits(wf)])
        self.supervised = live(self.db.parent, found)
        return self._rows(found)

    def _decisions(self, conn: sqlite3.Connection, waiting: list[int]) -> None:
        """The latest approval of each waiting workflow, when a person has decided it."""
        self.decided = {}
        for start in range(0, len(waiting), 500):
            chunk = waiting[start : start + 500]
            marks = ",".join("?" * len(chunk))
            for wf_id, status in conn.execute(
                "SELECT workflow_id, status FROM approvals WHERE id IN (SELECT max(id) FROM "
                f"approvals WHERE workflow_id IN ({marks}) GROUP BY workflow_id)",
                chunk,
            ):
                if status in DECIDED:
                    self.decided[int(wf_id)] = str(status)

    def _rows(self, found: list[Workflow]) -> list[Row]:
        now = datetime.now(UTC).replace(tzinfo=None)
        return [
            Row(
                wf,
                step_shown(wf),
                elapsed(wf, now, self.supervised.get(wf.id, True)),
                self.usage.get(wf.id, Usage()).tokens,
                self.usage.get(wf.id, Usage()).cost,
                self.decided.get(wf.id),
                self.supervised.get(wf.id, True),
            )
            for wf in found
        ]

    def _workflows(self, reader: StateReader) -> list[Workflow]:
        """Every workflow, decoding (JSON context and definition) only those updated since the
        last refresh."""
        from supervisor.state.records import Workflow

        stamps = reader.conn.execute("SELECT id, updated_at FROM workflows ORDER BY id").fetchall()
        stale = [i for i, stamp in stamps if self.stamps.get(i) != stamp]
        for start in range(0, len(stale), 500):
            chunk = stale[start : start + 500]
            marks = ",".join("?" * len(chunk))
            for row in reader._rows(f"SELECT * FROM workflows WHERE id IN ({marks})", *chunk):
                self.known[row["id"]] = Workflow(**row)
        self.stamps = dict(stamps)
        return [self.known[i] for i, _ in stamps if i in self.known]

    def _add_usage(self, conn: sqlite3.Connection) -> None:
        """Add the events since the last refresh. `NOT INDEXED` keeps SQLite on the rowid range
        (a few new rows) rather than walking the per-workflow index over every event."""
        self.changed = set()
        top = conn.execute("SELECT max(id) FROM events").fetchone()[0] or 0
        if top <= self.last_event:
            return
        rows = conn.execute(
            "SELECT workflow_id, coalesce(sum(input_tokens), 0) + coalesce(sum(output_tokens), 0),"
            " coalesce(sum(cost_usd), 0.0), max(id) FROM events NOT INDEXED WHERE id > ? "
            "GROUP BY workflow_id",
            (self.last_event,),
        ).fetchall()
        for wf_id, tokens, cost, top in rows:
            self.changed.add(wf_id)
            if wf_id is not None:
                entry = self.usage.setdefault(wf_id, Usage())
                entry.tokens += int(tokens)
                entry.cost += float(cost)
            self.last_event = max(self.last_event, int(top))

    def detail(self, wf_id: int, events: int = 30) -> Detail | None:
        shared = _shared(self.db)
        if shared is not None:
            with shared as store:
                wf = store.workflow(wf_id)
                log = store.events(wf_id)[-events:]
                steps = store.steps(wf_id)
                approval = store.latest_approval(wf_id)
            return self._detail(wf, log, steps, approval)
        reader = self._reader()
        if reader is None:
            return None
        with reader:
            wf = reader.workflow(wf_id)
            recent = reader.conn.execute(
                "SELECT id FROM events WHERE workflow_id = ? ORDER BY id DESC LIMIT 1 OFFSET ?",
                (wf_id, events - 1),
            ).fetchone()
            log = reader.events(wf_id, after_id=recent[0] - 1 if recent else 0)
            steps = reader.steps(wf_id)
            approval = reader.latest_approval(wf_id)
        return self._detail(wf, log, steps, approval)

    def _detail(
        self, wf: Workflow, log: list[Event], steps: list[dict[str, Any]], approval: Approval | None
    ) -> Detail:
        supervised = live(self.db.parent, [wf]).get(wf.id, True)
        step = approval.step if approval else None
        return Detail(wf, log, steps, step, decision(wf, approval), supervised)


def decision(wf: Workflow, approval: Approval | None) -> str | None:
    """The person's decision on the approval the workflow waits for; an approval decided
    earlier (the workflow has moved on since) is history, not something to act on."""
    if not _waits(wf) or approval is None or approval.status not in DECIDED:
        return None
    return approval.status


def _waits(wf: Workflow) -> bool:
    return wf.status == "awaiting_approval"


@dataclass
class Detail:
    workflow: Workflow
    events: list[Event]
    steps: list[dict[str, Any]]
    approval_step: str | None
    decided: str | None = None  # the decision on the approval it waits for, once made
    supervised: bool = True  # False: `running`, and no supervisor holds its task lock

    @property
    def status(self) -> str:
        return status_shown(self.workflow, self.decided, self.supervised)


@dataclass
class Review:
    reviewer: str
    verdict: str
    summary: str
    issues: list[dict[str, Any]]
    security: list[str]


@dataclass
class ToApprove:
    """Everything the approval screen shows about one waiting workflow."""

    workflow: Workflow
    step: str
    about: list[str]
    files: list[tuple[str, str, str]]  # (added, deleted, path); "-" for binary files
    reviews: list[Review]
    diff: str
    needs_you: list[str] = field(default_factory=list)  # why a person must decide, if not plain


def needs_you(context: dict[str, Any]) -> list[str]:
    """Each component whose split went as far as it could, why, and what it went through: an
    approval that lets a blocked sub-plan go on asks a person for that reason, and once said
    nothing of it (`status <id>` has it, in these words, as `needs you`)."""
    nodes = (context.get("decomposition") or {}).get("nodes") or {}
    found = []
    for cid, node in nodes.items():
        if node.get("status") == "blocked":
            went = "; ".join(node.get("failures") or [])[-600:]
            found.append(
                f"component {cid} (depth {node.get('depth')}): {node.get('problem')}. {went}"
            )
    return found


def _without_stat(about: list[str], files: list[tuple[str, str, str]]) -> list[str]:
    """What is approved, less `git diff --stat`'s file lines when the screen lists the changed
    files itself (at 80×24 they filled the summary twice over); its total line stays."""
    starts = [i for i, line in enumerate(about) if line.startswith("changes against ")]
    if not files or not starts:
        return about
    start = starts[-1]
    return [*about[:start], f"{about[start].rstrip(':')}: {about[-1].strip()}"]


def to_approve(db: Path, repo: Path, wf_id: int) -> ToApprove:
    from supervisor.policy.approvals import pending

    with _shared(db) or StateReader.open(db) or _missing(db) as reader:
        wf = reader.workflow(wf_id)
        approval = reader.latest_approval(wf_id)
        reviews = latest_reviews(
            [e for e in reader.events(wf_id) if e.type == "review" and e.status is not None]
        )
    step = str(wf.context.get("approval_step") or (approval.step if approval else "?"))
    head = head_of(wf)
    files = changed_files(repo, wf.base_sha, head)
    return ToApprove(
        wf,
        step,
        _without_stat(pending(wf, repo), files),
        files,
        reviews,
        diff_text(repo, wf.base_sha, head),
        needs_you(wf.context),
    )


def _shared(db: Path) -> Store | None:
    """The store of a shared PostgreSQL state (`state.url`), which the sqlite3 reader cannot
    read; None for the repository's own SQLite file."""
    from supervisor.state.location import state_url

    if not state_url():
        return None
    from supervisor.state.store import Store

    return Store(db)


def _missing(db: Path) -> StateReader:
    raise SupervisorError(
        f"No readable state database at {db}.",
        "Run `supervisor status` once (it creates or migrates it), or start a task first.",
    )


def latest_reviews(events: list[Event]) -> list[Review]:
    """Each reviewer's latest verdict from its `review` events; an output that is not an object
    (or issues that are not) is left out rather than trusted to have the shape it should."""
    latest: dict[str, Review] = {}
    for e in events:
        out = (e.payload or {}).get("output") or {}
        if not isinstance(out, dict):
            continue
        reviewer = e.role or e.step or "?"
        latest[reviewer] = Review(
            reviewer,
            e.status or "?",
            str(out.get("summary") or ""),
            [i for i in out.get("issues") or [] if isinstance(i, dict)],
            [str(c) for c in out.get("security_concerns") or []],
        )
    return list(latest.values())
