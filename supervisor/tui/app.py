"""`supervisor tui`: watch the repository's workflows, decide their approvals with the change in
front of you, and resume them.

It only reads the state database (supervisor.views.monitor), so it can be opened and closed while a
task runs in another terminal and never holds a lock the task waits for. The writes are a
decision, through `supervisor.lifecycle.task_state.decide` (the code of `supervisor approve` /
`reject`), and starting `supervisor resume` as its own process (supervisor.tui.resume). Textual is
imported here and in supervisor.tui.approval only, for this command alone.

It draws first and fills in after: the first screen is the empty list, and the state is read in
a thread after that paint (100 workflows and 100,000 events took the opening from 0.4 s to over
1 s when read before it). Later refreshes are incremental and run on the timer.

Everything shown that a worker or the repository wrote (the task, reviews, file names, the diff,
events) goes in as Text made visible by supervisor.guard.textsafe: an escape sequence in a
summary once wiped the approval screen's header.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.widgets import DataTable, Footer, Header, Static
from textual.worker import Worker, WorkerState

from supervisor.core.errors import SupervisorError
from supervisor.tui.panes import Marked

if TYPE_CHECKING:
    from pathlib import Path

    from supervisor.tui.resume import Resuming
    from supervisor.views.monitor import Detail, Monitor, Row

BELL_ON = ("awaiting_approval", "budget_exceeded", "rate_limited", "failed", "completed")
PAGE = 100  # events shown per workflow, and how many more `e` adds
TASK_SHOWN = 60  # characters of the task description in the list (free text: cut with "…")
LIST_ACTIONS = ("open", "resume", "older", "refresh_state", "extend")


@dataclass
class Snapshot:
    """What one read of the state found: every row, and the selected workflow's detail when it
    changed since it was last drawn (None: keep what is drawn)."""

    rows: list[Row]
    selected: int | None
    detail: Detail | None
    stamp: object


class SupervisorTui(App[None]):
    """The workflow list, the selected workflow's tree and latest events."""

    TITLE = "supervisor"
    CSS = """
    #workflows { height: 40%; }
    #below { height: 1fr; }
    #tree { width: 45%; border: round $primary; }
    #events { width: 55%; border: round $primary; }
    #summary { height: auto; max-height: 50%; border: round $primary; }
    #summary.alone { height: 1fr; max-height: 100%; }
    #diff { height: 1fr; border: round $primary; }
    #summary:focus-within, #diff:focus-within { border: round $accent; }
    #buttons { height: 1; }
    #buttons Button { margin: 0 1; }
    #ask { width: 70; height: auto; border: thick $accent; background: $surface; padding: 1; }
    #ask Label { width: 100%; }
    #ask .how { color: $text-muted; }
    #ask .offer { height: 3; }
    Ask, OfferResume { align: center middle; }
    """
    BINDINGS: ClassVar = [
        Binding("q", "quit", "Quit"),
        # What a terminal user presses first; Textual's default only says "Press ctrl+q".
        Binding("ctrl+c", "quit", "Quit", show=False, priority=True),
        Binding("enter", "open", "Approval screen", show=False),
        Binding("o", "open", "Open approval"),
        Binding("r", "resume", "Resume"),
        Binding("e", "older", "Older events"),
        Binding("g", "refresh_state", "Refresh"),
        # Shown when it applies (opening a budget-paused workflow says so), not on every screen.
        Binding("x", "extend", "Extend budget", show=False),
    ]

    def __init__(self, repo: Path, db: Path, interval: float = 1.0) -> None:
        super().__init__()
        self.repo, self.db, self.interval = repo, db, interval
        self.monitor: Monitor | None = None  # made in the loading thread: it imports the readers
        self.statuses: dict[int, str] = {}  # each row's status as shown
        self.cells: dict[int, tuple[Text, ...]] = {}  # what each row shows
        self.room = TASK_SHOWN  # characters the task column has now (the window's width)
        self.selected: int | None = None
        self.shown: tuple[int | None, object] = (None, None)  # the detail drawn, and as of when
        self.pages: dict[int, int] = {}  # events shown per workflow
        self.resuming: dict[int, Resuming] = {}
        self.follow = True  # scroll the events to the newest on the next draw
        self.filled = False  # the first read of the state has been drawn

    def compose(self) -> ComposeResult:
        yield Header()
        yield WorkflowList(id="workflows", cursor_type="row", zebra_stripes=True)
        with Horizontal(id="below"):
            with Marked(id="tree"):
                yield Static("Reading the state…", id="tree-body")
            with Marked(id="events"):
                yield Static("", id="events-body")

    def on_mount(self) -> None:
        table = self.query_one("#workflows", DataTable)
        for label in ("id", "status", "step", "elapsed", "tokens", "cost", "task"):
            table.add_column(label, key=label)
        self.call_after_refresh(self._load)

    def _load(self) -> None:
        """After the first paint: the footer (its key bar costs a frame's worth) and the read."""
        self.mount(Footer())
        self.call_after_refresh(self.screen.refresh_bindings)  # what the footer draws its keys on
        self.run_worker(self._first_read, name="load", thread=True, exit_on_error=False)

    def _first_read(self) -> Snapshot:
        from supervisor.views.monitor import Monitor

        self.monitor = Monitor(self.db)
        return self._read()

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.worker.name != "load":
            return
        if event.state == WorkerState.ERROR:
            # A state the readers refuse (a newer schema, a broken file): say why, in place.
            error = event.worker.error
            said = (
                f"{error.message}\n{error.hint or ''}"
                if isinstance(error, SupervisorError)
                else repr(error)
            )
            self.query_one("#tree-body", Static).update(Text(said, style="red"))
            return
        if event.state != WorkerState.SUCCESS:
            return
        result = event.worker.result
        assert isinstance(result, Snapshot)
        self._apply(result)
        self.filled = True
        self.set_interval(self.interval, self.refresh_state)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """The list's keys act on the list: behind the approval screen `o` opened a second
        approval screen over the first. Off there, the footer leaves them out too."""
        return not (action in LIST_ACTIONS and len(self.screen_stack) > 1)

    def decide(self, wf_id: int, *, approve: bool, reason: str | None) -> None:
        from supervisor.lifecycle.task_state import decide

        decide(wf_id, self.repo, approve=approve, reason=reason)

    def action_refresh_state(self) -> None:
        self.refresh_state()

    def refresh_state(self) -> None:
        """Read and redraw; until the first read (in its thread) has landed, nothing to do."""
        if not self.filled:
            return
        self._apply(self._read())

    def _read(self) -> Snapshot:
        """The state as of now; touches no widget, so it may run in a thread."""
        assert self.monitor is not None
        rows = self.monitor.rows()
        selected = self.selected
        if selected is None and rows:
            selected = rows[-1].workflow.id
        stamp = next((r.workflow.updated_at for r in rows if r.workflow.id == selected), None)
        detail = None
        if selected is not None and (
            selected in self.monitor.changed or (selected, stamp) != self.shown
        ):
            detail = self.monitor.detail(selected, self.pages.get(selected, PAGE))
        return Snapshot(rows, selected, detail, stamp)

    def _apply(self, snap: Snapshot) -> None:
        from supervisor.guard.textsafe import text as as_text
        from supervisor.tui.views import status_text

        table = self.query_one("#workflows", DataTable)
        fixed = {  # Text, not str: DataTable reads a str as markup
            row.workflow.id: (
                Text(str(row.workflow.id)),
                status_text(row.status),
                as_text(row.step, lines=False),
                Text(row.elapsed),
                Text(f"{row.tokens:,}"),
                Text(f"${row.cost:.4f}"),
            )
            for row in snap.rows
        }
        room = _task_room(table, [*fixed.values(), *(c[:-1] for c in self.cells.values())])
        if room != self.room:  # the window changed: the task column is measured again
            self.room = room
            if self.cells:  # a column keeps the widest width it ever had: made anew
                table.remove_column("task")
                table.add_column("task", key="task")
                self.cells = {k: (*v[:-1], Text("")) for k, v in self.cells.items()}
        rang = False
        for row in snap.rows:
            wf = row.workflow
            status = row.status
            cells = (*fixed[wf.id], as_text(_cut(wf.description, room), lines=False))
            before = self.statuses.get(wf.id)
            rang = rang or (before is not None and before != status and status in BELL_ON)
            self.statuses[wf.id] = status
            shown = self.cells.get(wf.id)
            if shown is None:
                table.add_row(*cells, key=str(wf.id))
            elif shown != cells:
                for column, cell, old in zip(table.columns, cells, shown, strict=True):
                    if cell != old:
                        table.update_cell(str(wf.id), column, cell, update_width=True)
            self.cells[wf.id] = cells
        if rang:
            self.bell()
        if self.selected is None and snap.selected is not None:
            self.selected = snap.selected
            table.move_cursor(row=table.get_row_index(str(snap.selected)))
        self._check_resumes()
        if snap.detail is not None and snap.selected == self.selected:
            self.shown = (snap.selected, snap.stamp)
            self._draw(snap.detail)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.row_key.value is not None and int(event.row_key.value) != self.selected:
            self.selected = int(event.row_key.value)
            self.follow = True
            self._show_selected()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        if event.row_key.value is not None:
            self.selected = int(event.row_key.value)
            self.action_open()

    def _show_selected(self) -> None:
        if self.selected is None or self.monitor is None:
            return
        detail = self.monitor.detail(self.selected, self.pages.get(self.selected, PAGE))
        if detail is not None:
            self._draw(detail)

    def _draw(self, detail: Detail) -> None:
        """The tree and the events; the events stay on the newest unless the person scrolled
        up to read older ones."""
        from supervisor.tui.views import events_view, tree_view

        events = self.query_one("#events", VerticalScroll)
        follow = self.follow or events.scroll_y >= events.max_scroll_y
        self.follow = False
        self.query_one("#tree-body", Static).update(tree_view(detail))
        note = self._resume_note(detail.workflow.id)
        self.query_one("#events-body", Static).update(events_view(detail, note))
        if follow:
            events.scroll_end(animate=False)

    def action_older(self) -> None:
        if self.selected is None:
            return
        self.pages[self.selected] = self.pages.get(self.selected, PAGE) + PAGE
        self._show_selected()
        self.query_one("#events", VerticalScroll).scroll_home(animate=False)

    def action_open(self) -> None:
        if self.selected is None:
            return
        from supervisor.guard.textsafe import visible
        from supervisor.tui.approval import ApprovalScreen
        from supervisor.views.monitor import DECIDED, to_approve

        status = self.statuses.get(self.selected)
        if status == "budget_exceeded":
            self.notify(f"Workflow {self.selected} is paused on its budget: x raises it.")
            return
        if status in DECIDED:
            self.notify(f"Workflow {self.selected} is already {status}: r resumes it.")
            return
        if status != "awaiting_approval":
            self.notify(f"Workflow {self.selected} is not waiting for approval.")
            return
        try:
            item = to_approve(self.db, self.repo, self.selected)
        except SupervisorError as e:
            self.notify(visible(e.message), severity="error", markup=False)
            return
        self.push_screen(ApprovalScreen(item))

    def action_extend(self) -> None:
        """Raise the budget of a workflow paused on it: what `approve <id> --extend` does."""
        from supervisor.lifecycle.task_state import decide
        from supervisor.policy.budgets import parse_extension
        from supervisor.tui.approval import Ask

        wf_id = self.selected
        if wf_id is None or self.statuses.get(wf_id) != "budget_exceeded":
            self.notify(f"Workflow {wf_id} is not paused on its budget.")
            return

        def extended(answer: str | None) -> None:
            if not answer:
                return
            try:
                usd, tokens = parse_extension(answer)
                decide(wf_id, self.repo, approve=True, extend_usd=usd, extend_tokens=tokens)
            except SupervisorError as e:
                self.notify(f"{e.message} {e.hint or ''}", severity="error", markup=False)
                return
            self.notify(f"Budget raised. Continue with: supervisor resume {wf_id}")
            self.refresh_state()
            self.offer_resume(wf_id, f"Raised workflow {wf_id}'s budget.")

        prompt = f"Raise workflow {wf_id}'s budget by (dollars: 2.50, or tokens: 50000 tokens)"
        self.push_screen(Ask(prompt), extended)

    def offer_resume(self, wf_id: int, said: str) -> None:
        """After a decision: ask whether to start the resume that applies it."""
        from supervisor.tui.approval import OfferResume

        def answered(yes: bool | None) -> None:
            if yes:
                self._start_resume(wf_id)
            else:
                self.notify(f"Continue later: r here, or supervisor resume {wf_id}")

        self.push_screen(OfferResume(said, wf_id), answered)

    def action_resume(self) -> None:
        from supervisor.views.monitor import resumable

        wf_id = self.selected
        if wf_id is None:
            return
        status = self.statuses.get(wf_id, "")
        if status == "awaiting_approval":
            self.notify(f"Workflow {wf_id} waits for your decision first: o opens it.")
        elif not resumable(status):
            self.notify(f"Workflow {wf_id} is {status}: there is nothing to resume.")
        elif wf_id in self.resuming:
            self.notify(f"Workflow {wf_id} is already being resumed from here.")
        else:
            self._start_resume(wf_id)

    def _start_resume(self, wf_id: int) -> None:
        from supervisor.tui.resume import start

        try:
            self.resuming[wf_id] = started = start(self.repo, self.db.parent, wf_id)
        except SupervisorError as e:
            self.notify(f"{e.message} {e.hint or ''}", severity="error", markup=False)
            return
        self.notify(f"Resuming workflow {wf_id} (supervisor resume {wf_id}); output: {started.log}")
        self.follow = True
        self.shown = (None, None)  # redraw the detail with the resume's note
        self.refresh_state()

    def _resume_note(self, wf_id: int) -> str | None:
        started = self.resuming.get(wf_id)
        if started is None:
            return None
        return f"supervisor resume {wf_id} running (pid {started.process.pid}), started here"

    def _check_resumes(self) -> None:
        """Say when a resume started here ends, and how (its progress is the state's)."""
        from supervisor.guard.textsafe import visible

        for wf_id, started in list(self.resuming.items()):
            code = started.ended()
            if code is None:
                continue
            del self.resuming[wf_id]
            if code == 0:
                self.notify(f"supervisor resume {wf_id} finished.")
            else:
                said = visible(started.last_said(), lines=False)
                self.notify(
                    f"supervisor resume {wf_id} ended with exit code {code}: {said} "
                    f"(output: {started.log})",
                    severity="warning",
                    markup=False,
                )


