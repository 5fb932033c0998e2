"""A repository's task state for the commands a person runs between runs: status, events, approve
and reject.

They look up the repository's root and nothing else: no configuration, Docker, engine or workers,
so they start fast (and still work while the configuration is being edited). Reads go through the
sqlite3 reader (supervisor.state.reader); the one write here, a decision, through `Store`.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import TYPE_CHECKING

from supervisor.core.errors import StateError
from supervisor.state.reader import open_reader

if TYPE_CHECKING:
    from collections.abc import Iterator

    from supervisor.state.reader import StateReader
    from supervisor.state.records import Workflow
    from supervisor.state.store import Store


STATE_DIR = ".supervisor"
"""supervisor.workspace.host_git.STATE_DIR, not imported: it brings git's runner with it."""


def state_db(path: Path) -> Path:
    """The state database of the repository that holds `path`.

    When the nearest folder with a `.git` above `path` has a state database, that is it, found
    without running git (two processes, a third of a `status`); anything else (no database yet,
    GIT_DIR or GIT_WORK_TREE set) asks git, which also names what is wrong."""
    from supervisor.state.location import state_db_beside_git

    found = state_db_beside_git(path)
    if found is not None:
        return found
    from supervisor.workspace.host_git import find_repo_root

    return find_repo_root(path) / STATE_DIR / "state.db"


@contextlib.contextmanager
def reading(path: Path) -> Iterator[StateReader | Store]:
    with open_reader(state_db(path)) as state:
        yield state


def workflows(path: Path) -> list[Workflow]:
    from supervisor.state.location import state_url

    db = state_db(path)
    if not db.exists() and not state_url():
        return []
    with open_reader(db) as state:
        return state.workflows()


ELSEWHERE = -1
"""The `supervisor_pid` of a task a process on another host runs (shared PostgreSQL state)."""


def supervisors(path: Path, found: list[Workflow]) -> dict[int, int | None]:
    """For each running workflow, the pid of the supervisor running it (ELSEWHERE: a process on
    another host), or None when none does (it crashed or was killed: `supervisor resume <id>`
    continues it, beside other tasks)."""
    return supervisors_in(state_db(path).parent, found)


def supervisors_in(state_dir: Path, found: list[Workflow]) -> dict[int, int | None]:
    """`supervisors`, for the state folder itself (the TUI has it; a shared database's has no
    repository folder to look up)."""
    from supervisor.state.location import state_url
    from supervisor.state.locks import task_holder

    pids = {wf.id: task_holder(state_dir, wf.id) for wf in found if wf.status == "running"}
    url = state_url()
    orphans = [wf_id for wf_id, pid in pids.items() if pid is None]
    if url and orphans:  # a shared database: the task may run on another host
        from supervisor.state.shared_lock import held_tasks

        pids.update(dict.fromkeys(held_tasks(url, orphans), ELSEWHERE))
    return pids


def runners(path: Path, found: list[Workflow], pids: dict[int, int | None]) -> dict[int, str]:
    """Who runs each running task, as every host sees it (supervisor/state/runner_view.py)."""
    from supervisor.state.runner_view import labels

    if not any(wf.status in ("running", "failed") for wf in found):
        return {}
    with reading(path) as state:
        return labels(state, found, pids)


def decide(
    wf_id: int,
    path: Path,
    *,
    approve: bool,
    reason: str | None = None,
    approver: str | None = None,
    extend_usd: float | None = None,
    extend_tokens: int | None = None,
) -> Workflow:
    """Record a human decision on the pending approval (`resume` acts on it), or raise the
    budget of a workflow paused on it. The approver is `approver` or git's user.email; an
    approval that the policy gives to several people (supervisor/policy/approval_policy.py) is
    decided
    by the last of them, and one person's second approval is refused."""
    from supervisor.state.store import EventSpec, Store

    with Store(state_db(path)) as store:
        wf = store.workflow(wf_id)
        if wf.status == "budget_exceeded" or extend_usd or extend_tokens:
            from supervisor.policy import budgets

            if not approve:
                raise StateError(
                    f"Workflow {wf_id} waits on its budget, not on an approval to reject.",
                    f"Raise it (`supervisor approve {wf_id} --extend 2.00`) or `supervisor "
                    f"abandon {wf_id}`.",
                )
            ctx = budgets.extend(wf, extend_usd, extend_tokens)
            store.update_workflow(
                wf_id,
                status=wf.status,
                current_step=wf.current_step,
                context=ctx,
                events=[
                    EventSpec(
                        "budget_extended",
                        step=wf.current_step,
                        payload={"usd": extend_usd, "tokens": extend_tokens, "by": approver},
                    )
                ],
            )
            return store.workflow(wf_id)
        approval = store.latest_approval(wf_id)
        if wf.status == "awaiting_approval" and approval is not None:
            refuse_decided(wf_id, approval.step, approval.status, approve)
        if wf.status != "awaiting_approval" or approval is None or approval.status != "pending":
            raise StateError(
                f"Workflow {wf_id} is not waiting for approval (status: {wf.status}).",
                f"Run `supervisor status {wf_id}` to see where it stands.",
            )
        from supervisor.workspace.host_git import find_repo_root

        who = approver or git_email(find_repo_root(path))
        if not approve:
            store.decide_approval(approval.id, "rejected", reason, approver=who)
            return store.workflow(wf_id)
        risk = wf.context.get("risk") or {}
        required = 1
        if risk.get("step") == approval.step and risk.get("action") == "require_multi_approval":
            required = int(risk.get("approvers") or 2)
            allowed = risk.get("approvers_from") or []
            if allowed and who not in allowed:
                raise StateError(
                    f"{who} is not one of the approvers the policy names for this "
                    f"{risk.get('level')}-risk change ({', '.join(allowed)}).",
                    "Ask one of them, or approve as yourself with `--as <email>` if you are.",
                )
        store.vote_approval(approval.id, who, required)
        if reason:
            store.add_event(
                wf_id,
                EventSpec(
                    "approval_comment", approval.step, payload={"approver": who, "comment": reason}
                ),
            )
        return store.workflow(wf_id)


def refuse_decided(wf_id: int, step: str, decided: str, approve: bool) -> None:
    """An approval already decided is not decided again: say what was decided and that a
    resume acts on it (the second `approve` used to say "not waiting for approval (status:
    awaiting_approval)")."""
    from supervisor.core.errors import AlreadyDecidedError

    resume = f"supervisor resume {wf_id}"
    if decided == "approved":
        raise AlreadyDecidedError(
            f"Workflow {wf_id} is already approved (step '{step}'); it goes on when resumed."
            + ("" if approve else " A rejection now would change nothing."),
            f"Continue it with `{resume}`"
            + ("." if approve else "; reject at its next approval, or `supervisor abandon`."),
            decision=decided,
        )
    if decided == "rejected":
        raise AlreadyDecidedError(
            f"Workflow {wf_id}'s step '{step}' is already rejected; a resume runs it again "
            "with the reason given.",
            f"Run `{resume}`; approve the step's next result when it asks again.",
            decision=decided,
        )


def git_email(repo: Path) -> str:
    """Who approves: git's user.email for this repository (the user's own config), else the
    login name on this host, so that every approval names someone."""
    import getpass
    import socket

    from supervisor.core import process
    from supervisor.core.errors import SupervisorError
    from supervisor.workspace import treedata

    try:
        email = process.run(
            ["git", *treedata.SAFE_CONFIG, "-C", str(repo), "config", "user.email"], check=False
        ).stdout.strip()
    except SupervisorError:
        email = ""
    return email or f"{getpass.getuser()}@{socket.gethostname()}"
