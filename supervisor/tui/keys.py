"""The TUI's keys, in one place: `supervisor tui --help` prints them without importing Textual,
and the screens' bindings are checked against them (tests/test_tui_keys.py)."""

from __future__ import annotations

MAIN = (
    ("up/down", "choose a workflow (in a pane: scroll it)"),
    ("tab", "move between the list, the steps pane and the events pane"),
    ("enter, o", "open the approval screen of a workflow waiting for approval"),
    ("r", "resume: starts `supervisor resume ID` in the background"),
    ("x", "raise the budget of a workflow paused on it"),
    ("e", "show older events of the selected workflow"),
    ("g", "refresh now"),
    ("q, ctrl+c", "quit (a resume started here goes on)"),
)
APPROVAL = (
    ("a", "approve"),
    ("r", "reject (asks for the reason, fed back to the step)"),
    ("c", "comment (recorded with your approval)"),
    ("f", "show the changed files"),
    ("v", "show the reviews: each reviewer's verdict and issues"),
    ("d", "show or hide the diff (hidden, the summary has the screen)"),
    ("tab", "move between the summary and the diff"),
    ("up/down, pgup/pgdn, home/end", "scroll the pane in focus"),
    ("s, escape", "back to the list"),
)
SCROLLING = "A pane that holds more than it shows says so in its bottom border (↓ 3 more below)."


def help_text() -> str:
    """The keys as `--help` shows them (Typer keeps lines that follow a lone \\b)."""
    lines = ["\b", "Keys in the list:"]
    lines += [f"  {key:<11} {what}" for key, what in MAIN]
    lines += ["", "\b", "Keys on the approval screen:"]
    for key, what in APPROVAL:  # a long key list gets its own line
        lines += [f"  {key:<11} {what}"] if len(key) <= 11 else [f"  {key}", f"  {'':<11} {what}"]
    lines += ["", "\b", SCROLLING, "In a text box: enter sends, escape cancels."]
    return "\n".join(lines)
