"""The approval screen: the task, what is being approved, the changed files, every reviewer's
verdict and the diff, with the keys that decide; and the small dialogs it opens.

A decision goes through `supervisor.lifecycle.task_state.decide`, the same code as `supervisor
approve` and `reject`, and only records itself: the workflow moves on when `supervisor resume`
applies it, so after a decision the screen offers to start that resume (supervisor.tui.resume).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar, Protocol, cast

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen, Screen
from textual.widgets import Button, Footer, Header, Input, Label, Static

from supervisor.core.errors import SupervisorError
from supervisor.guard.textsafe import text as as_text
from supervisor.guard.textsafe import visible
from supervisor.tui.panes import Marked

if TYPE_CHECKING:
    from textual.app import ComposeResult

    from supervisor.views.monitor import ToApprove

SEND = "Enter sends, Escape cancels."


class Decides(Protocol):
    """What the approval screen needs of the app (supervisor.tui.app.SupervisorTui), named here
    so this module does not import the app that imports it."""

    def decide(self, wf_id: int, *, approve: bool, reason: str | None) -> None: ...
    def pop_screen(self) -> object: ...
    def refresh_state(self) -> None: ...
    def offer_resume(self, wf_id: int, said: str) -> None: ...


class Ask(ModalScreen[str | None]):
    """One line of text (a rejection's reason, a comment). The box says how to send it: a person
    once typed a comment and looked for a button."""

    BINDINGS: ClassVar = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, prompt: str) -> None:
        super().__init__()
        self.prompt = prompt

    def compose(self) -> ComposeResult:
        with Vertical(id="ask"):
            yield Label(self.prompt)
            yield Input(id="answer", placeholder="type here")
            yield Label(SEND, classes="how")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value.strip() or None)

    def action_cancel(self) -> None:
        self.dismiss(None)


class OfferResume(ModalScreen[bool]):
    """After a decision: the workflow moves on only when `supervisor resume` applies it, so
    offer to start that for the person rather than leave them to find the command."""

    BINDINGS: ClassVar = [
        Binding("y", "answer(True)", "Resume now"),
        Binding("n", "answer(False)", "Not now"),
        Binding("escape", "answer(False)", "Not now", show=False),
    ]

    def __init__(self, said: str, wf_id: int) -> None:
        super().__init__()
        self.said, self.wf_id = said, wf_id

    def compose(self) -> ComposeResult:
        with Vertical(id="ask"):
            yield Label(self.said)
            yield Label(
                f"Resume workflow {self.wf_id} now? This starts `supervisor resume "
                f"{self.wf_id}` in the background; its progress shows in the list."
            )
            with Horizontal(classes="offer"):
                yield Button(Text("[Y]es, resume"), id="yes", variant="success")
                yield Button(Text("[N]ot now"), id="no")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)


class ApprovalScreen(Screen[None]):
    """The task, what is being approved, the changed files, every reviewer's verdict, the diff.

    Two panes, the summary above the diff, each saying what it holds out of sight
    (supervisor.tui.panes); `f` and `v` bring the changed files and the reviews into view, `tab`
    moves between the panes and the arrow and page keys scroll the one in focus: at 80×24 the
    files and reviews were reachable only by arrow keys nobody had been told of."""

    BINDINGS: ClassVar = [
        Binding("a", "approve", "Approve"),
        Binding("r", "reject", "Reject"),
        Binding("d", "toggle_diff", "Diff"),
        Binding("c", "comment", "Comment"),
        Binding("f", "show('files')", "Files"),
        Binding("v", "show('reviews')", "Reviews"),
        Binding("s", "skip", "Skip"),
        Binding("tab", "other_pane", "Other pane", show=False),
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
        with Marked(id="summary") as summary:
            summary.border_title = "summary"
            yield Static(self._head(), id="head")
            yield Static(self._files(), id="files")
            yield Static(self._reviews(), id="reviews")
        with Marked(id="diff") as diff:
            diff.border_title = "diff"
            yield Static(
                Syntax(
                    visible(item.diff or "(no changes)"),
                    "diff",
                    line_numbers=False,
                    word_wrap=False,
                )
            )
        with Horizontal(id="buttons"):  # one row: the footer names the same keys
            yield Button(Text("[A]pprove"), id="approve", variant="success", compact=True)
            yield Button(Text("[R]eject"), id="reject", variant="error", compact=True)
            yield Button(Text("[D]iff"), id="toggle_diff", compact=True)
            yield Button(Text("[C]omment"), id="comment", compact=True)
            yield Button(Text("[S]kip"), id="skip", compact=True)
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#summary").focus()  # the arrow keys scroll it from the start

    def _head(self) -> Table:
        wf = self.item.workflow
        grid = Table.grid(padding=(0, 2))
        grid.add_row("workflow", as_text(f"{wf.id}  {wf.task_branch}"))
        grid.add_row("task", as_text(wf.description))
        then = wf.current_step or "the end"
        grid.add_row("approve", as_text(f"step '{self.item.step}' (then: {then})"))
        if self.item.needs_you:
            grid.add_row(Text("needs you", style="yellow"), as_text("\n".join(self.item.needs_you)))
        grid.add_row("about", as_text("\n".join(self.item.about) or "-"))
        if self.comment:
            grid.add_row("comment", as_text(self.comment))
        return grid

    def _files(self) -> Group:
        """One line a file, no box: a boxed table spent four of the summary's rows on lines."""
        title = Text(f"\nChanged files ({len(self.item.files)})", style="bold")
        table = Table.grid(padding=(0, 1))
        table.add_column(style="green", justify="right", min_width=5)
        table.add_column(style="red", justify="right", min_width=5)
        table.add_column(ratio=1)
        for added, deleted, path in self.item.files:
            table.add_row(as_text(f"+{added}"), as_text(f"-{deleted}"), as_text(path, lines=False))
        if not self.item.files:
            table.add_row("", "", "(none)")
        return Group(title, table)

    def _reviews(self) -> Text:
        text = Text("\n")
        if not self.item.reviews:
            return Text("\nReviews: none recorded", style="dim")
        text.append(f"Reviews ({len(self.item.reviews)})\n", style="bold")
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
        text.rstrip()
        return text

    async def on_button_pressed(self, event: Button.Pressed) -> None:
        await self.run_action(str(event.button.id))

    def action_toggle_diff(self) -> None:
        """Hidden, the diff leaves the whole screen to the summary."""
        diff = self.query_one("#diff")
        diff.display = not diff.display
        summary = self.query_one("#summary")
        summary.set_class(not diff.display, "alone")
        if not diff.display:
            summary.focus()

    def action_show(self, section: str) -> None:
        """Scroll the summary to a section (`files`, `reviews`), at the pane's top."""
        summary = self.query_one("#summary", Marked)
        summary.focus()
        summary.scroll_to_widget(self.query_one(f"#{section}"), animate=False, top=True)

    def action_other_pane(self) -> None:
        """From the summary to the diff (when shown) and back: what the scroll keys move."""
        diff = self.query_one("#diff", Marked)
        summary = self.query_one("#summary", Marked)
        going = diff if summary.has_focus and diff.display else summary
        going.focus()

    def action_approve(self) -> None:
        self._decide(approve=True, reason=self.comment)

    def action_reject(self) -> None:
        def rejected(reason: str | None) -> None:
            if reason:
                self._decide(approve=False, reason=reason)
            else:
                self.notify("Not rejected: a rejection needs a reason.", severity="warning")

        self.app.push_screen(Ask("Why reject? (fed back to the step)"), rejected)

    def action_comment(self) -> None:
        def commented(text: str | None) -> None:
            if text:
                self.comment = text
                self.query_one("#head", Static).update(self._head())

        self.app.push_screen(
            Ask("Comment (recorded with your approval when you press a)"), commented
        )

    def action_skip(self) -> None:
        self.app.pop_screen()

    def _decide(self, *, approve: bool, reason: str | None) -> None:
        app = cast("Decides", self.app)
        wf_id = self.item.workflow.id
        try:
            app.decide(wf_id, approve=approve, reason=reason)
        except SupervisorError as e:
            self.notify(visible(f"{e.message} {e.hint or ''}"), severity="error", markup=False)
            return
        word = "Approved" if approve else "Rejected"
        app.pop_screen()
        app.refresh_state()
        app.offer_resume(wf_id, f"{word} workflow {wf_id}.")
