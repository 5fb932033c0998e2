"""How `supervisor --help` is arranged: commands grouped by what a person is doing, EXAMPLES on
the commands people start with, and the exit codes, in one table here rather than spread over the
command modules (each command keeps its own one-line summary in its docstring).

`arrange` runs once, after every command is registered (supervisor/cli/app.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import typer

EVERYDAY = "Everyday"
APPROVALS = "Approvals"
SET_UP = "Project set-up"
TEAM = "Team / scale-out"
MAINTENANCE = "Maintenance"

PANELS = {
    "start-task": EVERYDAY,
    "status": EVERYDAY,
    "resume": EVERYDAY,
    "events": EVERYDAY,
    "tui": EVERYDAY,
    "complete-task": EVERYDAY,
    "abandon": EVERYDAY,
    "demo": EVERYDAY,
    "approve": APPROVALS,
    "reject": APPROVALS,
    "setup": SET_UP,
    "init": SET_UP,
    "trust": SET_UP,
    "config": SET_UP,
    "roles": SET_UP,
    "role": SET_UP,
    "sandbox": SET_UP,
    "context": SET_UP,
    "worker": TEAM,
    "doctor": MAINTENANCE,
    "metrics": MAINTENANCE,
    "analyze-deps": MAINTENANCE,
}

EXIT_CODES = (
    "Exit codes: 0 done; 1 failed; 2 usage or state error (bad arguments, unknown workflow); "
    "3 a tool, Docker or credentials missing; 10 waiting for a person (an approval or a budget: "
    "`supervisor approve ID`, then `supervisor resume ID`); 130 interrupted (Ctrl-C), 143 "
    "stopped by SIGTERM: both say the `supervisor resume ID` that continues the task."
)

_EXAMPLES = {
    "": [
        "supervisor demo",
        "supervisor init",
        'supervisor start-task "Add a --verbose flag to the CLI"',
        "supervisor status 1 --watch --exit-status",
        "supervisor approve 1 && supervisor resume 1",
        "supervisor complete-task 1",
    ],
    "start-task": [
        'supervisor start-task "Fix the off-by-one in paginate()"',
        'supervisor start-task "Add CSV export" --yes --cli codex',
        'supervisor start-task "Refactor auth" --role implement=implementer_fast',
    ],
    "status": [
        "supervisor status",
        "supervisor status 3",
        "supervisor status 3 --watch --exit-status   (exit 1 failed, 10 waiting)",
        "supervisor status --json",
    ],
    "resume": ["supervisor resume 3"],
    "approve": [
        "supervisor approve 3",
        "supervisor approve 3 --as lead@example.com",
        "supervisor approve 3 --extend 2.00   (raise a paused budget by $2)",
    ],
    "reject": ['supervisor reject 3 --reason "Keep the public API as it is"'],
    "complete-task": ["supervisor complete-task 3", "supervisor complete-task 3 --merge --yes"],
    "events": ["supervisor events 3", "supervisor events 3 --json"],
    "demo": ["supervisor demo", "supervisor demo --keep ./supervisor-demo"],
    "init": ["supervisor init", "supervisor init --yes --no-check-gates"],
    "metrics": ["supervisor metrics --last 30d", "supervisor metrics --suggest"],
}


def examples(command: str) -> str:
    """The EXAMPLES section of `command`'s help ("" for the main one); each line its own
    paragraph, since typer folds single line breaks."""
    lines = _EXAMPLES.get(command, [])
    return "\n\n".join(["EXAMPLES", *(f"  $ {line}" for line in lines)]) if lines else ""


def arrange(app: typer.Typer) -> None:
    """Put each command in its panel, and the examples and exit codes where they belong."""
    order = [EVERYDAY, APPROVALS, SET_UP, TEAM, MAINTENANCE]
    for info in app.registered_commands:
        name = info.name or (info.callback.__name__.replace("_", "-") if info.callback else "")
        info.rich_help_panel = PANELS.get(name, MAINTENANCE)
        if name in _EXAMPLES and not info.epilog:
            info.epilog = examples(name)
    # Help lists panels in the order their first command was registered.
    app.registered_commands.sort(key=lambda i: order.index(str(i.rich_help_panel)))
    for group in app.registered_groups:
        group.rich_help_panel = PANELS.get(group.name or "", MAINTENANCE)
    app.info.epilog = examples("") + "\n\n" + EXIT_CODES
