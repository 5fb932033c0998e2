"""What the commands do: start, resume, approve and reject tasks, and read their state.

The CLI layer only parses arguments and calls these. Everything that can fail before a task exists
(repository, configuration, Docker, image, CLI binary, credentials, a task already running) is
checked first, so a refused start leaves nothing behind.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from supervisor import credentials, notify, process, protected, trust
from supervisor.approvals import REQUEST_KEY
from supervisor.config import Settings, WorkflowDef, load_settings, load_workflow, workflow_source
from supervisor.doctor import clis_in_use
from supervisor.errors import (
    ApprovalRequired,
    ConfigError,
    SandboxError,
    StateError,
    StepFailedError,
    SupervisorError,
    ToolMissingError,
)
from supervisor.redaction import redact
from supervisor.sandbox.docker import LABEL_REPO, DockerSandbox, RunSpec, repo_label
from supervisor.state.access import decide  # noqa: F401 (re-exported: tasks.decide)
from supervisor.state.store import EventSpec, Store, Workflow
from supervisor.workers.base import adapter_for
from supervisor.workflow.engine import Engine, Reporter
from supervisor.workflow.lock import repo_lock
from supervisor.workspace import Workspace, find_repo_root

if TYPE_CHECKING:
    from collections.abc import Iterator

    from supervisor.context import Pack

STATE_DIR = ".supervisor"


@dataclass
class Project:
    """A repository the supervisor works on, with its settings and state."""

    root: Path
    settings: Settings
    workspace: Workspace

    @property
    def state_dir(self) -> Path:
        return self.root / STATE_DIR

    def store(self) -> Store:
        return Store(self.state_dir / "state.db")


def open_project(path: Path, overrides: dict[str, Any] | None = None) -> Project:
    root = find_repo_root(path)
    return Project(root, load_settings(root, overrides), Workspace(root))


def open_sandbox(project: Project, clis: list[str]) -> DockerSandbox:
    """Engine up, image built, every CLI the workflow uses inside it with credentials present;
    or a clear error, before anything is created."""
    for cli in clis:
        adapter_for(cli)
        credentials.collect(cli, _cli_settings(project.settings, cli))
    sandbox = DockerSandbox(project.settings.sandbox.image, project.settings.sandbox.egress_network)
    sandbox.check_image()
    binaries = [adapter_for(cli).binary for cli in clis]
    probe = sandbox.run(
        RunSpec(
            argv=[
                "sh",
                "-c",
                "; ".join(f"command -v {b} >/dev/null || echo {b}" for b in binaries),
            ],
            worktree=_empty_dir(project),
            timeout=60,
            labels={LABEL_REPO: repo_label(project.root)},  # found by clean-up if killed
        )
    )
    absent = probe.stdout.split()
    if probe.exit_code != 0 or absent:
        raise ToolMissingError(
            f"The {', '.join(repr(b) for b in absent) or 'required'} CLI is not installed in the "
            f"sandbox image '{project.settings.sandbox.image}'.",
            "Rebuild the image with scripts/setup.sh (it installs the pinned CLIs).",
        )
    return sandbox


def start_task(
    description: str,
    path: Path,
    *,
    cli: str | None = None,
    roles: dict[str, str] | None = None,
    reporter: Reporter | None = None,
    no_gate: bool = False,
    allow_protected: list[str] | None = None,
) -> Workflow:
    """`allow_protected`: protected paths (gitignore patterns) this task's workers may change."""
    if not description.strip():
        raise StateError("The task description is empty.", 'Describe the task: start-task "..."')
    description, _ = redact(description)  # its branch name, state and prompts never hold a secret
    project = open_project(path, {"cli": cli} if cli else None)
    _require_trust(project)
    cli = project.settings.cli
    definition, skipped = _definition(project, roles, no_gate)
    with repo_lock(project.state_dir):
        sandbox = open_sandbox(project, clis_in_use(definition, project.settings, project.root))
        if (project.root / ".supervisor" / "sandbox" / "Dockerfile").is_file():
            sandbox_build(project.root)  # a broken project image stops the task before it starts
        with project.store() as store:
            _clean_leftovers(project, store, sandbox)
            base_sha = project.workspace.head_commit()
            ws = project.workspace
            wf = store.create_workflow(
                description=description,
                cli=cli,
                base_branch=ws.current_branch(),
                base_sha=base_sha,
                branch_for_id=lambda i: f"ai/{i}-{ws.slugify(description)}",
                definition=definition.model_dump(),
                first_step=definition.initial_step,
                **protected.pinned_start(project.settings, allow_protected),
            )
            if no_gate:
                store.add_event(
                    wf.id,
                    EventSpec(
                        "gates_skipped",
                        status="skipped",
                        payload={"gates": skipped, "reason": "start-task --no-gate"},
                    ),
                )
            ws.create_task_branch(wf.id, description, base=base_sha)
            return _drive(project, store, sandbox, wf.id, reporter)


