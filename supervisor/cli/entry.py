"""The `supervisor` command's entry point.

`supervisor status` is what a person types most, often in a loop, and typer spends a third of
that command's time building a parser for every command before it runs one. Its plain forms
(`status [ID] [--repo PATH] [--json]`), `events ID --json [--repo PATH]` and a plain submission
(`start-task DESCRIPTION --yes --backend temporal ...`, supervisor/cli/submission.py) are
answered here without loading typer; anything else,
`status --help` and `status --watch` included, goes to the full command line
(supervisor/cli/app.py), which parses it as always. Both print through
supervisor/cli/status_view.py, so the output is the same (tests/test_cli_entry.py).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from collections.abc import Callable

    from rich.console import Console


class StatusArgs(NamedTuple):
    workflow_id: int | None
    repo: Path
    as_json: bool


def quick_status(args: list[str]) -> StatusArgs | None:
    """`status`'s plain arguments, or None for anything the full parser should see."""
    if args[:1] != ["status"]:
        return None
    workflow_id: int | None = None
    repo = Path()
    as_json = False
    rest = iter(args[1:])
    for arg in rest:
        if arg == "--json" and not as_json:
            as_json = True
        elif arg == "--repo":
            value = next(rest, None)
            if value is None or value.startswith("-"):
                return None
            repo = Path(value)
        elif arg.startswith("--repo=") and len(arg) > len("--repo="):
            repo = Path(arg.removeprefix("--repo="))
        elif arg.isascii() and arg.isdigit() and workflow_id is None:
            workflow_id = int(arg)
        else:
            return None
    return StatusArgs(workflow_id, repo, as_json)


def quick_events(args: list[str]) -> tuple[int, Path] | None:
    """`events ID --json [--repo PATH]`: the workflow id and repository, or None for anything
    the full parser should see (the table form draws with rich anyway)."""
    if args[:1] != ["events"] or "--json" not in args:
        return None
    parsed = quick_status(["status", *(a for a in args[1:] if a != "--json"), "--json"])
    if parsed is None or parsed.workflow_id is None or args.count("--json") != 1:
        return None
    return parsed.workflow_id, parsed.repo


def _console() -> Console:
    from supervisor.cli.failure import console
    from supervisor.cli.plain import fit_to_output

    fit_to_output(console)
    return console


# The cyclic collector's first generation runs every 700 new container objects by default: a
# command importing pydantic, SQLAlchemy and Temporal's client (~86,000 tracked objects, nearly
# all kept for the process's life) ran ~200 collections that freed ~1,800 objects, 5-14 % of
# its start-up CPU. Every 20,000 instead: what waits uncollected is bounded and young.
GC_THRESHOLD = 20_000


def main() -> None:
    import atexit
    import gc

    gc.set_threshold(GC_THRESHOLD, *gc.get_threshold()[1:])
    # At exit, the interpreter's teardown then collects nothing: it walked every object the
    # command made (SQLAlchemy's, pydantic's...) in several full collections, 0.1-0.5 s after a
    # submission had printed its answer, to free what the process's exit frees anyway.
    atexit.register(gc.freeze)
    _run()


def _run() -> None:
    from supervisor.cli.submission import parse

    submitting = parse(sys.argv[1:])
    if submitting is not None:
        from supervisor.cli.submission import run

        _answer(lambda: run(submitting))
        return
    events = quick_events(sys.argv[1:])
    if events is not None:
        from supervisor.cli.events_json import stream_events

        _answer(lambda: stream_events(events[1], events[0]))
        return
    quick = quick_status(sys.argv[1:])
    if quick is None:
        from supervisor.cli.app import main as full

        full()
        return
    from supervisor.cli.status_view import show_status

    _answer(lambda: show_status(_console, quick.repo, quick.workflow_id, as_json=quick.as_json))


def _answer(command: Callable[[], None]) -> None:
    """Run a quick command; its error ends the process as the full command line's would."""
    from supervisor.core.errors import SupervisorError

    try:
        command()
    except SupervisorError as e:
        from supervisor.cli.failure import err_console, report
        from supervisor.cli.plain import fit_to_output

        fit_to_output(err_console)
        report(e)
