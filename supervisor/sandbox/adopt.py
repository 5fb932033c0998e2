"""Adopting worker containers that outlived a killed supervisor.

Why: a worker container is run by the Docker engine, not by the supervisor: a SIGKILLed
supervisor leaves it running, its answer kept in the engine's log of its stdout and its changes in
its worktree (a bind mount of a host folder). Killing and re-running it on `resume` would throw
that work away and pay for the model calls again. So `resume` looks for the containers of the
steps the crash left `running`, keeps them (and their worktrees and run folders) out of the
clean-up, and the engine's worker step, on reaching the same step, waits for the container
instead of starting a new one (`run`), then goes on exactly as if it had seen it finish.

A container is adopted only when everything matches, from labels the supervisor set when it
created the container (a worker cannot change its own labels): the repository, the workflow, the
step's row in the database (which must still be `running` and name this very container), the
step's name and role, and the commit its worktree started from (the engine must want the same
base now, or the work would land on the wrong tree). Anything else is removed as before. The
worker's model requests never noticed the crash: its route lives in the proxy daemon
(sandbox/proxyd.py), not in the supervisor, and kept relaying. `route` re-attaches it by the
run's placeholder (a container label, with its port); if the daemon itself is new (it ended, the
host restarted), the route is reopened on that port with that placeholder, and the CLI's own
retries carry it over the gap.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import shutil
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from supervisor.core.errors import (
    CommandTimeoutError,
    DockerUnavailableError,
    SupervisorError,
    Terminated,
)
from supervisor.sandbox import warm
from supervisor.sandbox.docker import (
    LABEL_LOWER,
    LABEL_REPO,
    LABEL_STEP,
    LABEL_STEP_ID,
    LABEL_WORKFLOW,
    LABEL_WORKSPACE,
    RUN_DIR,
    RUN_PREFIX,
    repo_label,
)

if TYPE_CHECKING:
    from collections.abc import Iterable

    from supervisor.sandbox.docker import RunResult, RunSpec
    from supervisor.sandbox.egress import Route
    from supervisor.state.store import EventSpec, Store
    from supervisor.workspace.worktrees import Workspace


class AdoptionLost(SupervisorError):
    """An adopted container did not finish cleanly (non-zero exit, gone, past its time limit).

    Most often the crash itself is the cause (the container died with the host, or the proxy
    daemon was killed too and the CLI gave up before `resume` reopened its route). So the step
    counts as interrupted, like any step a crash cut short, and runs afresh in a new worktree;
    it spends no retry and moves no breaker (a real fault shows again on the fresh run and is
    counted then)."""

    default_hint = "Nothing to do: the step runs again."


LABEL_ROLE = "supervisor.role"
LABEL_BASE = "supervisor.base"
LABEL_PORT = "supervisor.route_port"
LABEL_PLACEHOLDER = "supervisor.route"
"""The run's placeholder credential: it names the run's route in the proxy daemon (it is in the
container's environment anyway; the key it stands for is never in a label)."""
_COMMIT = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
_PLACEHOLDER = re.compile(r"sk-supervisor-[0-9a-f]{32}")
ADOPTABLE = ("running", "exited")
"""Container states worth waiting for or reading. Not `created`: the kill came between recording
the container and starting it, so there is no work to save (it is removed and the step re-run);
nor `dead`, `paused`, `restarting`."""


@dataclass(frozen=True)
class Adoption:
    """A worker container of an interrupted step, kept for the engine to take over."""

    container_id: str
    workflow_id: int
    step_id: int
    step: str
    role: str
    attempt: int
    base: str
    port: int | None
    worktree: Path
    run_dir: Path | None
    lower: str | None = None
    """The commit of the base under the worker's copy-on-write view
    (supervisor/workspace/overlay.py);
    None for a fully written worktree."""
    placeholder: str | None = None
    record_dir: Path | None = None
    """A prepared run's record folder (sandbox/warm.py); None: the step's own name for it."""


def prepared_labels(labels: dict[str, str], base: str, route: Route) -> dict[str, str]:
    """A prepared container's (sandbox/warm.py): no step yet, so no step id nor role; its step's
    row names it once a step uses it."""
    extra = {LABEL_BASE: base}
    if route.port is not None:
        extra[LABEL_PORT] = str(route.port)
    if route.placeholder:
        extra[LABEL_PLACEHOLDER] = route.placeholder
    return {**labels, **extra}


def worker_labels(
    labels: dict[str, str], step_id: int, role: str, base: str, route: Route
) -> dict[str, str]:
    """The labels that let a later `resume` match a worker container to its step."""
    extra = {LABEL_STEP_ID: str(step_id), LABEL_ROLE: role, LABEL_BASE: base}
    if route.port is not None:
        extra[LABEL_PORT] = str(route.port)
    if route.placeholder:
        extra[LABEL_PLACEHOLDER] = route.placeholder
    return {**labels, **extra}


def match(
    container_id: str,
    labels: dict[str, str],
    state: str,
    repo: str,
    wf_id: int,
    running_steps: Iterable[dict[str, Any]],
    run_dir: Path | None = None,
) -> Adoption | None:
    """The adoption a container offers, or None. Pure: labels and state against the step rows
    the crash left `running` (`store.steps` rows)."""
    if state not in ADOPTABLE:
        return None
    if labels.get(LABEL_REPO) != repo or labels.get(LABEL_WORKFLOW) != str(wf_id):
        return None
    step_id = labels.get(LABEL_STEP_ID, "")
    base = labels.get(LABEL_BASE, "")
    # A prepared container (sandbox/warm.py) has no step id: the row that names it is its step.
    token = labels.get(warm.LABEL_PREPARED, "") if not step_id else ""
    if token and not warm.TOKEN.fullmatch(token):
        return None
    if not (step_id.isdigit() or token) or not base:
        return None
    port = labels.get(LABEL_PORT, "")
    placeholder = labels.get(LABEL_PLACEHOLDER, "")
    if not _PLACEHOLDER.fullmatch(placeholder):
        placeholder = ""
    lower = labels.get(LABEL_LOWER, "") if labels.get(LABEL_WORKSPACE) == "overlay" else None
    if lower is not None and not _COMMIT.fullmatch(lower):
        return None
    for row in running_steps:
        if token:
            named = row["role"] is not None
        else:
            named = (
                row["id"] == int(step_id)
                and row["name"] == labels.get(LABEL_STEP)
                and row["role"] == labels.get(LABEL_ROLE)
            )
        if (
            named
            and row["workflow_id"] == wf_id
            and row["status"] == "running"
            and row["container_id"] == container_id
            and row["worktree"]
        ):
            return Adoption(
                container_id=container_id,
                workflow_id=wf_id,
                step_id=row["id"],
                step=row["name"],
                role=row["role"],
                attempt=int(row["attempt"]),
                base=base,
                port=int(port) if port.isdigit() else None,
                worktree=Path(row["worktree"]),
                run_dir=run_dir,
                lower=lower,
                placeholder=placeholder or None,
                record_dir=warm.record_dir(labels, token) if token else None,
            )
    return None


def advanced(adoption: Adoption, advances: dict[str, tuple[str, str]]) -> Adoption:
    """A prepared container brought to a later commit while it waited (steps/advance.py) keeps
    the label of the commit it was made from; the state's record of that advance (container ->
    from, to), written before any step took it, says what its workspace shows."""
    moved = advances.get(adoption.container_id)
    if moved is None or moved[0] != adoption.base or not _COMMIT.fullmatch(moved[1]):
        return adoption
    return dataclasses.replace(adoption, base=moved[1])


def find(
    sandbox: Any, store: Store, repo: Path, wf_id: int, workspace: Workspace | None = None
) -> dict[int, Adoption]:
    """Record on `sandbox` (as `adoptable`, by step id) the containers of `wf_id`'s interrupted
    worker steps; the clean-up then leaves them, their worktrees (a copy-on-write view rebuilt
    on `workspace`, its base kept) and their run folders alone."""
    client = getattr(sandbox, "client", None)
    if client is None:
        return {}
    label = repo_label(repo)
    running = [s for s in store.steps(wf_id) if s["status"] == "running"]
    found: dict[int, Adoption] = {}
    if running:
        advances = {
            str(e.payload.get("container")): (str(e.payload.get("from")), str(e.payload.get("to")))
            for e in store.events(wf_id, of_type="prepared_run_advanced")
            if e.payload.get("container")
        }
        filters = {"label": [f"{LABEL_REPO}={label}", f"{LABEL_WORKFLOW}={wf_id}"]}
        for container in client.containers.list(all=True, filters=filters, ignore_removed=True):
            adoption = match(
                container.id,
                container.labels,
                container.status,
                label,
                wf_id,
                running,
                _run_dir(container.attrs, label),
            )
            if adoption is not None:
                adoption = advanced(adoption, advances)
            if adoption is not None and _workspace_kept(adoption, workspace):
                found[adoption.step_id] = adoption
    sandbox.adoptable = found
    return found


def pending(sandbox: Any) -> list[str]:
    """The steps whose containers wait to be adopted."""
    return sorted(a.step for a in getattr(sandbox, "adoptable", {}).values())


def kept_worktrees(sandbox: Any) -> frozenset[str]:
    return frozenset(a.worktree.name for a in getattr(sandbox, "adoptable", {}).values())


def kept_steps(sandbox: Any) -> set[int]:
    return set(getattr(sandbox, "adoptable", {}))


def claim(sandbox: Any, wf_id: int, step: str, role: str, base: str) -> Adoption | None:
    """The engine's worker step asks before it makes a worktree: a match is taken out of the
    pool (and its step goes on with that row, worktree and container)."""
    pool: dict[int, Adoption] = getattr(sandbox, "adoptable", {})
    for step_id, adoption in list(pool.items()):
        if (adoption.workflow_id, adoption.step, adoption.role) == (wf_id, step, role):
            if adoption.base != base:
                # Built on another tree than the step wants now: ended here (it would only
                # spend), its step marked interrupted by `release`, and the step runs afresh.
                _remove(sandbox, adoption.container_id)
                return None
            pool.pop(step_id)
            sandbox.adopting[step_id] = adoption
            return adoption
    return None


def event(adoption: Adoption) -> EventSpec:
    """What the events say when a step takes over its container from a killed run."""
    from supervisor.state.store import EventSpec

    return EventSpec(
        "worker_adopted",
        step=adoption.step,
        role=adoption.role,
        payload={"container": adoption.container_id[:12], "attempt": adoption.attempt},
    )


def route(
    sandbox: Any,
    step_id: int,
    base_url: str,
    injection: Any,
    *,
    placeholder: str | None = None,
    vendor: str | None = None,
    record_dir: Path | None = None,
    task: str | None = None,
) -> Route:
    """The step's route to the model API, closed by `run` when the run ends. For an adopted
    container, the route it was given: re-attached in the proxy daemon by its placeholder (or
    reopened on its port when the daemon is new)."""
    adoption = getattr(sandbox, "adopting", {}).get(step_id)
    options: dict[str, Any] = {"vendor": vendor, "record_dir": record_dir, "task": task}
    opened: Route | None = None
    if adoption is not None and adoption.port is not None:
        from supervisor.core.errors import SandboxError

        with contextlib.suppress(SandboxError):  # port taken: the container fails, and retries
            opened = sandbox.route(
                base_url,
                injection,
                adoption.port,
                placeholder=adoption.placeholder or placeholder,
                **options,
            )
    if opened is None:
        opened = cast(
            "Route", sandbox.route(base_url, injection, placeholder=placeholder, **options)
        )
    routes: dict[int, Route] = sandbox.__dict__.setdefault("step_routes", {})
    routes[step_id] = opened
    return opened


def run(sandbox: Any, step_id: int, spec: RunSpec) -> RunResult:
    """Adopt the step's container if it has one, else start a new one; its route closes with it
    (but for a worker a stop leaves running, or one the Docker engine stopped answering about,
    which may still run: see `end_route`)."""
    left = False
    try:
        return _run(sandbox, step_id, spec)
    except (Terminated, DockerUnavailableError):
        left = spec.keep
        raise
    finally:
        end_route(sandbox, step_id, left=left)


def end_route(sandbox: Any, step_id: int, *, left: bool = False) -> None:
    """The step's route closes when its run ends. `left`: the run's worker goes on after a stop
    (`Terminated`), so its route stays open in the proxy daemon, this process no longer its
    owner, for `resume` to re-attach (`route`) as after a kill."""
    opened = sandbox.__dict__.get("step_routes", {}).pop(step_id, None)
    if opened is None:
        return
    if left:
        leave = getattr(sandbox, "leave_route", None)
        if leave is not None:
            leave(opened)
    elif hasattr(sandbox, "close_route"):
        sandbox.close_route(opened)


def _run(sandbox: Any, step_id: int, spec: RunSpec) -> RunResult:
    adoption = getattr(sandbox, "adopting", {}).pop(step_id, None)
    if adoption is None:
        result: RunResult = sandbox.run(spec)
        return result
    try:
        result = sandbox.adopt(adoption.container_id, spec)
    except CommandTimeoutError as e:
        raise AdoptionLost(f"The adopted worker of '{adoption.step}': {e.message}") from e
    finally:
        _remove_run_dir(adoption.run_dir)
    if result.exit_code != 0:  # its step runs afresh: nothing of this run is kept
        _remove(sandbox, adoption.container_id)
        tail = (result.stderr or result.stdout).strip()[-300:]
        raise AdoptionLost(
            f"The adopted worker of '{adoption.step}' ended with exit {result.exit_code}: {tail}"
        )
    return result


def interrupted(store: Store, step_id: int, step: str, role: str, error: SupervisorError) -> None:
    """Record as interrupted an adopted step that did not finish cleanly (see AdoptionLost),
    or a step whose container died with the Docker engine (engine_loss.RunLost)."""
    from supervisor.state.store import EventSpec

    event = EventSpec(
        "step_interrupted",
        step=step,
        role=role,
        status="interrupted",
        payload={"error": error.message, "adopted": isinstance(error, AdoptionLost)},
    )
    store.finish_step(step_id, "interrupted", error=error.message, event=event)


def release(sandbox: Any, store: Store, workspace: Workspace) -> list[str]:
    """Adoptions the engine never reached (it went another way): removed like any leftover,
    their steps marked interrupted. Returns the step names."""
    left = {**getattr(sandbox, "adoptable", {}), **getattr(sandbox, "adopting", {})}
    for pool in ("adoptable", "adopting"):
        getattr(sandbox, pool, {}).clear()
    names: list[str] = []
    for adoption in left.values():
        _remove(sandbox, adoption.container_id)
        _remove_run_dir(adoption.run_dir)
        workspace.remove_worktree(adoption.worktree)
        names.append(adoption.step)
    if left:
        wf_ids = {a.workflow_id for a in left.values()}
        for wf_id in wf_ids:
            store.interrupt_running_steps(wf_id)
    return names


def _remove(sandbox: Any, container_id: str) -> None:
    """The container, and its overlay volume if it has one."""
    sandbox.remove_run(container_id)


def _run_dir(attrs: dict[str, Any], label: str) -> Path | None:
    """The container's run folder (prompt, schema, login files), if it is one of ours."""
    for mount in attrs.get("Mounts") or []:
        if mount.get("Destination") == RUN_DIR:
            source = Path(str(mount.get("Source") or ""))
            if source.parent == Path(tempfile.gettempdir()) and source.name.startswith(
                f"{RUN_PREFIX}{label}-"
            ):
                return source
    return None


def _remove_run_dir(path: Path | None) -> None:
    if path is not None and path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)


def _workspace_kept(adoption: Adoption, workspace: Workspace | None) -> bool:
    """Whether the step's workspace can be taken over as it is: a fully written worktree, or a
    copy-on-write view rebuilt from the container's labels over the task's base, which then
    stays (overlay.remove_bases keeps a base a view uses)."""
    try:
        if not stat.S_ISDIR(os.lstat(adoption.worktree).st_mode):
            return False
    except OSError:
        return False
    if adoption.lower is None:
        # A view the container's labels do not name (one that fell back to a full tree) is
        # run again. lstat only: a worker may have planted either name in its worktree (as a
        # symlink too); it then loses only its own adoption, never makes the host follow it.
        return not all(os.path.lexists(adoption.worktree / n) for n in ("upper", "dot-git"))
    if workspace is None:
        return False
    owner = f"wf{adoption.workflow_id}"
    if workspace.overlays is None or workspace.overlays.bases_dir.name != owner:
        # Before the engine chooses its workspaces: new steps get full trees until it does.
        workspace.use_overlay(owner=owner, enabled=False)
    overlays = workspace.overlays
    assert overlays is not None
    return overlays.adopt(adoption.worktree, adoption.base, adoption.lower)
