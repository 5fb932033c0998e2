"""Where a task stands, checked before a lifecycle command acts on it, and the refusal it gets.

`resume`, `complete-task` and `abandon` each act on one state of a task: a resume continues an
unfinished task, a landing takes a completed one that has not landed yet, an abandon removes
what is still there. Run in any other state, each is refused before it changes anything (no
branch made again for a resume of an abandoned task, no empty commit for a second landing), and
the refusal names the state and the command that fits it. Pure: the caller reads the workflow,
its landing record and the pid of the supervisor running it; nothing here touches git or state.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from supervisor.core.errors import StateError, WorkflowBusyError
from supervisor.state.status_label import decision

if TYPE_CHECKING:
    from supervisor.state.records import Workflow

LANDED = "task_merged"
"""The event `complete-task` records: `into` (the base branch), `sha` (its new tip), `mode`."""


def landed(record: dict[str, Any] | None) -> str:
    """`squash into main as <sha>`: what a landing record says, for a preview or a refusal."""
    if not record:
        return ""
    return f"{record.get('mode', 'merge')} into {record.get('into')} as {record.get('sha')}"


def start_again(wf: Workflow) -> str:
    """The command that starts the same task anew, quoted for a shell (a description too long
    or on several lines is left for the person to copy from `status`)."""
    text = wf.description.strip()
    if "\n" in text or len(text) > 120:
        return f'supervisor start-task "..." (the task as `supervisor status {wf.id}` shows it)'
    escaped = "".join("\\" + c if c in '"\\$`' else c for c in text)
    return f'supervisor start-task "{escaped}"'


def not_abandoned(wf: Workflow, command: str) -> None:
    """Refuse `command` (`resume`, `complete-task`, `abandon`) on an abandoned task: its branch
    and refs are gone, and nothing brings them back but a new start."""
    if wf.status != "abandoned":
        return
    if command == "abandon":
        raise StateError(
            f"Workflow {wf.id} was abandoned already; its branches, refs and worktrees were "
            "removed then (`supervisor events "
            f"{wf.id}` lists them, with their SHAs).",
            f"Nothing is left to remove. To do the task again: {start_again(wf)}",
        )
    what = "nothing to resume" if command == "resume" else "nothing to land"
    raise StateError(
        f"Workflow {wf.id} was abandoned: its branch {wf.task_branch} and its refs were removed, "
        f"so there is {what}.",
        f"To do the task again: {start_again(wf)}",
    )


def not_running_elsewhere(wf: Workflow, pid: int | None) -> None:
    """Refuse to act on a task a live supervisor (`pid`) runs, before any preview."""
    if pid is None:
        return
    holder = f"pid {pid}" if pid > 0 else "a process on another host"
    raise WorkflowBusyError(
        f"A supervisor ({holder}) is running workflow {wf.id} right now.",
        f"Wait for it to finish (`supervisor status {wf.id} --watch`), or stop that process; "
        f"then `supervisor resume {wf.id}` continues the task.",
    )


def landable(wf: Workflow, pid: int | None, record: dict[str, Any] | None) -> None:
    """`complete-task` takes a completed task that has not landed (`record`: its landing, still
    on the base branch) and no supervisor runs (`pid`)."""
    not_abandoned(wf, "complete-task")
    if record:
        raise StateError(
            f"Workflow {wf.id} was landed already: {landed(record)}.",
            f"Nothing is left to land; `supervisor abandon {wf.id}` removes its branch "
            f"{wf.task_branch} and refs.",
        )
    if wf.status == "completed":
        return
    not_running_elsewhere(wf, pid)
    state, fix = _unfinished(wf)
    raise StateError(
        f"Workflow {wf.id} {state}, not completed; its branch {wf.task_branch} is kept as it is.",
        f"{fix}, or merge the branch by hand.",
    )


def _unfinished(wf: Workflow) -> tuple[str, str]:
    """How an unfinished task stands, and what finishes it."""
    resume = f"supervisor resume {wf.id}"
    if wf.status == "awaiting_approval":
        if decision(wf) is not None:
            return f"is {decision(wf)} and waits for a resume", f"Continue it: `{resume}`"
        step = wf.context.get("approval_step") or wf.current_step
        return (
            f"waits for approval (step {step!r})",
            f"Approve it (`supervisor approve {wf.id}`), then `{resume}`",
        )
    if wf.status == "budget_exceeded":
        return (
            "is paused at its budget",
            f"Raise it (`supervisor approve {wf.id} --extend <dollars>`), then `{resume}`",
        )
    if wf.status == "running":
        return "is running (no supervisor)", f"Finish it first: `{resume}`"
    return f"is {wf.status}", f"Finish it first (`{resume}`)"
