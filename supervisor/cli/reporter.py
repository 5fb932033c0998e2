"""Shows a running workflow's progress in the terminal: the engine's Reporter, drawn with rich.

Apart from supervisor.views.render because it subclasses the engine's Reporter, and only the
commands that run workflows should import the engine.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text

from supervisor.guard.textsafe import markup, visible
from supervisor.workflow.engine import Reporter

if TYPE_CHECKING:
    from rich.console import Console


class RichReporter(Reporter):
    """Shows step starts and streams worker output, dimmed, as it arrives. Every line may carry
    worker text (a step detail names a component, an info line quotes a reviewer, output is
    the worker's own): shown as text, never as markup or terminal control."""

    def __init__(self, console: Console) -> None:
        self.console = console

    def step(self, wf_id: int, name: str, detail: str) -> None:
        self.console.print(
            f"[bold]▶ wf{wf_id} {markup(name, lines=False)}[/bold]: {markup(detail)}",
            highlight=False,
        )

    def output(self, text: str) -> None:
        self.console.print(Text(visible(text.rstrip("\n")), style="dim"), highlight=False)

    def info(self, text: str) -> None:
        self.console.print(Text(f"  {visible(text)}"), highlight=False)
