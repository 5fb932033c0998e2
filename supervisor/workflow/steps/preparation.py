"""One preparation: what an expected worker step will need, made ahead of it, and its end.

The making (the worktree, credentials and proxy route, the container started with its CLI
waiting for a prompt) and the undoing of one preparation; which are made, when, and which are
taken is steps/prepare.py's (the pipeline).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

from supervisor.sandbox import adopt, model_paths, warm
from supervisor.sandbox.docker import run_dir_label
from supervisor.state.store import EventSpec
from supervisor.workflow.steps.worker_spec import container_spec, invocation_for

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from supervisor.guard.credentials import Credentials
    from supervisor.sandbox.egress import Route
    from supervisor.sandbox.warm import Warm
    from supervisor.state.store import Workflow
    from supervisor.workflow.lookahead import Expected
    from supervisor.workflow.steps.base import StepContext

PREFIX = "prep-"
"""Prepared worktrees are `wf<id>-prep-<role>-<token>`: the task's clean-up takes them too."""


@dataclass
class Prepared:
    """What one expected worker step will need, made ahead."""

    wf_id: int
    role: str
    cli: str
    base: str
    worktree: Path
    creds: Credentials
    route: Route
    record_dir: Path
    warm: warm.Warm | None
    later: Callable[[], Warm | None] | None = None
    """Starts its container: a successor not started at once (lookahead.plan), started by the
    pipeline once cores are idle while the step before still runs."""
    claimed: bool = False
    """Taken by its step or discarded: nothing is attached to it any more."""


def prepare_worker(c: StepContext, wf: Workflow, expected: Expected) -> Prepared | None:
    """Make what `expected` will need, or None when it cannot be made ahead (a CLI that reads
    its prompt first, a role that continues sessions, an image still to build, no Docker)."""
    from supervisor.context.roles import load_role
    from supervisor.guard import credentials
    from supervisor.project import project_image
    from supervisor.workers import adapter_for
    from supervisor.workflow import continuation
    from supervisor.workflow.cli_choice import cli_for
    from supervisor.workspace.treedata import CommitFiles

    role = load_role(expected.role, c.repo)
    if continuation.enabled(c.settings, role):
        return None
    cli = cli_for(role, wf.cli, wf.context, preferred=expected.cli)
    cli_settings = c.settings.clis.get(cli)
    if cli_settings is None:
        return None
    adapter = adapter_for(cli)
    if not adapter.late_prompt_flags:
        return None
    creds = credentials.collect(cli, cli_settings)
    files = CommitFiles(c.ws.git_dir, expected.base)
    wanted = project_image.image_for(c.repo, files, c.sandbox.base_image_id())
    if wanted is not None and not project_image.exists(c.sandbox.client, wanted.tag):
        return None  # the step builds it (or asks a person first): not done ahead
    image = wanted.tag if wanted is not None else None
    token = warm.new_token()
    labels = c.labels(wf.id, expected.step)
    task = run_dir_label(labels)
    worktree = c.ws.add_worktree(f"wf{wf.id}-{PREFIX}{role.name}-{token}", expected.base)
    record_dir = warm.record_dir(labels, token)
    route: Route | None = None
    try:
        record_dir.mkdir(mode=0o700)
        route = c.sandbox.route(
            cli_settings.base_url,
            creds.injection,
            placeholder=creds.placeholder,
            vendor=model_paths.VENDOR_OF_CLI.get(cli),
            record_dir=record_dir,
            task=task,
        )
        _, invocation = invocation_for(
            c, wf, expected.step, role, cli, cli_settings, creds, route.url
        )
        spec = container_spec(
            c,
            role,
            invocation,
            cli_settings,
            creds,
            route,
            worktree,
            image,
            cli,
        )
        # What an adoption checks (sandbox/adopt.py): the base, and the route to re-attach.
        spec.labels = adopt.prepared_labels(labels, expected.base, route)
        late_flags = adapter.late_prompt_flags

        def start(shares: int = warm.BACKGROUND_SHARES) -> warm.Warm | None:
            return warm.prepare(c.sandbox, spec, expected.base, late_flags, token, shares)  # type: ignore[arg-type]

        prepared = None  # a sandbox without containers (the stand-in): worktree and route only
        containers = hasattr(c.sandbox, "finish_prepared")
        if expected.container and containers:
            prepared = start(
                warm.FOREGROUND_SHARES if expected.foreground else warm.BACKGROUND_SHARES
            )
    except BaseException:
        _undo(c, worktree, route, record_dir)
        raise
    base = expected.base
    made = Prepared(wf.id, role.name, cli, base, worktree, creds, route, record_dir, prepared)
    if containers and not expected.container:
        made.later = start
    return made


def discard(c: StepContext, made: Prepared, why: str) -> None:
    started = made.warm is not None
    if made.warm is not None:
        warm.discard(made.warm)
        made.warm = None
    _undo(c, made.worktree, made.route, made.record_dir)
    record_event(c, made, "discarded", why, container=started)


def used(c: StepContext, made: Prepared, step: str, step_id: int) -> None:
    """The step took the preparation: its route is the step's, closed with its run as any
    step's (adopt.run)."""
    routes: dict[int, Route] = c.sandbox.__dict__.setdefault("step_routes", {})
    routes[step_id] = made.route
    c.store.add_event(
        made.wf_id,
        EventSpec(
            "prepared_run_used",
            step=step,
            role=made.role,
            payload={"cli": made.cli, "base": made.base, "container": made.warm is not None},
        ),
    )


def record_event(
    c: StepContext, made: Prepared, what: str, why: str, container: bool = True
) -> None:
    """`container`: whether a started container (a CLI's start-up) went with it."""
    with contextlib.suppress(Exception):  # an event never fails the step
        c.store.add_event(
            made.wf_id,
            EventSpec(
                f"prepared_run_{what}",
                role=made.role,
                payload={"cli": made.cli, "base": made.base, "reason": why, "container": container},
            ),
        )


def _undo(c: StepContext, worktree: Path, route: Route | None, record_dir: Path) -> None:
    import shutil

    if route is not None and hasattr(c.sandbox, "close_route"):
        with contextlib.suppress(Exception):
            c.sandbox.close_route(route)
    with contextlib.suppress(Exception):
        c.ws.remove_worktree(worktree)
    shutil.rmtree(record_dir, ignore_errors=True)
