"""A scrolling pane that says what it cannot show, in its bottom border.

At 80×24 the steps pane hid its last rows and the approval screen's summary hid the changed
files and the reviews, each behind a scroll bar a terminal draws as a faint block, or not at all
in some themes: a person read the pane as complete. So every pane that scrolls here says how
many rows lie above and below, in words, and keeps saying it as it scrolls or its content changes.
"""

from __future__ import annotations

from textual.containers import VerticalScroll
from textual.events import Resize


def mark(above: int, below: int) -> str:
    """The border's words for the rows out of sight; "" when the pane shows everything."""
    parts = []
    if above > 0:
        parts.append(f"↑ {above} above")
    if below > 0:
        parts.append(f"↓ {below} more below")
    return "  ".join(parts)


class Marked(VerticalScroll):
    """VerticalScroll with the rows out of sight named in its border subtitle (it needs a
    border to show them: the panes that use it have one)."""

    def on_resize(self, event: Resize) -> None:
        """Sent when the pane's size or its content's size changes."""
        self.call_after_refresh(self._mark)

    def watch_virtual_size(self) -> None:
        """The content grew or shrank (a Resize is sent only when the pane's own size does)."""
        self.call_after_refresh(self._mark)

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        self._mark()

    def _mark(self) -> None:
        above = round(self.scroll_y)
        self.border_subtitle = mark(above, self.max_scroll_y - above)
