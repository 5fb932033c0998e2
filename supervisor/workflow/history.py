"""What the task branch may receive, and the records that decide it.

The branch only ever gets commits the supervisor writes itself: one per `commit` action, the
candidate's tree on top of the branch tip (`git commit-tree`), so nothing a worker committed along
the way (a first attempt that failed its gate, a component commit, a merge) is reachable from it.
Those attempts stay inspectable under `refs/supervisor/wf<id>/attempts/...`.

Gate passes are recorded by *tree hash*: a tree that passed `test` passed it whatever commit holds
it, and the commit action refuses a tree that has not passed every gate the workflow defines.
"""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from supervisor.core import process
from supervisor.core.errors import GitError, MergeConflictError
from supervisor.workspace.host_git import IDENTITY, _git
from supervisor.workspace.treedata import SAFE_CONFIG

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from supervisor.core.config import WorkflowDef
    from supervisor.workspace.worktrees import Workspace


def attempt_ref(wf_id: int, step: str, step_id: int) -> str:
    """Where one implementation attempt is kept for audit (`implement/calc/step7`)."""
    safe = "/".join(re.sub(r"[^A-Za-z0-9._-]+", "-", part) or "x" for part in step.split("/"))
    return f"refs/supervisor/wf{wf_id}/attempts/{safe}/step{step_id}"


def record_gate_pass(ctx: dict[str, Any], gate: str, tree: str) -> dict[str, list[str]]:
    """The workflow's gate record with `gate` added for `tree` (a new dict, for an Outcome)."""
    passed = {t: list(g) for t, g in ctx.get("gates_passed", {}).items()}
    names = passed.setdefault(tree, [])
    if gate not in names:
        names.append(gate)
    return passed


def record_review(ctx: dict[str, Any], tree: str, roles: list[str]) -> dict[str, list[str]]:
    """The workflow's review record with `roles` approving `tree`."""
    reviewed = {t: list(r) for t, r in ctx.get("reviewed", {}).items()}
    names = reviewed.setdefault(tree, [])
    names += [r for r in roles if r not in names]
    return reviewed


def required_gates(definition: WorkflowDef) -> list[str]:
    """Every gate a `gate:` step of the workflow runs: the commit needs each on its exact tree."""
    found: list[str] = []
    for step in definition.steps.values():
        if step.gate and step.gate not in found:
            found.append(step.gate)
    return found


def missing_gates(ctx: dict[str, Any], definition: WorkflowDef, tree: str) -> list[str]:
    passed = set(ctx.get("gates_passed", {}).get(tree, []))
    return [g for g in required_gates(definition) if g not in passed]


def commit_message(description: str, wf_id: int, ctx: dict[str, Any], tree: str) -> str:
    """The plan items, the gates passed on this tree and the reviewers who approved it."""
    lines = [description.strip().splitlines()[0][:72] if description.strip() else "AI task", ""]
    items = [
        f"- {c.get('id')}: {c.get('description', '')}".rstrip(": ")
        for phase in (ctx.get("plan") or {}).get("phases", [])
        for c in phase.get("components", [])
    ]
    if items:
        lines += ["Plan:", *items, ""]
    gates = ctx.get("gates_passed", {}).get(tree, [])
    lines.append(f"Gates passed: {', '.join(gates) if gates else 'none defined'}")
    reviewers = ctx.get("reviewed", {}).get(tree, [])
    lines.append(f"Reviewed by: {', '.join(reviewers) if reviewers else 'no reviewer'}")
    from supervisor.core.degradation import lines as degraded_lines

    lines += degraded_lines(ctx)
    lines.append(f"Supervisor-Workflow: {wf_id}")
    return "\n".join(lines) + "\n"


def commit_tree(
    repo: Path, tree: str, parent: str, message: str, identity: Sequence[str] = IDENTITY
) -> str:
    """A commit of `tree` whose only parent is `parent`; no working tree, no hooks. `identity`:
    `-c user.name=... -c user.email=...`, the supervisor's own unless a landing passes the
    user's (supervisor/lifecycle/completion.py)."""
    return _git(repo, *identity, "commit-tree", tree, "-p", parent, "-m", message).stdout.strip()


