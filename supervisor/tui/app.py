"""`supervisor tui`: watch the repository's workflows and decide their approvals with the change in
front of you.

It only reads the state database (supervisor.tui.data) on a timer, so it can be opened and closed
while a task runs in another terminal and never holds a lock the task waits for. The one write,
a decision, goes through `supervisor.task_state.decide`, the same code as `supervisor approve`
and `supervisor reject`. Textual is imported here and only here, for this command alone.

Everything shown that a worker or the repository wrote (the task, reviews, file names, the diff,
events) goes in as Text made visible by supervisor.guard.textsafe: an escape sequence in a summary
once
wiped the approval screen's header.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from rich.table import Table
from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import Button, DataTable, Footer, Header, Input, Label, Static

from supervisor.cli.render import STATUS_STYLE, work_tree
from supervisor.dag import WorkGraph
from supervisor.depth_view import label as depth_label
from supervisor.errors import SupervisorError
from supervisor.guard.textsafe import text as as_text
from supervisor.guard.textsafe import visible
from supervisor.tui.data import Detail, Monitor, ToApprove, to_approve

if TYPE_CHECKING:
    from pathlib import Path

BELL_ON = ("awaiting_approval", "budget_exceeded", "rate_limited", "failed", "completed")


def _status(value: str) -> Text:
    return as_text(value, STATUS_STYLE.get(value, ""), lines=False)


class Ask(ModalScreen[str | None]):
    """One line of text (a rejection's reason, a comment); Escape cancels."""

    BINDINGS: ClassVar = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, prompt: str) -> None:
        super().__init__()
        self.prompt = prompt

    def compose(self) -> ComposeResult:
        with Vertical(id="ask"):
            yield Label(self.prompt)
            yield Input(id="answer")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value.strip() or None)

    def action_cancel(self) -> None:
        self.dismiss(None)


class ApprovalScreen(Screen[None]):
    """The task, what is being approved, the changed files, every reviewer's verdict, the diff."""

    BINDINGS: ClassVar = [
        Binding("a", "approve", "Approve"),
        Binding("r", "reject", "Reject"),
        Binding("d", "toggle_diff", "Diff"),
        Binding("c", "comment", "Comment"),
        Binding("s", "skip", "Skip"),
        Binding("escape", "skip", "Back", show=False),
    ]

    def __init__(self, item: ToApprove) -> None:
        super().__init__()
        self.item = item
        self.comment: str | None = None

    def compose(self) -> ComposeResult:
        from rich.syntax import Syntax  # Pygments: loaded when a diff is first shown, not at start

        item = self.item
        yield Header()
        with VerticalScroll(id="summary"):
            yield Static(self._head(), id="head")
            yield Static(self._files(), id="files")
            yield Static(self._reviews(), id="reviews")
        with VerticalScroll(id="diff"):
            yield Static(
                Syntax(
                    visible(item.diff or "(no changes)"),
                    "diff",
                    line_numbers=False,
                    word_wrap=False,
                )
            )
        with Horizontal(id="buttons"):
            yield Button(Text("[A]pprove"), id="approve", variant="success")
            yield Button(Text("[R]eject"), id="reject", variant="error")
            yield Button(Text("[D]iff"), id="toggle_diff")
            yield Button(Text("[C]omment"), id="comment")
            yield Button(Text("[S]kip"), id="skip")
        yield Footer()

    def _head(self) -> Table:
        wf = self.item.workflow
        grid = Table.grid(padding=(0, 2))
        grid.add_row("workflow", as_text(f"{wf.id}  {wf.task_branch}"))
        grid.add_row("task", as_text(wf.description))
        then = wf.current_step or "the end"
        grid.add_row("approve", as_text(f"step '{self.item.step}' (then: {then})"))
        grid.add_row("about", as_text("\n".join(self.item.about) or "-"))
        if self.comment:
            grid.add_row("comment", as_text(self.comment))
        return grid

    def _files(self) -> Table:
        table = Table(title="Changed files", title_justify="left", expand=True)
        table.add_column("+", style="green", justify="right", width=6)
        table.add_column("-", style="red", justify="right", width=6)
        table.add_column("file", ratio=1)
        for added, deleted, path in self.item.files:
            table.add_row(as_text(added), as_text(deleted), as_text(path, lines=False))
        if not self.item.files:
            table.add_row("", "", "(none)")
        return table

    def _reviews(self) -> Text:
        text = Text()
        if not self.item.reviews:
            return Text("Reviews: none recorded", style="dim")
        text.append("Reviews\n", style="bold")
        for review in self.item.reviews:
            style = "green" if review.verdict == "APPROVED" else "yellow"
            text.append(f"  {visible(review.reviewer, lines=False)}: ")
            text.append(visible(review.verdict, lines=False), style=style)
            text.append(f"  {visible(review.summary[:200])}\n")
            for issue in review.issues:
                where = str(issue.get("file") or "")
                if where and issue.get("line"):
                    where += f":{issue['line']}"
                said = f"    [{issue.get('severity', '?')}] {where} "
                text.append(visible(said, lines=False), style="bold")
                text.append(f"{visible(str(issue.get('description', ''))[:300])}\n")
            for concern in review.security:
                text.append(f"    [security] {visible(str(concern)[:300])}\n", style="red")
        return text

    async def on_button_pressed(self, event: Button.Pressed) -> None:
        await self.run_action(str(event.button.id))

    def action_toggle_diff(self) -> None:
        diff = self.query_one("#diff")
        diff.display = not diff.display

    def action_approve(self) -> None:
        self._decide(approve=True, reason=self.comment)

    def action_reject(self) -> None:
        def rejected(reason: str | None) -> None:
            if reason:
                self._decide(approve=False, reason=reason)
            else:
                self.notify("Not rejected: a rejection needs a reason.", severity="warning")

        self.app.push_screen(Ask("Why reject? (fed back to the step; Enter to send)"), rejected)

    def action_comment(self) -> None:
        def commented(text: str | None) -> None:
            if text:
                self.comment = text
                self.query_one("#head", Static).update(self._head())

        self.app.push_screen(Ask("Comment (recorded with your approval)"), commented)

    def action_skip(self) -> None:
        self.app.pop_screen()

    def _decide(self, *, approve: bool, reason: str | None) -> None:
        app = self.app
        assert isinstance(app, SupervisorTui)
        wf_id = self.item.workflow.id
        try:
            app.decide(wf_id, approve=approve, reason=reason)
        except SupervisorError as e:
            self.notify(visible(f"{e.message} {e.hint or ''}"), severity="error", markup=False)
            return
        word = "Approved" if approve else "Rejected"
        app.notify(f"{word} workflow {wf_id}. Continue with: supervisor resume {wf_id}")
        app.pop_screen()
        app.refresh_state()


