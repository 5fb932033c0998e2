"""The task lifecycle: start, resume, complete. Several tasks run at once in one repository.

Each task is held by its own lock (supervisor/state/locks.py) for as long as a supervisor runs
it, so `resume` of a task still running is refused while other tasks start, run, crash and resume
beside it. What tasks share is guarded only where they share it: the state database (short
transactions), git's bookkeeping (`Workspace.git_section`) and the project image build. Clean-up
after a crash touches the task's own containers, worktrees and run folders, never another's.

The CLI layer only parses arguments and calls these; opening the project and the checks before a
task exists are supervisor/lifecycle/opening.py, the image commands
supervisor/lifecycle/image_commands.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from supervisor.core import trustmap
from supervisor.core.config import WorkflowDef
from supervisor.core.errors import (
    ApprovalRequired,
    RemoteNotUpdatedError,
    SandboxError,
    StateError,
    StepFailedError,
    SupervisorError,
)
from supervisor.lifecycle import image_commands, refusals, starting
from supervisor.lifecycle.completion import (  # noqa: F401 (re-exported: the lifecycle's complete)
    CompletionPreview,
    complete_task,
    completion_preview,
)
from supervisor.lifecycle.doctor import clis_in_use
from supervisor.lifecycle.opening import (  # noqa: F401 (open_project, reading, workflows: re-exported)
    Project,
    definition_changed,
    open_project,
    open_sandbox,
    reading,
    remove_dead_probes,
    require_trust,
    task_definition,
    with_depth,
    workflows,
)
from supervisor.lifecycle.task_state import decide  # noqa: F401 (re-exported: tasks.decide)
from supervisor.policy import budgets, notify
from supervisor.sandbox import adopt
from supervisor.sandbox.docker import LABEL_REPO, LABEL_WORKFLOW, DockerSandbox, repo_label
from supervisor.state.locks import task_lock
from supervisor.state.store import EventSpec, Store, Workflow
from supervisor.telemetry import switch as telemetry
from supervisor.workflow import resuming
from supervisor.workflow.engine import Engine, Reporter
from supervisor.workflow.loading import workflow_source

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from supervisor.workflow.depth import Asked


def start_task(
    description: str,
    path: Path,
    *,
    cli: str | None = None,
    roles: dict[str, str] | None = None,
    reporter: Reporter | None = None,
    no_gate: bool = False,
    allow_protected: list[str] | None = None,
    depth: Asked = "planned",
    before_first: Callable[[Store, Workflow], None] | None = None,
) -> Workflow:
    """`allow_protected`: protected paths (gitignore patterns) this task's workers may change.
    Other tasks running in the repository do not stop this one from starting. A task for
    Temporal's workers is submitted instead (supervisor/temporal/submit.py).
    `depth` (supervisor/workflow/depth.py): `auto` runs the analyzer first, as `start-task`
    does by default; this function's default is the fixed pipeline (`planned`), which callers
    that script every conversation (the specs) rely on. `before_first`: called once the task
    exists, before the engine runs (supervisor/lifecycle/issue_task.py holds an issue's task
    for a person's approval there)."""
    project = open_project(path, {"cli": cli} if cli else None)
    task = starting.prepare(
        description, project, roles=roles, no_gate=no_gate, allow_protected=allow_protected,
        depth=depth,
    )  # fmt: skip
    sandbox = open_sandbox(project, task.clis)
    if trustmap.repo_path(project.root, trustmap.DOCKERFILE, trustmap.NEEDS_TRUST).is_file():
        image_commands.sandbox_build(project.root)  # a broken image stops the task before it starts
    with project.store() as store:
        wf = starting.create(task, store)
        with task_lock(project.state_dir, wf.id):
            _clean_leftovers(project, store, sandbox, wf.id)  # of a reused id (a new database)
            _remove_dead_processes_leftovers(project, sandbox)
            starting.begin(task, store, wf)
            if before_first is not None:
                before_first(store, wf)
            return _drive(project, store, sandbox, wf.id, reporter)


def resume(
    wf_id: int,
    path: Path,
    *,
    reporter: Reporter | None = None,
    one_step: bool = False,
    opened: tuple[Project, notify.Notifier] | None = None,
    before_commit: Callable[[int], None] | None = None,
    dispatch: list[dict[str, Any]] | None = None,
    kept: Kept | None = None,
) -> Workflow:
    """Continue task `wf_id`; refused (WorkflowBusyError) while a live supervisor runs it.
    `one_step`: run one step and leave waits to the caller (the Temporal activity). `opened`:
    the project and notifier the caller already read from this same configuration (a worker
    keeps them across its steps, supervisor/temporal/cache.py). `dispatch`: a component fan-out
    hands its components to the runner (supervisor/workflow/steps/dispatched.py). `kept`: what
    the caller's last step of this task left open (see `Kept`), used and updated."""
    project = opened[0] if opened else open_project(path)
    require_trust(project)
    with project.store() as store:
        # An unknown id, or an abandoned task (its branch gone), is refused before any lock
        # file is made; and again once held, in case an abandon came between.
        refusals.not_abandoned(store.workflow(wf_id), "resume")
        with task_lock(project.state_dir, wf_id):
            wf = store.workflow(wf_id)
            refusals.not_abandoned(wf, "resume")
            if wf.status == "completed":
                _clean_after_completion(project, wf_id)
                return wf
            definition = WorkflowDef.model_validate(wf.definition)
            settings = project.settings.model_copy(update={"cli": wf.cli})
            if kept is not None and kept.sandbox is not None:
                sandbox = kept.sandbox
            else:
                sandbox = open_sandbox(project, clis_in_use(definition, settings, project.root))
            interrupted: list[str] = []
            # As this worker's own last step of the task left it: nothing to clean up, and
            # nothing to resume from (no "resumed" event at each step of a task on a worker).
            untouched = (
                kept is not None and kept.mark is not None and kept.mark == _mark(store, wf_id)
            )
            if not untouched:
                interrupted = _clean_leftovers(project, store, sandbox, wf_id, adopting=True)
                _remove_dead_processes_leftovers(project, sandbox)
            if interrupted and reporter:
                reporter.info(f"Interrupted step(s) {', '.join(interrupted)} will run again.")
            if adopt.pending(sandbox) and reporter:
                names = ", ".join(adopt.pending(sandbox))
                reporter.info(
                    f"Worker(s) of {names} outlived the last run: adopted, not run again."
                )
            if reporter and definition_changed(project, wf):
                reporter.info(
                    f"The workflow ({workflow_source(project.root, project.settings)}) changed "
                    "since this task started; the task keeps the definition it started with."
                )
            if not untouched or wf.status != "running":
                resuming.prepare(store, wf, project.settings)
            if not project.workspace.branch_exists(wf.task_branch):
                project.workspace.create_task_branch(wf.id, wf.description, base=wf.base_sha)
            notifier = opened[1] if opened else None
            if kept is None:
                return _drive(
                    project, store, sandbox, wf_id, reporter, one_step, notifier, before_commit,
                    dispatch,
                )  # fmt: skip
            kept.sandbox, kept.mark = None, None  # until this step ends as it should
            try:
                wf = _drive(
                    project, store, sandbox, wf_id, reporter, one_step, notifier, before_commit,
                    dispatch, keep_open=True,
                )  # fmt: skip
            except BaseException:
                sandbox.close()
                raise
            kept.sandbox, kept.mark = sandbox, _mark(store, wf_id)
            return wf


@dataclass
class Kept:
    """What a worker keeps open between the steps of one task it runs one at a time
    (supervisor/temporal/activities.py): the sandbox (its engine client, probed image and the
    proxy's relay) and the task's state as its last step left it. A step that finds the state
    as it was (`mark`: nobody ran anything of the task meanwhile, on any host) and ended without
    an error has nothing to clean up; anything else and the next step cleans up as `resume`
    does."""

    sandbox: DockerSandbox | None = None
    mark: tuple[Any, ...] | None = None

    def close(self) -> None:
        if self.sandbox is not None:
            self.sandbox.close()
        self.sandbox, self.mark = None, None


def _mark(store: Store, wf_id: int) -> tuple[Any, ...]:
    """Changes with anything run of the task: its row and its steps' rows."""
    wf = store.workflow(wf_id)
    steps = store.steps(wf_id)
    last = steps[-1] if steps else {}
    return (wf.updated_at, wf.status, wf.current_step, len(steps), last.get("id"),
            last.get("status"))  # fmt: skip


def analyze_deps(wf_id: int, path: Path) -> list[tuple[str, str, str]]:
    """Dependencies between the plan's components suggested by their files' imports on the task
    branch, that the plan does not already order. For a person to confirm; changes nothing."""
    from supervisor.core.dag import WorkGraph, flatten, suggest_dependencies, tree_children
    from supervisor.core.schemas import PlanOutput
    from supervisor.project.imports import resolve_imports
    from supervisor.workspace.treedata import CommitFiles

    project = open_project(path)
    with project.store() as store:
        wf = store.workflow(wf_id)
    if not wf.context.get("plan"):
        raise StateError(
            f"Workflow {wf_id} has no plan yet.",
            f"Run it past its planning step (`supervisor resume {wf_id}`), then analyze.",
        )
    # With its sub-plans: a sub-component (`c2.1`) is a component of the graph like any other.
    plan = flatten(wf.context["plan"], tree_children(wf.context))
    work = WorkGraph.from_plan(PlanOutput.model_validate(plan))
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


# -- internals -----------------------------------------------------------------------------


def _drive(
    project: Project,
    store: Store,
    sandbox: DockerSandbox,
    wf_id: int,
    reporter: Reporter | None,
    one_step: bool = False,
    notifier: notify.Notifier | None = None,
    before_commit: Callable[[int], None] | None = None,
    dispatch: list[dict[str, Any]] | None = None,
    keep_open: bool = False,
) -> Workflow:
    """Run the engine, and tell the user (supervisor/policy/notify.py) when the run ends waiting for
    them, failed or completed."""
    notifier = notifier or notify.Notifier.from_config(project.root, project.settings)
    try:
        with notify.RateLimitWatch(notifier, project.state_dir / "state.db", wf_id):
            wf = _run_engine(
                project, store, sandbox, wf_id, reporter, one_step, before_commit, dispatch,
                keep_open,
            )  # fmt: skip
    except RemoteNotUpdatedError:
        raise  # not an end: the step runs again
    except SupervisorError as e:
        event = "approval" if isinstance(e, ApprovalRequired) else "failed"
        event = "budget" if isinstance(e, budgets.BudgetExceeded) else event
        notifier.notify(event, store.workflow(wf_id), e.message)
        _notice_problems(notifier, reporter)
        raise
    finally:  # the run's traces and metrics, when the user's config or OTEL_* asks for them
        telemetry.after_run(store, wf_id, project.settings.telemetry, unless_running=one_step)
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
    project: Project,
    store: Store,
    sandbox: DockerSandbox,
    wf_id: int,
    reporter: Reporter | None,
    one_step: bool = False,
    before_commit: Callable[[int], None] | None = None,
    dispatch: list[dict[str, Any]] | None = None,
    keep_open: bool = False,
) -> Workflow:
    if project.settings.sandbox.workspace == "overlay" and sandbox.mounts_overlay:
        project.workspace.use_overlay(
            lambda reason: _workspace_fallback(store, wf_id, reason), owner=f"wf{wf_id}"
        )
    engine = Engine(project.root, project.settings, store, project.workspace, sandbox, reporter)
    engine.one_step = engine.external_waits = one_step
    engine.before_commit = before_commit
    engine.steps.dispatch = dispatch
    try:
        return engine.run(wf_id)
    except (ApprovalRequired, StepFailedError, RemoteNotUpdatedError):
        raise  # the last: nothing of the step was committed, and it runs again (temporal/)
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
        store.after_record.drain()  # the runs' clean-ups use the sandbox, closed below
        adopt.release(sandbox, store, project.workspace)  # any the engine did not reach
        if not keep_open:
            sandbox.close()
        if project.workspace.overlays is not None:
            project.workspace.overlays.close()  # the task's bases: nothing left behind


