"""Worker and repository text, shown as data: never as terminal control, never as rich markup.

A worker's summary, an issue list, a file name, a component id or a dependency file's comment is
written by someone the supervisor does not trust. Printed raw, `\\x1b]0;...\\x07` retitles the
window and `\\x1b[2J` clears the screen; printed as a rich markup string, `[/]` raises MarkupError
and `[link=...]` makes a hyperlink. So every place that shows such text goes through `visible`
(control characters and escape sequences made visible as `\\x1b`, `\\x07`, `\\u202e`), and, where
it becomes part of a markup string, `markup` (rich's own escape on top). Rich's `Text` objects are
never parsed as markup, so `text` is the usual way to show it.

`Guarded` is the backstop for a console: it renders what it wraps and makes visible any control
character left in the text segments, so a place that forgot the escaping still cannot reach the
terminal (the layout is then a few cells off, which is why the call sites escape first).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import RenderHook
from rich.markup import escape
from rich.segment import Segment
from rich.text import Text

from supervisor.guard.visible import UNSAFE as _UNSAFE
from supervisor.guard.visible import visible as visible

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator

    from rich.console import (
        Console,
        ConsoleOptions,
        ConsoleRenderable,
        RenderableType,
        RenderResult,
    )
    from rich.measure import Measurement


def markup(value: object, *, lines: bool = True) -> str:
    """`value` for a place inside a rich markup string: visible, and its `[` escaped."""
    return escape(visible(value, lines=lines))


def text(value: object, style: str = "", *, lines: bool = True) -> Text:
    """`value` as a rich Text (never parsed as markup), visible."""
    return Text(visible(value, lines=lines), style=style)


def safe_segments(segments: Iterable[Segment]) -> Iterator[Segment]:
    """Segments with any control character in their text made visible; rich's own control
    segments (cursor moves of a live display) pass as they are."""
    for segment in segments:
        if segment.control or not _UNSAFE.search(segment.text):
            yield segment
        else:
            yield Segment(visible(segment.text), segment.style, segment.control)


class Guarded:
    """A renderable whose output carries no control character of its content."""

    def __init__(self, renderable: RenderableType) -> None:
        self.renderable = renderable

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield from safe_segments(console.render(self.renderable, options))

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        from rich.measure import Measurement

        return Measurement.get(console, options, self.renderable)


class _Hook(RenderHook):
    """A console render hook that guards everything printed through the console."""

    def process_renderables(self, renderables: list[ConsoleRenderable]) -> list[ConsoleRenderable]:
        return [Guarded(r) for r in renderables]


def guard(console: Console) -> Console:
    """Make `console` guard everything it prints (see Guarded); returns it."""
    console.push_render_hook(_Hook())
    return console