class SupervisorTui(App[None]):
    """The workflow list, the selected workflow's tree and latest events."""

    TITLE = "supervisor"
    CSS = """
    #workflows { height: 40%; }
    #below { height: 1fr; }
    #tree { width: 45%; border: round $primary; }
    #events { width: 55%; border: round $primary; }
    #summary { height: auto; max-height: 45%; }
    #diff { height: 1fr; border: round $primary; }
    #buttons { height: 3; }
    #ask { width: 70; height: auto; border: thick $accent; background: $surface; padding: 1; }
    Ask { align: center middle; }
    """
    BINDINGS: ClassVar = [
        Binding("q", "quit", "Quit"),
        Binding("enter", "open", "Approval screen", show=False),
        Binding("o", "open", "Open approval"),
        Binding("g", "refresh_state", "Refresh"),
        # Shown when it applies (opening a budget-paused workflow says so), not on every screen.
        Binding("x", "extend", "Extend budget", show=False),
    ]

    def __init__(self, repo: Path, db: Path, interval: float = 1.0) -> None:
        super().__init__()
        self.repo, self.db, self.interval = repo, db, interval
        self.monitor = Monitor(db)
        self.statuses: dict[int, str] = {}
        self.cells: dict[int, tuple[object, ...]] = {}  # what each row shows
        self.selected: int | None = None
        self.shown: tuple[int | None, object] = (None, None)  # the detail drawn, and as of when

    def compose(self) -> ComposeResult:
        yield Header()
        yield DataTable(id="workflows", cursor_type="row", zebra_stripes=True)
        with Horizontal(id="below"):
            with VerticalScroll(id="tree"):
                yield Static("Select a workflow", id="tree-body")
            with VerticalScroll(id="events"):
                yield Static("", id="events-body")
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one("#workflows", DataTable)
        for key, label in (
            ("id", "id"),
            ("status", "status"),
            ("step", "step"),
            ("elapsed", "elapsed"),
            ("tokens", "tokens"),
            ("cost", "cost"),
            ("task", "task"),
        ):
            table.add_column(label, key=key)
        self.refresh_state()
        self.set_interval(self.interval, self.refresh_state)

    def decide(self, wf_id: int, *, approve: bool, reason: str | None) -> None:
        from supervisor.task_state import decide

        decide(wf_id, self.repo, approve=approve, reason=reason)

    def action_refresh_state(self) -> None:
        self.refresh_state()

    def refresh_state(self) -> None:
        rows = self.monitor.rows()
        table = self.query_one("#workflows", DataTable)
        changed = False
        for row in rows:
            wf = row.workflow
            key = str(wf.id)
            cells = (  # Text, not str: DataTable reads a str as markup
                Text(str(wf.id)),
                _status(wf.status),
                as_text(row.step, lines=False),
                Text(row.elapsed),
                Text(f"{row.tokens:,}"),
                Text(f"${row.cost:.4f}"),
                as_text(wf.description[:60], lines=False),
            )
            before = self.statuses.get(wf.id)
            if before is not None and before != wf.status and wf.status in BELL_ON:
                changed = True
            self.statuses[wf.id] = wf.status
            shown = self.cells.get(wf.id)
            if shown is None:
                table.add_row(*cells, key=key)
            elif shown != cells:
                for column, cell, old in zip(table.columns, cells, shown, strict=True):
                    if cell != old:
                        table.update_cell(key, column, cell)
            self.cells[wf.id] = cells
        if changed:
            self.bell()
        if self.selected is None and rows:
            self.selected = rows[-1].workflow.id
            table.move_cursor(row=len(rows) - 1)
        stamp = next((r.workflow.updated_at for r in rows if r.workflow.id == self.selected), None)
        if self.selected in self.monitor.changed or (self.selected, stamp) != self.shown:
            self.shown = (self.selected, stamp)
            self._show_selected()

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.row_key.value is not None and int(event.row_key.value) != self.selected:
            self.selected = int(event.row_key.value)
            self._show_selected()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        if event.row_key.value is not None:
            self.selected = int(event.row_key.value)
            self.action_open()

    def _show_selected(self) -> None:
        if self.selected is None:
            return
        detail = self.monitor.detail(self.selected)
        if detail is None:
            return
        self.query_one("#tree-body", Static).update(_tree_view(detail))
        self.query_one("#events-body", Static).update(_events_view(detail))

    def action_extend(self) -> None:
        """Raise the budget of a workflow paused on it: what `approve <id> --extend` does."""
        from supervisor.policy.budgets import parse_extension
        from supervisor.task_state import decide

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

        prompt = f"Raise workflow {wf_id}'s budget by (dollars: 2.50, or tokens: 50000 tokens)"
        self.push_screen(Ask(prompt), extended)

    def action_open(self) -> None:
        if self.selected is None:
            return
        if self.statuses.get(self.selected) == "budget_exceeded":
            self.notify(f"Workflow {self.selected} is paused on its budget: x raises it.")
            return
        if self.statuses.get(self.selected) != "awaiting_approval":
            self.notify(f"Workflow {self.selected} is not waiting for approval.")
            return
        try:
            item = to_approve(self.db, self.repo, self.selected)
        except SupervisorError as e:
            self.notify(visible(e.message), severity="error", markup=False)
            return
        self.push_screen(ApprovalScreen(item))