def start_preview(
    description: str,
    path: Path,
    *,
    cli: str | None = None,
    roles: dict[str, str] | None = None,
    no_gate: bool = False,
) -> str:
    """What start-task would create, for a person to confirm; creates nothing."""
    project = open_project(path, {"cli": cli} if cli else None)
    _require_trust(project)
    definition, skipped = _definition(project, roles, no_gate)
    ws = project.workspace
    steps = " → ".join(definition.steps)
    return (
        f"  branch    ai/<id>-{ws.slugify(description)}\n"
        f"  from      {ws.current_branch() or 'detached HEAD'} at {ws.head_commit()[:12]} "
        "(your checkout and uncommitted changes are not touched)\n"
        f"  workflow  {workflow_source(project.root, project.settings)}: {steps}\n"
        f"  CLIs      {', '.join(clis_in_use(definition, project.settings, project.root))}"
        + (f"\n  gates     none (--no-gate leaves out: {', '.join(skipped)})" if no_gate else "")
    )


def approval_stops(
    path: Path,
    *,
    cli: str | None = None,
    roles: dict[str, str] | None = None,
    no_gate: bool = False,
) -> str:
    """Every human approval the run will stop at, said before it starts (`--yes` approves none)."""
    from supervisor.approvals import preview_line

    project = open_project(path, {"cli": cli} if cli else None)
    _require_trust(project)
    definition, _ = _definition(project, roles, no_gate)
    return preview_line(definition, project.root)


def _definition(
    project: Project, roles: dict[str, str] | None, no_gate: bool
) -> tuple[WorkflowDef, list[str]]:
    """The workflow to run, its gate commands checked (or, with --no-gate, its gates removed):
    a gate without a command stops the task here, before anything exists."""
    from supervisor import preflight

    definition = load_workflow(project.root, project.settings, gates=False)
    skipped: list[str] = []
    if no_gate:
        definition, skipped = preflight.without_gates(definition)
    preflight.check_gates(definition, project.settings, project.root)
    if roles:
        definition = _with_roles(definition, roles, project)
    return definition, skipped


def trust_repo(path: Path) -> tuple[Path, dict[str, Any]]:
    """`supervisor trust`: record the repository's credential-routing settings as trusted."""
    root = find_repo_root(path)
    load_settings(root)  # an invalid config is reported, never trusted
    return root, trust.trust(root)


def resume(wf_id: int, path: Path, *, reporter: Reporter | None = None) -> Workflow:
    project = open_project(path)
    _require_trust(project)
    with repo_lock(project.state_dir), project.store() as store:
        wf = store.workflow(wf_id)
        if wf.status == "completed":
            return wf
        definition = WorkflowDef.model_validate(wf.definition)
        settings = project.settings.model_copy(update={"cli": wf.cli})
        sandbox = open_sandbox(project, clis_in_use(definition, settings, project.root))
        interrupted = _clean_leftovers(project, store, sandbox, wf_id)
        if interrupted and reporter:
            reporter.info(f"Interrupted step(s) {', '.join(interrupted)} will run again.")
        if reporter and _definition_changed(project, wf):
            reporter.info(
                f"The workflow ({workflow_source(project.root, project.settings)}) changed "
                "since this task started; the task keeps the definition it started with."
            )
        _prepare_resume(store, wf, project.settings)
        if not project.workspace.branch_exists(wf.task_branch):
            project.workspace.create_task_branch(wf.id, wf.description, base=wf.base_sha)
        return _drive(project, store, sandbox, wf_id, reporter)