class WorkflowList(DataTable[object]):
    """The list of workflows: a window made wider or narrower gives its task column another
    width at once, not at the next read."""

    def on_resize(self) -> None:
        app = self.app
        if isinstance(app, SupervisorTui):
            app.call_after_refresh(app.refresh_state)


def _task_room(table: DataTable[object], rows: list[tuple[Text, ...]]) -> int:
    """Characters the task column has before the list scrolls sideways: the task is free text,
    so it is what gives way (with "…") at 80 columns, not the ids, statuses and steps."""
    if not table.size.width:
        return TASK_SHOWN
    headers = [c.label.cell_len for c in table.columns.values()][:-1]
    widths = [max([h, *(r[i].cell_len for r in rows)]) for i, h in enumerate(headers)]
    used = sum(widths) + 2 * table.cell_padding * (len(widths) + 1) + 1  # the scroll bar
    return max(6, min(TASK_SHOWN, table.size.width - used))


def _cut(value: str, width: int) -> str:
    """Free text shortened to `width` characters, saying so with "…"."""
    return value if len(value) <= width else value[: width - 1] + "…"


def run(repo: Path, interval: float = 1.0) -> None:
    # host_git, not task_state: the state's readers load in the thread, after the first paint
    from supervisor.workspace.host_git import STATE_DIR, find_repo_root

    root = find_repo_root(repo)
    SupervisorTui(root, root / STATE_DIR / "state.db", interval).run()
