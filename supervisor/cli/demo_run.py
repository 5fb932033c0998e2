"""`supervisor demo` on the terminal: the demo's run, shown as a real task's is.

The demo itself (its repository, its scripted model, its config) is lifecycle/demo.py; this is
its face: it prints progress through the CLI's reporter and the task's detail at the end.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from supervisor.cli.interrupt import INTERRUPTED
from supervisor.cli.reporter import RichReporter
from supervisor.core import process
from supervisor.core.errors import ToolMissingError
from supervisor.lifecycle.demo import (
    TASK,
    check_keep,
    demo_script,
    make_demo_repo,
    setup_missing,
    write_project_config,
)
from supervisor.views.render import workflow_detail

if TYPE_CHECKING:
    from rich.console import Console


def interrupted(err_console: Console, repo: Path) -> NoReturn:
    """Ctrl-C (or SIGTERM) during the demo: unlike a real task's, its model API is the demo's
    own scripted server, which ends with this process, so `resume` could only fail; say so,
    and how to see the demo again, instead of the `resume` line a real task gets."""
    err_console.print(
        "Interrupted. The demo's scripted model API ended with it, so its task cannot be "
        f"resumed; run `supervisor demo --keep {repo}` to run it again there (or `supervisor "
        "demo` for a fresh one).",
        highlight=False,
        markup=False,
    )
    raise SystemExit(INTERRUPTED)


def run_demo(console: Console, err_console: Console, keep: Path | None) -> None:
    from supervisor.core import resources
    from supervisor.fakeapi import ScriptedModelServer, load_script
    from supervisor.lifecycle import opening as project
    from supervisor.lifecycle import tasks

    missing = setup_missing(resources.NODE_MODULES)
    if missing:
        raise ToolMissingError(
            f"The demo needs what setup installs, and {', '.join(missing)} "
            f"{'is' if len(missing) == 1 else 'are'} not installed yet.",
            f"Run `{resources.setup_command()}` first, then `supervisor demo` again.",
        )
    note = check_keep(keep) if keep is not None else None
    started = time.monotonic()
    workdir = Path(tempfile.mkdtemp(prefix="supervisor-demo-")) if keep is None else keep
    repo = make_demo_repo(workdir / "calc" if keep is None else keep)
    if note:
        console.print(note, highlight=False, markup=False)
    console.print(f"[bold]Demo repository:[/bold] {repo}")
    # The scripted server plays the model; no real key is needed or sent anywhere.
    os.environ["ANTHROPIC_API_KEY"] = "demo-key-not-a-secret"
    with ScriptedModelServer(load_script(demo_script())) as server:
        write_project_config(repo, server.url)
        console.print(f"[bold]Scripted model API:[/bold] {server.url}")
        console.print(f"[bold]Task:[/bold] {TASK}\n")
        try:
            wf = tasks.start_task(
                TASK, repo, cli="claude", reporter=RichReporter(err_console), depth="auto"
            )
        except KeyboardInterrupt:
            interrupted(err_console, repo)
        requests = len(server.requests)
    elapsed = time.monotonic() - started
    with project.reading(repo) as store:
        console.print(workflow_detail(store, wf.id))
    log = process.run(["git", "-C", str(repo), "log", "--oneline", wf.task_branch]).stdout
    console.print(f"\n[bold]{wf.task_branch}[/bold]:\n{log}")
    console.print(
        f"Demo finished in {elapsed:.1f} s: workflow {wf.id} {wf.status}, "
        f"{requests} model API requests answered by the script."
    )
    console.print(
        f"Look around: cd {repo} && supervisor status {wf.id} && supervisor events {wf.id}"
    )