@dataclass
class CompletionPreview:
    workflow: Workflow
    base_branch: str
    commits: list[str]
    diffstat: str


def completion_preview(wf_id: int, path: Path) -> CompletionPreview:
    project = open_project(path)
    with project.store() as store:
        wf = store.workflow(wf_id)
    if wf.status != "completed":
        raise StateError(
            f"Workflow {wf_id} is {wf.status}, not completed; its branch {wf.task_branch} is kept "
            "as it is.",
            f"Finish it first (`supervisor resume {wf_id}`), or merge the branch by hand.",
        )
    if not wf.base_branch:
        raise StateError(
            f"Workflow {wf_id} started from a detached HEAD, so there is no branch to merge into.",
            f"Merge {wf.task_branch} by hand.",
        )
    ws = project.workspace
    base_tip = ws.branch_tip(wf.base_branch)
    tip = ws.branch_tip(wf.task_branch)
    stat = process.run(["git", "-C", str(project.root), "diff", "--stat", base_tip, tip]).stdout
    return CompletionPreview(wf, wf.base_branch, ws.log(base_tip, tip), stat)


def complete_task(wf_id: int, path: Path, mode: str | None = None) -> str:
    """Land a completed task's branch on the branch it started from; the new tip. `mode`:
    squash (one commit), merge (a merge commit) or rebase (its commits replayed); by default
    squash for a single-component task, merge otherwise."""
    from supervisor.workflow import history

    preview = completion_preview(wf_id, path)
    project = open_project(path)
    with repo_lock(project.state_dir), project.store() as store:
        wf = preview.workflow
        mode = mode or history.default_mode(wf.context)
        ws = project.workspace
        if mode == "merge":
            new = ws.merge_into(
                preview.base_branch,
                wf.task_branch,
                f"Merge {wf.task_branch}: {wf.description[:60]}",
            )
        else:
            base_tip = ws.branch_tip(preview.base_branch)
            tip = ws.branch_tip(wf.task_branch)
            if mode == "squash":
                body = "\n".join(f"  {line}" for line in ws.log(base_tip, tip))
                message = f"{wf.description.strip()[:72]}\n\nSquashed {wf.task_branch}:\n{body}\n"
                new = history.squashed(project.root, base_tip, tip, message)
            else:
                new = history.rebased(project.root, base_tip, wf.base_sha, tip)
            history.land(ws, preview.base_branch, new, base_tip)
        store.add_event(
            wf.id,
            EventSpec(
                "task_merged",
                status="merged",
                payload={"into": preview.base_branch, "sha": new, "mode": mode},
            ),
        )
    return new


def analyze_deps(wf_id: int, path: Path) -> list[tuple[str, str, str]]:
    """Dependencies between the plan's components suggested by their files' imports on the task
    branch, that the plan does not already order. For a person to confirm; changes nothing."""
    from supervisor.dag import WorkGraph, suggest_dependencies
    from supervisor.imports import resolve_imports
    from supervisor.schemas import PlanOutput
    from supervisor.treedata import CommitFiles

    project = open_project(path)
    with project.store() as store:
        wf = store.workflow(wf_id)
    if not wf.context.get("plan"):
        raise StateError(
            f"Workflow {wf_id} has no plan yet.",
            f"Run it past its planning step (`supervisor resume {wf_id}`), then analyze.",
        )
    work = WorkGraph.from_plan(PlanOutput.model_validate(wf.context["plan"]))
    ws = project.workspace
    tree = CommitFiles(ws.git_dir, ws.branch_tip(wf.task_branch))  # blobs, not a checkout
    files = set(tree.files())

    def text(path: str) -> str | None:
        data = tree.read(path)
        return None if data is None else data.decode("utf-8", errors="replace")

    imports = {
        f: resolve_imports(text, f, files)
        for c in work.components.values()
        for f in c.files
        if f in files
    }
    return suggest_dependencies(work, imports)