def _tree_view(detail: Detail) -> Table | Text:
    wf = detail.workflow
    work = WorkGraph.of_workflow(wf.context)
    depth = depth_label(wf.context)
    title = Text(f"workflow {wf.id}: steps" + (f" · depth {depth}" if depth else ""))
    steps = Table(title=title, title_justify="left", expand=True)
    for column in ("step", "try", "role", "status"):
        steps.add_column(column)
    for row in detail.steps[-15:]:
        steps.add_row(
            as_text(row["name"], lines=False),
            str(row["attempt"]),
            as_text(row["role"] or "(gate)", lines=False),
            _status(row["status"]),
        )
    if work is None:
        return steps
    grid = Table.grid()
    grid.add_row(work_tree(wf.description, work))
    grid.add_row(steps)
    return grid


def _events_view(detail: Detail) -> Text:
    text = Text()
    wf = detail.workflow
    text.append(f"{visible(wf.description)}\n", style="bold")
    if wf.error:
        text.append(f"error: {visible(wf.error)}\n", style="red")
    for e in detail.events:
        text.append(f"{e.timestamp:%H:%M:%S} ", style="dim")
        text.append(visible(e.type, lines=False), style="bold")
        if e.step:
            text.append(visible(f" {e.step}", lines=False))
        if e.status:
            text.append(" ")
            text.append_text(_status(e.status))
        summary = (e.payload or {}).get("output", {}) if isinstance(e.payload, dict) else {}
        said = summary.get("summary") if isinstance(summary, dict) else None
        error = (e.payload or {}).get("error") if isinstance(e.payload, dict) else None
        if said or error:
            text.append(f"  {visible(str(said or error)[:160])}", style="dim")
        text.append("\n")
    return text


def run(repo: Path, interval: float = 1.0) -> None:
    from supervisor.task_state import state_db
    from supervisor.workspace.worktrees import find_repo_root

    root = find_repo_root(repo)
    SupervisorTui(root, state_db(root), interval).run()
