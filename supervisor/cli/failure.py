"""How a failed command ends: one message (cause, then fix) and the error's exit code.

Errors from the project's hierarchy end here and nowhere else, for the full command line and the
quick entry point alike. Set SUPERVISOR_DEBUG=1 to see the traceback instead.
"""

from __future__ import annotations

import os
import sys
from typing import NoReturn

from rich.console import Console

from supervisor.core.errors import ApprovalRequired, SupervisorError
from supervisor.guard.textsafe import guard, markup

# Guarded: whatever a command prints, no control character of worker or repository text
# reaches the terminal (supervisor/guard/textsafe.py), even where a call site forgot to escape.
console = guard(Console())
err_console = guard(Console(stderr=True))


def report(e: SupervisorError) -> NoReturn:
    if isinstance(e, ApprovalRequired):
        # The message quotes the policy's reasons: a reviewer's words, shown as text.
        err_console.print(f"[yellow]⏸ {markup(e.message)}[/yellow]", highlight=False)
        if e.hint:
            err_console.print(f"  next: {markup(e.hint)}", highlight=False)
        sys.exit(e.exit_code)
    if os.environ.get("SUPERVISOR_DEBUG"):
        raise e
    from supervisor.core.redaction import redact

    # An error may quote worker or gate output: printed redacted, like the event log.
    # Printed as text, not markup: `cli: [claude, codex]` in a message is not a style tag.
    err_console.print(f"[red]error:[/red] {markup(redact(e.message)[0])}", highlight=False)
    if e.hint:
        err_console.print(f"  fix: {markup(e.hint)}", highlight=False)
    sys.exit(e.exit_code)