def workflows(path: Path) -> list[Workflow]:
    project = open_project(path)
    if not (project.state_dir / "state.db").exists():
        return []
    with project.store() as store:
        return store.workflows()


def context_preview(path: Path, role_name: str, targets: list[str], task: str) -> tuple[str, Pack]:
    """What a role would be sent, packed from the checkout as it is; nothing runs."""
    from supervisor import prompts
    from supervisor.roles import load_role

    project = open_project(path)
    role = load_role(role_name, project.root)
    diff = project.workspace.working_diff()
    targets = targets or project.workspace.working_changes()
    return prompts.compose(
        role,
        project.root,
        project.root,
        task=task,
        feedback=[],
        plan="",
        targets=targets,
        diff=diff,
    )


def sandbox_init(path: Path) -> tuple[Path, bool]:
    from supervisor import project_image
    from supervisor.detect import detect

    project = open_project(path)
    return project_image.write_dockerfile(
        project.root, detect(project.root), project.settings.sandbox.image
    )


@contextlib.contextmanager
def head_tree(project: Project) -> Iterator[Path]:
    """A throwaway worktree of HEAD: what a new task would start from."""
    tree = project.workspace.add_worktree(f"sandbox-{os.getpid()}", project.workspace.head_commit())
    try:
        yield tree
    finally:
        project.workspace.remove_worktree(tree)


def sandbox_build(
    path: Path, *, no_cache: bool = False, on_output: Any = None
) -> tuple[str, float | None]:
    """Build the project image for HEAD's dependency files; (tag, seconds or None if reused)."""
    from supervisor import project_image
    from supervisor.sandbox.docker import connect

    project = open_project(path)
    client = connect()
    sandbox = DockerSandbox(
        project.settings.sandbox.image, project.settings.sandbox.egress_network, client
    )
    sandbox.check_image()
    base = client.images.get(project.settings.sandbox.image)
    with head_tree(project) as tree:
        image = project_image.image_for(project.root, tree, base.id)
        if image is None:
            raise SandboxError(
                f"There is no {project_image.DOCKERFILE} in this repository.",
                "Run `supervisor sandbox init` (or `supervisor init`) to write one.",
            )
        if project_image.exists(client, image.tag) and not no_cache:
            return image.tag, None
        seconds = project_image.build(
            client, project.root, tree, image, no_cache=no_cache, on_output=on_output
        )
        # The smoke test: the project's packages import offline, or the build fails naming
        # the missing module (and the image is dropped, so the next build tries again).
        for note in project_image.smoke_test(client, project.root, tree, image):
            if on_output is not None:
                on_output(f"smoke test: {note}\n")
        return image.tag, seconds


def sandbox_status(path: Path) -> dict[str, Any]:
    from supervisor import project_image
    from supervisor.sandbox.docker import connect

    project = open_project(path)
    client = connect()
    base = client.images.get(project.settings.sandbox.image)
    with head_tree(project) as tree:
        wanted = project_image.image_for(project.root, tree, base.id)
    images = []
    for found in project_image.project_images(client, project.root):
        labels = found.labels or {}
        images.append(
            {
                "tags": found.tags,
                "created": found.attrs.get("Created", "")[:19],
                "size_mb": round(found.attrs.get("Size", 0) / 1e6),
                "files": labels.get("supervisor.dependency-files", ""),
                "current": wanted is not None and wanted.tag in found.tags,
            }
        )
    return {
        "base_image": f"{project.settings.sandbox.image} ({base.short_id})",
        "dockerfile": str(project.root / project_image.DOCKERFILE) if wanted is not None else None,
        "wanted": wanted.tag if wanted else None,
        "dependency_files": wanted.files if wanted else [],
        "images": images,
    }