def refs_under(repo: Path, prefix: str) -> list[str]:
    out = _git(repo, "for-each-ref", "--format=%(refname)", prefix).stdout
    return [line for line in out.splitlines() if line]


def merged_tree(repo: Path, base: str, other: str) -> str:
    """The tree of merging `other` into `base` (objects only); a conflict changes nothing."""
    result = _git(
        repo, "merge-tree", "--write-tree", "--name-only", "--no-messages", base, other, check=False
    )
    lines = result.stdout.splitlines()
    if result.returncode == 1:
        raise MergeConflictError(
            f"Applying {other[:12]} onto {base[:12]} conflicts in: {', '.join(lines[1:])}.",
            "Nothing was changed; merge by hand (git merge), or choose --merge.",
            files=lines[1:],
        )
    if result.returncode != 0 or not lines:
        raise GitError(
            f"git merge-tree failed: {result.stderr.strip()[-400:]}",
            "Check that git is 2.38 or newer (git --version).",
        )
    return lines[0]


def replayed_tree(repo: Path, onto: str, parent: str, commit: str) -> str:
    """`onto`'s tree with the change `parent..commit` applied, in a throw-away index."""
    patch = _git(
        repo, "diff", "--binary", "--no-color", "--no-ext-diff", "--no-textconv", parent, commit
    ).stdout
    with tempfile.TemporaryDirectory(prefix="supervisor-index-") as tmp:
        env = {**os.environ, "GIT_INDEX_FILE": str(Path(tmp) / "index")}
        git = ["git", *SAFE_CONFIG, "-C", str(repo)]
        process.run([*git, "read-tree", onto], env=env)
        if patch:
            applied = process.run(
                [*git, "apply", "--cached", "--whitespace=nowarn"],
                input_text=patch,
                env=env,
                check=False,
            )
            if applied.returncode != 0:
                raise MergeConflictError(
                    f"Replaying {commit[:12]} onto {onto[:12]} conflicts: "
                    f"{(applied.stderr or applied.stdout).strip()[-600:]}",
                    "Nothing was changed; choose --merge or --squash, or rebase by hand.",
                    files=[],
                )
        return process.run([*git, "write-tree"], env=env).stdout.strip()


def squashed(
    repo: Path, base_tip: str, task_tip: str, message: str, identity: Sequence[str] = IDENTITY
) -> str:
    """One commit on `base_tip` holding everything the task branch did."""
    return commit_tree(repo, merged_tree(repo, base_tip, task_tip), base_tip, message, identity)


def rebased(
    repo: Path,
    base_tip: str,
    task_base: str,
    task_tip: str,
    identity: Sequence[str] = IDENTITY,
    amend: Callable[[str], str] = str,
) -> str:
    """The task branch's commits replayed one by one onto `base_tip`, messages kept (`amend`
    may add to each, e.g. trailers)."""
    commits = _git(
        repo, "rev-list", "--reverse", "--first-parent", f"{task_base}..{task_tip}"
    ).stdout.split()
    onto = base_tip
    for commit in commits:
        parent = _git(repo, "rev-parse", f"{commit}^").stdout.strip()
        tree = replayed_tree(repo, onto, parent, commit)
        message = amend(_git(repo, "log", "-1", "--format=%B", commit).stdout)
        onto = commit_tree(repo, tree, onto, message, identity)
    return onto


def land(ws: Workspace, branch: str, new: str, old: str) -> None:
    """Move `branch` from `old` to its descendant `new`, through the user's checkout (a
    fast-forward merge) when it is checked out there, refusing over uncommitted changes."""
    if ws.current_branch() == branch:
        if not ws.is_clean():
            raise GitError(
                f"{branch} is checked out with uncommitted changes; landing the task now would "
                "mix them with the task's.",
                "Commit or stash your changes, then run complete-task again.",
            )
        _git(ws.repo, "merge", "--ff-only", new)
    else:
        ws.set_ref(f"refs/heads/{branch}", new, old)


def default_mode(ctx: dict[str, Any]) -> str:
    """Squash a single-component task (one readable commit), merge a larger one."""
    phases = (ctx.get("plan") or {}).get("phases", [])
    components = [c for phase in phases for c in phase.get("components", [])]
    return "squash" if len(components) <= 1 else "merge"
