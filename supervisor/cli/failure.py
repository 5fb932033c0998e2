"""How a failed command ends: one message (cause, then fix) and the error's exit code.

Errors from the project's hierarchy end here and nowhere else, for the full command line and the
quick entry point alike. Set SUPERVISOR_DEBUG=1 to see the traceback instead.
"""

from __future__ import annotations

import os
import sys
from typing import NoReturn

from rich.console import Console
from rich.markup import escape

from supervisor.errors import ApprovalRequired, SupervisorError

console = Console()
err_console = Console(stderr=True)


def report(e: SupervisorError) -> NoReturn:
    if isinstance(e, ApprovalRequired):
        err_console.print(f"[yellow]⏸ {e.message}[/yellow]")
        if e.hint:
            err_console.print(f"  next: {e.hint}")
        sys.exit(e.exit_code)
    if os.environ.get("SUPERVISOR_DEBUG"):
        raise e
    from supervisor.redaction import redact

    # An error may quote worker or gate output: printed redacted, like the event log.
    # Printed as text, not markup: `cli: [claude, codex]` in a message is not a style tag.
    err_console.print(f"[red]error:[/red] {escape(redact(e.message)[0])}", highlight=False)
    if e.hint:
        err_console.print(f"  fix: {escape(e.hint)}", highlight=False)
    sys.exit(e.exit_code)