def sandbox_shell_argv(path: Path, command: list[str] | None) -> list[str]:
    """`docker run` for an interactive shell in the gate sandbox, on a copy of HEAD."""
    from supervisor import process

    project = open_project(path)
    tag, _ = (
        sandbox_build(path)
        if (project.root / ".supervisor/sandbox/Dockerfile").is_file()
        else (project.settings.sandbox.image, None)
    )
    return [
        process.find_program("docker"),
        "run",
        "--rm",
        "-i",
        *(["-t"] if not command else []),
        "--network",
        "none",
        "--read-only",
        "--tmpfs",
        "/tmp:rw,exec",
        "--user",
        "65534:65534",
        "-e",
        "HOME=/tmp",
        "-v",
        f"{project.root}:/workspace:ro",
        "-w",
        "/workspace",
        tag,
        *(command or ["bash"]),
    ]


@contextlib.contextmanager
def reading(path: Path) -> Iterator[Store]:
    project = open_project(path)
    with project.store() as store:
        yield store


# -- internals -----------------------------------------------------------------------------


def _require_trust(project: Project) -> None:
    """Before anything is created: the repository's credential-routing settings are trusted,
    and no CLI's login files point outside the home directory."""
    trust.require_trusted(project.root)
    trust.check_login_files(project.settings)


def _drive(
    project: Project, store: Store, sandbox: DockerSandbox, wf_id: int, reporter: Reporter | None
) -> Workflow:
    """Run the engine, and tell the user (supervisor/notify.py) when the run ends waiting for
    them, failed or completed."""
    notifier = notify.Notifier.from_config(project.root)
    try:
        with notify.RateLimitWatch(notifier, project.state_dir / "state.db", wf_id):
            wf = _run_engine(project, store, sandbox, wf_id, reporter)
    except SupervisorError as e:
        event = "approval" if isinstance(e, ApprovalRequired) else "failed"
        notifier.notify(event, store.workflow(wf_id), e.message)
        _notice_problems(notifier, reporter)
        raise
    if wf.status in ("completed", "failed"):
        notifier.notify(wf.status, wf, wf.error or "")
    _notice_problems(notifier, reporter)
    return wf


def _workspace_fallback(store: Store, wf_id: int, reason: str) -> None:
    """Said once per run: steps now get fully written worktrees instead of overlay views."""
    store.add_event(
        wf_id,
        EventSpec(
            "workspace_fallback",
            status="full",
            payload={
                "reason": reason,
                "hint": "Set `sandbox: {workspace: full}` in the config to choose it outright.",
            },
        ),
    )


def _notice_problems(notifier: notify.Notifier, reporter: Reporter | None) -> None:
    for problem in notifier.problems if reporter else []:
        reporter.info(f"notification not sent: {problem}")  # type: ignore[union-attr]


def _run_engine(
    project: Project, store: Store, sandbox: DockerSandbox, wf_id: int, reporter: Reporter | None
) -> Workflow:
    if project.settings.sandbox.workspace == "overlay":
        project.workspace.use_overlay(lambda reason: _workspace_fallback(store, wf_id, reason))
    engine = Engine(project.root, project.settings, store, project.workspace, sandbox, reporter)
    try:
        return engine.run(wf_id)
    except (ApprovalRequired, StepFailedError):
        raise
    except SupervisorError as e:
        wf = store.workflow(wf_id)
        if wf.status == "running":
            store.set_status(
                wf_id,
                "failed",
                error=e.message,
                event=EventSpec(
                    "workflow_failed",
                    step=wf.current_step,
                    status="failed",
                    payload={"error": e.message, "kind": type(e).__name__, "hint": e.hint},
                ),
            )
        raise
    finally:
        sandbox.close()


def _repin_gates(ctx: dict[str, Any], settings: Settings) -> list[EventSpec]:
    """A person resuming a failed task may have fixed a gate command in their own
    configuration: the pinned gates follow it. This reads the user's checkout and config, never
    a candidate, so a worker still cannot define its own check."""
    pins = ctx.get(protected.PINNED_KEY)
    now = dict(settings.gates)
    if not pins or pins.get("gates") == now:
        return []
    ctx[protected.PINNED_KEY] = {**pins, "gates": now}
    payload = {"gates": now, "before": pins.get("gates"), "reason": "resume after a failure"}
    return [EventSpec("checks_pinned", status="repinned", payload=payload)]