def _remove_dead_processes_leftovers(project: Project, sandbox: DockerSandbox) -> None:
    """What belongs to no task but to a supervisor process killed before or outside one: its
    preflight probe and the HEAD worktree of an image build. Start, resume and abandon each
    remove them, so that no later command depends on one particular command running."""
    image_commands.remove_dead_head_trees(project)
    remove_dead_probes(project, sandbox)


def _clean_after_completion(project: Project, wf_id: int) -> None:
    """A supervisor killed just after it recorded the task's completion, before its clean-up,
    left what it had prepared for steps that never came (worktrees, containers): nothing of a
    completed task runs, so all of it goes. Cheap when there is nothing: one worktree listing and
    one container query."""
    import docker.errors

    project.workspace.remove_stale_worktrees(prefix=f"wf{wf_id}-")
    try:
        sandbox = DockerSandbox(project.settings.sandbox.image, "")
        sandbox.remove_stale({LABEL_REPO: repo_label(project.root), LABEL_WORKFLOW: str(wf_id)})
    except (SandboxError, docker.errors.DockerException):
        return  # no Docker engine here (a submitting host): the task's containers are not here


def _clean_leftovers(
    project: Project, store: Store, sandbox: DockerSandbox, wf_id: int, *, adopting: bool = False
) -> list[str]:
    """What a crash of task `wf_id` left: its containers, run folders and worktrees, and its
    steps still marked running. Other tasks' are theirs: they may be running right now. On
    resume (`adopting`), the task's workers still running or done are kept for the engine to
    adopt."""
    if adopting:
        adopt.find(sandbox, store, project.root, wf_id, project.workspace)
    sandbox.remove_stale({LABEL_REPO: repo_label(project.root), LABEL_WORKFLOW: str(wf_id)})
    project.workspace.remove_stale_worktrees(
        prefix=f"wf{wf_id}-", keep=adopt.kept_worktrees(sandbox)
    )
    return store.interrupt_running_steps(wf_id, keep=adopt.kept_steps(sandbox))
