"""How `supervisor --help` is arranged: commands grouped by what a person is doing, EXAMPLES on
the commands people start with, and the exit codes, in one table here rather than spread over the
command modules (each command keeps its own summary: its one-line docstring, or `help=` where a
summary is longer than a source line, since typer's command lists keep a docstring's line breaks).

`arrange` runs once, after every command is registered (supervisor/cli/app.py), and makes every
command a `Readable` one: its usage and options name what to type (tests/test_help.py).
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from typer.core import TyperArgument, TyperCommand

if TYPE_CHECKING:
    import typer
    from typer._click.core import Context
    from typer._click.types import ParamType

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
    "mcp": EVERYDAY,
    "web": EVERYDAY,
    "complete-task": EVERYDAY,
    "pr": EVERYDAY,
    "abandon": EVERYDAY,
    "demo": EVERYDAY,
    "eval": MAINTENANCE,
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
        "supervisor start-task --from-issue '#42'",
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
    "complete-task": [
        "supervisor complete-task 3",
        "supervisor complete-task 3 --merge --yes",
        "supervisor complete-task 3 --pr --draft",
    ],
    "events": ["supervisor events 3", "supervisor events 3 --json"],
    "demo": ["supervisor demo", "supervisor demo --keep ./supervisor-demo"],
    "eval": [
        "supervisor eval --cli claude --template _base   (spends your own key)",
        "supervisor eval --scripted honest --scripted cheating   (offline, no key)",
        "supervisor eval --task python-temperature --variant one_off --json",
    ],
    "init": ["supervisor init", "supervisor init --yes --no-check-gates"],
    "metrics": ["supervisor metrics --last 30d", "supervisor metrics --suggest"],
}


def examples(command: str) -> str:
    """The EXAMPLES section of `command`'s help ("" for the main one), one example a line, as
    `gh` shows them. Typer keeps an epilog's line breaks (its rich markup mode) but takes away
    the indentation common to all lines but the first (`inspect.cleandoc`): the leading empty
    line makes "EXAMPLES" one of those, so the examples keep theirs."""
    lines = _EXAMPLES.get(command, [])
    return "\n".join(["", "EXAMPLES", *(f"  $ {line}" for line in lines)]) if lines else ""


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
    app.info.epilog = examples("").lstrip("\n") + "\n\n" + EXIT_CODES
    readable(app)


def readable(app: typer.Typer) -> None:
    """Every command of `app` and of its groups, however deep, drawn as a `Readable` one."""
    for info in app.registered_commands:
        if info.cls in (None, TyperCommand):  # typer's default: no class of the command's own
            info.cls = Readable
    for group in app.registered_groups:
        if group.typer_instance is not None:
            readable(group.typer_instance)


class Readable(TyperCommand):
    """A command whose help names what to type: `start-task [OPTIONS] TASK`, `--repo PATH`.

    Typer (0.28) writes a required argument as `{description}` in the usage line, and labels
    every argument and option with its type (`<str>`, `<int>`, `<int range> [x>=1]`): a person
    types a task or an id. The metavar each parameter declares (`metavar="ID"`) says that; one
    that declares none is named after itself (`--namespace NAMESPACE`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for param in self.params:
            if isinstance(param, TyperArgument):
                param.metavar = param.metavar or (param.name or "").upper()
                param.type = _unlabelled(param.type)  # the metavar alone, no `<str>` beside it
            elif not getattr(param, "is_flag", True) and param.metavar is None:
                longest = max(param.opts, key=len)
                param.metavar = longest.lstrip("-").replace("-", "_").upper()

    def collect_usage_pieces(self, ctx: Context) -> list[str]:
        """`[OPTIONS] TASK`, `[OPTIONS] [ID]`, `[OPTIONS] [COMMAND]...`: click's own way."""
        pieces = [self.options_metavar] if self.options_metavar else []
        for param in self.get_params(ctx):
            if not isinstance(param, TyperArgument):
                pieces += param.get_usage_pieces(ctx)
                continue
            name = str(param.metavar)
            shown = name if param.required else f"[{name}]"
            pieces.append(shown + ("..." if param.nargs != 1 else ""))
        return pieces


def _unlabelled(kind: ParamType) -> ParamType:
    """`kind`, converting and checking as before, whose help label is empty: typer draws an
    argument's type beside its metavar unless the type names none (an empty one)."""
    quiet = copy.copy(kind)  # the standard types are shared singletons (click.INT)
    made = _UNLABELLED.get(type(kind))
    if made is None:
        made = type(f"Unlabelled{type(kind).__name__}", (type(kind),), {"get_metavar": _no_label})
        _UNLABELLED[type(kind)] = made
    quiet.__class__ = made
    return quiet


def _no_label(self: ParamType, param: object, ctx: object) -> str:
    return ""


_UNLABELLED: dict[type[ParamType], type[ParamType]] = {}