def _prepare_resume(store: Store, wf: Workflow, settings: Settings) -> None:
    ctx = dict(wf.context)
    if wf.status == "awaiting_approval":
        approval = store.latest_approval(wf.id)
        if approval is None or approval.status == "pending":
            raise ApprovalRequired(
                f"Workflow {wf.id} waits for approval of step '{ctx.get('approval_step')}'.",
                f"Approve with `supervisor approve {wf.id}` or reject with `supervisor reject "
                f'{wf.id} --reason "..."`, then resume.',
            )
        step = wf.current_step
        events = [EventSpec("resumed", status=approval.status, payload={"approval": approval.id})]
        if approval.status == "rejected":
            step = approval.step
            reason = approval.reason or "(no reason given)"
            ctx.setdefault("feedback", {}).setdefault(step, []).append(
                f"A human reviewer rejected the previous result of this step: {reason}"
            )
            if (ctx.get(REQUEST_KEY) or {}).get("producer") == step:
                # A rejected dependency change is not built on: the step starts over from the
                # last state that needed no approval (the rejected candidate stays in refs).
                ctx.pop(REQUEST_KEY, None)
                ctx["candidate"] = None
        store.update_workflow(
            wf.id, status="running", current_step=step, context=ctx, events=events
        )
    elif wf.status in ("failed", "interrupted"):
        # A fresh set of retries, and a closed breaker, for the step that failed: a human chose
        # to resume, presumably after fixing the cause. (A crash leaves the status `running`, so
        # a kill and resume keeps the breaker's count.)
        for counter in ("transient", "breaker"):
            ctx.setdefault(counter, {}).pop(wf.current_step, None)
        # Every step's retry count starts afresh: a resume at a gate must leave the step its
        # failure goes back to some attempts.
        for memory in ("attempts", "trees", "noops"):
            ctx.pop(memory, None)
        events = [EventSpec("resumed", step=wf.current_step, status=wf.status)]
        events += _repin_gates(ctx, settings)
        store.update_workflow(
            wf.id, status="running", current_step=wf.current_step, context=ctx, events=events
        )
    else:  # running (after a crash) or rate_limited: carry on where it stood
        store.add_event(wf.id, EventSpec("resumed", step=wf.current_step, status=wf.status))


def _clean_leftovers(
    project: Project, store: Store, sandbox: DockerSandbox, wf_id: int | None = None
) -> list[str]:
    """What a crash leaves: containers, worktrees, and steps still marked running."""
    sandbox.remove_stale({LABEL_REPO: repo_label(project.root)})
    project.workspace.remove_stale_worktrees()
    interrupted: list[str] = []
    for wf in store.workflows():
        if wf_id is None or wf.id == wf_id:
            interrupted += store.interrupt_running_steps(wf.id)
    return interrupted


def _with_roles(definition: WorkflowDef, roles: dict[str, str], project: Project) -> WorkflowDef:
    """`--role STEP=ROLE`: the highest layer of the cascade, for this task only."""
    from supervisor.config import check_workflow

    steps = dict(definition.steps)
    for step, role in roles.items():
        if step not in steps or steps[step].role is None:
            workers = ", ".join(n for n, s in steps.items() if s.role)
            raise ConfigError(
                f"--role {step}={role}: '{step}' is not a worker step of the workflow.",
                f"Name one of: {workers}.",
            )
        steps[step] = steps[step].model_copy(update={"role": role})
    changed = definition.model_copy(update={"steps": steps})
    check_workflow(changed, "--role", project.root, project.settings)
    return changed


def _definition_changed(project: Project, wf: Workflow) -> bool:
    try:
        current = load_workflow(project.root, project.settings)
    except SupervisorError:
        return True
    return current.model_dump() != WorkflowDef.model_validate(wf.definition).model_dump()


def _cli_settings(settings: Settings, cli: str) -> Any:
    try:
        return settings.clis[cli]
    except KeyError:
        raise SandboxError(
            f"No settings for the '{cli}' CLI.", "Add it under `clis:` in the config."
        ) from None


def _empty_dir(project: Project) -> Path:
    probe = project.state_dir / "probe"
    probe.mkdir(parents=True, exist_ok=True)
    return probe
