"""Which component may change which file, and what a merge conflict leaves behind.

Why: the fan-out (supervisor.workflow.steps.components) runs components side by side on the
strength of the plan's file lists. A worker that strays outside its list breaks the promise
the schedule was built on: it may be merged first, and the component that owns the file then
loses. So what a worker changed (as git sees it, not as the worker tells it) is checked against
ownership when its worker finishes, before its gates and its merge.

The ownership rule:

- A file that components declare (list in their `files`; an entry ending in `/` covers the folder)
  belongs to them. No other component may change it, whether its owner runs, waits or is merged.
- A file no component declares belongs to the first component that changes it and passes this
  check (scheduling cannot protect it, as no running component declares it). The claim is recorded
  in the workflow's context (`claims`), so from then on the file counts as declared by that
  component, after a resume too; another component changing it afterwards is out of scope. A claim
  lapses when its component finally fails (its work never merged): the file is free again.

What happens to a component that strays is `limits.component_scope`:

- `feedback` (default): its attempt is not merged; it runs again, from the current integrated work,
  with feedback naming each out-of-scope file and its owner.
- `replan`: the step stops starting components, lets the running ones finish, and sends the work
  back to the step that made the plan, with feedback naming who changed whose files, so the planner
  can hand the files to the component that needs them. Merged components stay in the candidate.
- `allow`: no check (the file lists only guide scheduling); the merge may then conflict.

A merge conflict keeps the component's branch, and the user is told so. Nothing the user was told
is kept is ever moved or deleted, for the rest of the workflow (the context's `kept_branches`
outlives a new plan): a later attempt of that component (after `resume`) commits to a new branch
(`<component branch>--2`, ...), and the kept one is left as it is. The resumed attempt
starts from the integrated work with the conflict as feedback: both sides' diffs of the
conflicting files since their merge base.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from supervisor.state.store import EventSpec
from supervisor.workflow import plan_projects
from supervisor.workflow.steps.base import component_branch

if TYPE_CHECKING:
    from supervisor.core.dag import WorkGraph
    from supervisor.core.projects import ProjectMap
    from supervisor.state.store import Workflow
    from supervisor.workflow.steps.base import StepContext
    from supervisor.workspace.worktrees import Workspace

DIFF_BYTES = 30_000
"""Per side, in a conflict's feedback: enough to show the lines, bounded for the prompt."""


def _covers(declared: str, path: str) -> bool:
    return path == declared or (declared.endswith("/") and path.startswith(declared))


def owners(work: WorkGraph, claims: dict[str, str], path: str) -> list[str]:
    """The components `path` belongs to: those declaring it, else the one that claimed it."""
    declared = [c.id for c in work.components.values() if any(_covers(f, path) for f in c.files)]
    if declared:
        return declared
    return [claims[path]] if path in claims else []


def check(
    cid: str,
    changed: list[str],
    work: WorkGraph,
    claims: dict[str, str],
    projects: ProjectMap | None = None,
) -> tuple[dict[str, list[str]], list[str]]:
    """(out-of-scope file -> its owners, undeclared files this component would claim). In a
    monorepo a file outside the component's project (and the shared paths) is out of scope
    whoever declares it: its owner is that project."""
    strays: dict[str, list[str]] = {}
    new: list[str] = []
    outside = set(
        plan_projects.strays(projects, work.components[cid].project, changed) if projects else []
    )
    for path in changed:
        if projects and path in outside:
            strays[path] = [plan_projects.owner_label(projects, path)]
            continue
        found = owners(work, claims, path)
        if not found:
            new.append(path)
        elif cid not in found:
            strays[path] = found
    return strays, new


def scope_feedback(cid: str, strays: dict[str, list[str]], own: list[str]) -> str:
    named = "; ".join(
        f"{path} (belongs to {', '.join(_owner(o) for o in found)})"
        for path, found in strays.items()
    )
    return (
        f"Component '{cid}' changed files outside its declared set: {named}. Those changes were "
        "not merged: another component owns those files and builds them. Keep to your own files ("
        f"{', '.join(own) or 'the ones your component needs and no other component declares'}) "
        "and leave the others' files exactly as they are in your worktree; if your component "
        "really needs a change there, say so under blockers instead of making it."
    )


def _owner(owner: str) -> str:
    """A component by its id; a project (plan_projects.owner_label) as it is said."""
    return owner if owner.startswith(("project ", "no project")) else f"component {owner!r}"


def replan_feedback(strays: dict[str, dict[str, list[str]]]) -> str:
    lines = [
        f"- component '{cid}' changed {path}, which the plan gives to {', '.join(found)}"
        for cid, files in strays.items()
        for path, found in files.items()
    ]
    return (
        "Components changed files the plan gave to other components, so the plan's ownership "
        "does not match the work. Re-plan so that each file belongs to the component that has to "
        "change it (or make one depend on the other):\n" + "\n".join(lines)
    )


def conflict_feedback(
    ws: Workspace, cid: str, branch: str, commit: str, integrated: str, files: list[str]
) -> str:
    """What a resumed component is told about its conflict: both sides since their merge base."""
    base = ws.merge_base(integrated, commit)
    merged = ws.diff(base, integrated, DIFF_BYTES, paths=files) if base else "(no common base)"
    yours = ws.diff(base, commit, DIFF_BYTES, paths=files) if base else "(no common base)"
    return (
        f"MERGE CONFLICT: the previous attempt of component '{cid}' (commit {commit[:12]}, kept "
        f"on branch {branch}) could not be merged: it conflicts with work already merged from "
        f"other components in {', '.join(files)}. Your worktree now starts from that merged "
        "work. Redo what your attempt intended, on top of it, keeping the other side's change.\n"
        f"The other side (already merged, keep it):\n{merged}\n"
        f"Your previous attempt's change to those files (redo its intent):\n{yours}"
    )


def fresh_branch(ws: Workspace, default: str, kept: list[str]) -> str:
    """A branch for a component's next attempt that is none the user was told is kept."""
    n = 2
    while f"{default}--{n}" in kept or ws.branch_exists(f"{default}--{n}"):
        n += 1
    return f"{default}--{n}"


def keep_and_resume(
    c: StepContext,
    wf: Workflow,
    name: str,
    kept: list[str],
    cid: str,
    entry: dict[str, Any],
    branch: str,
) -> None:
    """Before a failed or conflicting component runs again: its branch, which the failure
    message named as kept, is left alone for good and the next attempt gets a new one.
    After a conflict, the event names the step that resolves it (the conflict itself is in
    that step's feedback since the conflict)."""
    if c.ws.branch_exists(branch) and branch not in kept:
        kept.append(branch)
    if branch in kept:
        entry["branch"] = fresh_branch(c.ws, component_branch(wf.task_branch, cid), kept)
    conflict = entry.get("conflict")
    if conflict is not None:
        c.store.add_event(
            wf.id,
            EventSpec(
                "component_conflict_resolving",
                step=f"{name}/{cid}",
                status="resuming",
                payload={
                    "component": cid,
                    "resolved_by": f"{name}/{cid}",
                    "kept_branch": conflict["branch"],
                    "kept_commit": conflict["commit"],
                    "files": conflict["files"],
                    "next_branch": entry.get("branch") or branch,
                },
            ),
        )
