"""Opening a repository and the checks before a task exists (preflight), and what reads it.

Everything that can fail before a task exists (repository, configuration, trust, Docker, image,
CLI binary, credentials, a gate without a command) is checked here first, so a refused start
leaves nothing behind. The task lifecycle (start, resume, complete) is
supervisor/lifecycle/tasks.py.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from supervisor.core import depth_view, faults, owners
from supervisor.core.config import Settings, WorkflowDef, load_settings
from supervisor.core.errors import ConfigError, SandboxError, SupervisorError, ToolMissingError
from supervisor.guard import credentials, trust
from supervisor.lifecycle.doctor import clis_in_use
from supervisor.state.records import EventSpec, Workflow
from supervisor.workflow import depth
from supervisor.workflow.loading import load_workflow, workflow_source
from supervisor.workspace.worktrees import Workspace, find_repo_root, locate

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from supervisor.context.assemble import Pack
    from supervisor.context.targets import Targets
    from supervisor.sandbox.docker import DockerSandbox
    from supervisor.state.store import Store
    from supervisor.state.writer import TaskWriter
    from supervisor.workflow.depth import Asked

STATE_DIR = ".supervisor"


@dataclass
class Project:
    """A repository the supervisor works on, with its settings and state."""

    root: Path
    settings: Settings
    workspace: Workspace
    # What `require_trust` and `task_definition` found, by their arguments: a command that both
    # says a task's approvals and starts it checks it once (a workflow load is a tenth of a
    # submission's CPU). The project lives for one command, so nothing it caches goes stale.
    checked: dict[object, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def state_dir(self) -> Path:
        return self.root / STATE_DIR

    def store(self) -> Store:
        from supervisor.state.store import Store  # here: a submission need not load SQLAlchemy

        return Store(self.state_dir / "state.db")

    def writer(self) -> TaskWriter | Store:
        """What a submission writes the task through (supervisor/state/writer.py)."""
        from supervisor.state.writer import open_writer

        return open_writer(self.state_dir / "state.db")


def open_project(path: Path, overrides: dict[str, Any] | None = None) -> Project:
    root, git_dir = locate(path)
    return Project(root, load_settings(root, overrides), Workspace(root, git_dir))


def open_sandbox(project: Project, clis: list[str], *, probe_clis: bool = True) -> DockerSandbox:
    """Engine up, image built, every CLI the workflow uses inside it with credentials present;
    or a clear error, before anything is created. Not `probe_clis`: the CLIs are not looked for in
    the image, for a task submitted to workers that run it in their own (and probe it there)."""
    # Here, not at the top: a submission to Temporal opens no sandbox and loads no Docker.
    from supervisor.sandbox import probed as probes
    from supervisor.sandbox import runtime
    from supervisor.sandbox.docker import (
        LABEL_PROBE,
        LABEL_REPO,
        DockerSandbox,
        RunSpec,
        repo_label,
    )
    from supervisor.workers import adapter_for

    for cli in clis:
        adapter_for(cli)
        credentials.collect(cli, _cli_settings(project.settings, cli))
    chosen = project.settings.sandbox
    sandbox = DockerSandbox(
        chosen.image,
        chosen.egress_network,
        runtime=chosen.runtime,
        worker_runtime=chosen.worker_runtime,
    )
    sandbox.check_image()
    runtime.require(sandbox.client, chosen.runtime, chosen.worker_runtime)
    binaries = [adapter_for(cli).binary for cli in clis]
    # An image is probed once for its CLIs: by this process (`supervisor worker` opens it per
    # engine step), or by any earlier command (probed.py: an image ID names its content).
    image_id, wanted = sandbox.base_image_id(), tuple(binaries)
    probed = (image_id, wanted)
    if probed in _PROBED or not probe_clis or probes.known(image_id, chosen.runtime, wanted):
        return sandbox
    probe = sandbox.run(
        RunSpec(
            argv=[
                "sh",
                "-c",
                "; ".join(f"command -v {b} >/dev/null || echo {b}" for b in binaries),
            ],
            worktree=_empty_dir(project),
            timeout=60,
            # The owner's pid and start time: a later start-task, resume or abandon removes the
            # probe of a supervisor killed during it (remove_dead_probes), never a live one's.
            labels={LABEL_REPO: repo_label(project.root), LABEL_PROBE: owners.this_process()},
            on_start=lambda _: faults.reached("probe"),
        )
    )
    absent = probe.stdout.split()
    if probe.exit_code != 0 or absent:
        raise ToolMissingError(
            f"The {', '.join(repr(b) for b in absent) or 'required'} CLI is not installed in the "
            f"sandbox image '{project.settings.sandbox.image}'.",
            "Rebuild the image with scripts/setup.sh (it installs the pinned CLIs).",
        )
    _PROBED.add(probed)
    probes.remember(image_id, chosen.runtime, wanted)
    return sandbox


_PROBED: set[tuple[str, tuple[str, ...]]] = set()  # (image id, CLI binaries) found in it


def remove_dead_probes(project: Project, sandbox: DockerSandbox) -> list[str]:
    """Probe containers and run folders of supervisors killed during their preflight (a
    start-task's or a resume's: a probe belongs to no task, so no task's clean-up finds it);
    a live supervisor's probe, another task starting meanwhile, is left alone. A run folder
    is made before its container, so a folder without a container counts too."""
    from supervisor.sandbox.docker import LABEL_PROBE, LABEL_REPO, probe_run_dir_owners, repo_label

    client = getattr(sandbox, "client", None)  # a stand-in sandbox has no engine
    if client is None:
        return []
    repo = repo_label(project.root)
    found = client.containers.list(  # ignore_removed: another task's probe may end meanwhile
        all=True, filters={"label": [f"{LABEL_REPO}={repo}", LABEL_PROBE]}, ignore_removed=True
    )
    seen = {c.labels.get(LABEL_PROBE, "") for c in found} | probe_run_dir_owners(repo)
    removed: list[str] = []
    for owner in sorted(o for o in seen if owners.is_owner(o) and not owners.alive(o)):
        removed += sandbox.remove_stale({LABEL_REPO: repo, LABEL_PROBE: owner})
    return removed


def require_trust(project: Project) -> None:
    """Before anything is created: the repository's credential-routing settings are trusted,
    and no CLI's login files point outside the home directory, and a project Dockerfile (built
    with network, the workers' image) is the one the user trusted."""
    from supervisor.project import project_image

    if project.checked.get("trust"):
        return
    trust.require_trusted(project.root)
    trust.check_login_files(project.settings)
    project_image.trusted_dockerfile(project.root)
    project.checked["trust"] = True


def task_definition(
    project: Project, roles: dict[str, str] | None, no_gate: bool
) -> tuple[WorkflowDef, list[str]]:
    """The workflow to run, its gate commands checked (or, with --no-gate, its gates removed):
    a gate without a command stops the task here, before anything exists."""
    from supervisor.lifecycle import preflight

    key = ("definition", tuple(sorted((roles or {}).items())), no_gate)
    if key in project.checked:
        found: tuple[WorkflowDef, list[str]] = project.checked[key]
        return found[0], list(found[1])
    project.settings.project_map().check_paths(project.root)  # a project path that is not there
    definition = load_workflow(project.root, project.settings, gates=False)
    skipped: list[str] = []
    if no_gate:
        definition, skipped = preflight.without_gates(definition)
    preflight.check_gates(definition, project.settings, project.root)
    if roles:
        definition = _with_roles(definition, roles, project)
    project.checked[key] = (definition, skipped)
    return definition, list(skipped)


def with_depth(
    project: Project, definition: WorkflowDef, asked: Asked, description: str
) -> tuple[WorkflowDef, dict[str, Any], list[EventSpec]]:
    """The definition a task of depth `asked` pins, its first context and events
    (supervisor/workflow/depth.py)."""
    from supervisor.context.roles import load_role

    def plans(role: str) -> bool:
        return load_role(role, project.root).output == "plan"

    return depth.prepare(definition, asked, project.settings.depth, description, plans)


def definition_changed(project: Project, wf: Workflow) -> bool:
    """Whether the workflow the repository defines now differs from the one `wf` started with
    (the steps its depth added left out)."""
    try:
        current = load_workflow(project.root, project.settings)
    except SupervisorError:
        return True
    started = depth.original(WorkflowDef.model_validate(wf.definition), wf.context)
    return current.model_dump() != started.model_dump()


def start_preview(
    description: str,
    path: Path,
    *,
    cli: str | None = None,
    roles: dict[str, str] | None = None,
    no_gate: bool = False,
    asked: Asked = "auto",
) -> str:
    """What start-task would create, for a person to confirm; creates nothing."""
    project = open_project(path, {"cli": cli} if cli else None)
    require_trust(project)
    definition, skipped = task_definition(project, roles, no_gate)
    definition, context, _ = with_depth(project, definition, asked, description)
    ws = project.workspace
    steps = " → ".join(definition.steps)
    return (
        f"  branch    ai/<id>-{ws.slugify(description)}\n"
        f"  from      {ws.current_branch() or 'detached HEAD'} at {ws.head_commit()[:12]} "
        "(your checkout and uncommitted changes are not touched)\n"
        f"  workflow  {workflow_source(project.root, project.settings)}: {steps}\n"
        f"  CLIs      {', '.join(clis_in_use(definition, project.settings, project.root))}"
        f"\n  depth     {depth_view.describe(context)}"
        + (f"\n  gates     none (--no-gate leaves out: {', '.join(skipped)})" if no_gate else "")
        + "".join(f"\n  routing   {line}" for line in routing_preview(project, definition))
    )


def routing_preview(project: Project, definition: WorkflowDef) -> list[str]:
    """The CLI each worker role would run on now, and why (supervisor.routing), for the roles
    where there was a choice to make (a lock, or another CLI it could run on: what the engine
    records as `cli_chosen`); a line a role that could only run on the default got said
    nothing, five times over."""
    from supervisor.routing import route

    roles = [n for s in definition.steps.values() for n in ([s.role] if s.role else s.roles or [])]
    choices = route.preview(
        project.root,
        project.settings,
        project.state_dir / "state.db",
        project.settings.cli,
        list(dict.fromkeys(roles)),
    )
    return [route.describe(c) for c in choices if route.worth_recording(c)]


def cli_choice(path: Path, role_name: str) -> str:
    """`supervisor context`: the CLI the role would run on now, and why."""
    from supervisor.routing import route

    project = open_project(path)
    (choice,) = route.preview(
        project.root,
        project.settings,
        project.state_dir / "state.db",
        project.settings.cli,
        [role_name],
    )
    return route.describe(choice)


def approval_stops(
    path: Path,
    *,
    cli: str | None = None,
    roles: dict[str, str] | None = None,
    no_gate: bool = False,
    project: Project | None = None,
) -> str:
    """Every human approval the run will stop at, said before it starts (`--yes` approves none).
    `project`: `path`, already opened with `cli`."""
    from supervisor.policy.approvals import preview_line

    project = project or open_project(path, {"cli": cli} if cli else None)
    require_trust(project)
    definition, _ = task_definition(project, roles, no_gate)
    return preview_line(definition, project.root)


def trust_pending(path: Path) -> trust.Pending:
    """What `supervisor trust` would record in the repository, with effects and diffs."""
    root = find_repo_root(path)
    load_settings(root)  # an invalid config is reported, never trusted
    return trust.pending(root)


def trust_repo(path: Path) -> tuple[Path, dict[str, Any]]:
    """`supervisor trust`: record the repository's credential-routing and weakening settings
    and its templates, Dockerfile and approval policy as trusted, as they are now."""
    root = find_repo_root(path)
    load_settings(root)  # an invalid config is reported, never trusted
    return root, trust.trust(root)


def workflows(path: Path) -> list[Workflow]:
    project = open_project(path)
    if not (project.state_dir / "state.db").exists():
        return []
    with project.store() as store:
        return store.workflows()


@contextlib.contextmanager
def reading(path: Path) -> Iterator[Store]:
    project = open_project(path)
    with project.store() as store:
        yield store


def context_preview(
    path: Path, role_name: str, targets: list[str], task: str, project_name: str | None = None
) -> tuple[str, Pack, Targets]:
    """What a role would be sent, packed from the checkout as it is, and for which files
    (supervisor/context/targets.py: a named file that is not there is refused); nothing runs.
    `project_name`: as for a component of that project of a monorepo."""
    from supervisor.context import prompts
    from supervisor.context.project_scope import ProjectScope
    from supervisor.context.roles import load_role
    from supervisor.context.targets import resolve

    project = open_project(path)
    scope = None
    if project_name is not None:
        projects = project.settings.project_map()
        projects.get(project_name)  # an unknown name: the error lists the projects
        scope = ProjectScope.of(projects, project_name)
    role = load_role(role_name, project.root)
    chosen = resolve(project.root, targets, project.workspace.working_changes)
    diff = project.workspace.working_diff()
    prompt, pack = prompts.compose(
        role,
        project.root,
        project.root,
        task=task,
        feedback=[],
        plan="",
        targets=chosen.files,
        diff=diff,
        scope=scope,
    )
    return prompt, pack, chosen


# -- internals -----------------------------------------------------------------------------


def _with_roles(definition: WorkflowDef, roles: dict[str, str], project: Project) -> WorkflowDef:
    """`--role STEP=ROLE`: the highest layer of the cascade, for this task only."""
    from supervisor.workflow.loading import check_workflow

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
