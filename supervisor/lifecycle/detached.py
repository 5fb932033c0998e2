"""Tasks run by a supervisor process of their own, detached from the face that asked for them.

The TUI's `r` and the MCP server's `start_task`/`resume_task` must answer at once, while a task
runs for minutes or hours: the face hands the run to `supervisor resume <id>` in its own session,
so that closing the face (quitting the TUI, the MCP client ending its server) does not stop it,
as a second terminal would not. Its progress is read from the state database like any task's;
its output goes to `.supervisor/resume-<id>.log`.

Nothing of the repository runs here. The interpreter starts with `-P` and this code's directory
first on PYTHONPATH, so a `supervisor/` package in the repository (the working directory) is not
what `-m supervisor` imports; the log is opened with O_NOFOLLOW, so a symlink planted at its
name does not send the output into another file.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from supervisor.core.errors import StateError, SupervisorError
from supervisor.lifecycle import refusals, starting
from supervisor.lifecycle.opening import open_project
from supervisor.policy import budgets
from supervisor.state.locks import task_holder, task_lock

if TYPE_CHECKING:
    from supervisor.workflow.depth import Asked

SUPERVISOR: list[str] = [sys.executable, "-P", "-m", "supervisor"]
"""The command a detached run starts with (then `resume <id> --repo <root>`). Only a spec's
driver replaces it, with a copy of this command whose sandbox is the stand-in."""

ENDINGS = ("error:", "⏸")
"""How the command line begins what a command ends on: an error, or a wait for a person."""
SAID = 600
"""Characters of the last words `last_said` gives; the log has the rest."""


@dataclass
class Detached:
    """A task's run handed to a process of its own."""

    wf_id: int
    process: subprocess.Popen[bytes]
    log: Path

    def ended(self) -> int | None:
        """The exit code once the process has ended; None while it runs."""
        return self.process.poll()

    def last_said(self) -> str:
        return last_said(self.log)


def log_path(state_dir: Path, wf_id: int, command: str = "resume") -> Path:
    return state_dir / f"{command}-{wf_id}.log"


def last_said(log: Path) -> str:
    """What the run said last, as one line: on a failure its `error:` and `fix:`
    (supervisor/cli/failure.py), which the log holds wrapped over several lines; else the last
    line. At most SAID characters: the log holds text a worker wrote."""
    try:
        with log.open("rb") as f:
            f.seek(max(0, log.stat().st_size - 8192))
            tail = f.read().decode(errors="replace")
    except OSError:
        return ""
    lines = [line.strip() for line in tail.splitlines() if line.strip()]
    starts = [i for i, line in enumerate(lines) if line.startswith(ENDINGS)]
    said = " ".join(lines[starts[-1] :]) if starts else (lines[-1] if lines else "")
    return said if len(said) <= SAID else said[: SAID - 1] + "…"


def launch(
    repo: Path, state_dir: Path, wf_id: int, command: tuple[str, ...] = ("resume",)
) -> Detached:
    """`supervisor resume <wf_id>` (or another `command` of the task's) for task `wf_id`, in a
    session of its own."""
    import supervisor

    code = str(Path(supervisor.__file__).resolve().parent.parent)  # this code, not another copy
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([code, os.environ.get("PYTHONPATH", "")])}
    state_dir.mkdir(parents=True, exist_ok=True)
    log = log_path(state_dir, wf_id, "-".join(command))
    try:
        fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600)
    except OSError as e:
        raise StateError(
            f"Cannot write the resume's log {log}: {e.strerror}.",
            f"Remove {log} (it must be a plain file), or run `supervisor resume {wf_id}` in "
            "a terminal.",
        ) from e
    try:
        process = subprocess.Popen(
            [*SUPERVISOR, *command, str(wf_id), "--repo", str(repo)],
            stdin=subprocess.DEVNULL,
            stdout=fd,
            stderr=fd,
            start_new_session=True,
            cwd=repo,
            env=env,
        )
    finally:
        os.close(fd)
    return Detached(wf_id, process, log)


def start(
    description: str,
    path: Path,
    *,
    depth: Asked = "auto",
    template: str | None = None,
    budget_usd: float | None = None,
) -> Detached:
    """A task created here (the checks that need no sandbox, its row and its branch, as a
    submission to Temporal makes them), then run by a detached `resume`: the caller has its id
    at once. `template`: a workflow template by name, for this task only (it is pinned with the
    task's definition); `budget_usd`: the task's spend limit, pinned in its context as the
    engine would pin the configured one. It can only lower a configured limit, never raise it:
    raising a budget is `supervisor approve --extend`, a person's decision, and a caller here
    may be a model (the MCP face)."""
    overrides = {"workflow": {"template": template}} if template else None
    project = open_project(path, overrides)
    if project.settings.backend == "temporal":
        raise SupervisorError(
            "This repository runs its tasks on Temporal's workers (backend: temporal), and a "
            "task started in the background here would run on this host instead.",
            'Start it with `supervisor start-task "..." --yes` in a terminal; its status, '
            "events and diff can be followed from here.",
        )
    task = starting.prepare(description, project, depth=depth)
    if budget_usd is not None:
        limits = budgets.pin(project.settings)
        configured = limits["task"]["usd"]
        limits["task"]["usd"] = budget_usd if configured is None else min(configured, budget_usd)
        task.start.setdefault("context", {})[budgets.KEY] = limits
    store = project.writer()
    # A shared state's lease (the task's lock across hosts) over the writer's own connection,
    # as a submission takes it (supervisor/temporal/submit.py).
    shared = getattr(store, "engine", None) if getattr(store, "url", None) else None
    try:
        wf = starting.create(task, store)
        with task_lock(project.state_dir, wf.id, record=False, engine=shared):
            starting.begin(task, store, wf)
    finally:
        store.close()
    return launch(project.root, project.state_dir, wf.id)


def resume(wf_id: int, path: Path) -> Detached:
    """`supervisor resume <wf_id>`, detached. What the caller can be told at once is refused
    here (an unknown id, an abandoned task, one a live supervisor runs); the rest, such as a
    decision still missing, is the resume's to say, in its log."""
    project = open_project(path)
    with project.store() as store:
        wf = store.workflow(wf_id)
    refusals.not_abandoned(wf, "resume")
    refusals.not_running_elsewhere(wf, task_holder(project.state_dir, wf_id))
    return launch(project.root, project.state_dir, wf_id)


def sync(wf_id: int, path: Path) -> Detached:
    """`supervisor pr sync <wf_id>`, detached: its round runs for as long as a resume does. A
    task with no pull request, or one a live supervisor runs, is refused here; the forge's
    answer is the sync's to say, in its log."""
    project = open_project(path)
    with project.store() as store:
        wf = store.workflow(wf_id)
        opened = store.events(wf_id, of_type="pull_request")
    refusals.not_abandoned(wf, "pr sync")
    refusals.not_running_elsewhere(wf, task_holder(project.state_dir, wf_id))
    if not opened:
        raise StateError(
            f"Workflow {wf_id} has no pull request to sync with.",
            f"Open one first: `supervisor complete-task {wf_id} --pr`.",
        )
    return launch(project.root, project.state_dir, wf_id, ("pr", "sync"))
