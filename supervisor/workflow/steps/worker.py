"""The worker step: one fresh AI CLI run in a sandbox, from prompt to a parsed answer.

It composes the prompt (task, plan, feedback, packed context), runs the CLI in a container with
the credentials injected by the egress proxy, classifies a failed run for the engine's recovery
policy, and hands a parsed answer to the result handler for its role's output kind
(supervisor.workflow.steps.results). It writes no workflow progress: the finished step run goes
back in the Outcome's records for the engine to commit with its transition.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from supervisor.context.roles import load_role
from supervisor.core import host_faults
from supervisor.core.errors import (
    CommandTimeoutError,
    CredentialsError,
    SandboxError,
    SupervisorError,
)
from supervisor.guard import credentials
from supervisor.policy import recovery
from supervisor.sandbox import adopt, engine_loss, warm
from supervisor.sandbox.docker import RUN_PREFIX, run_dir_label
from supervisor.state.store import now
from supervisor.workflow import continuation
from supervisor.workflow.cli_choice import cli_for
from supervisor.workflow.steps import prepare, witnessing
from supervisor.workflow.steps.base import (
    Outcome,
    StepContext,
    err,
    message,
)
from supervisor.workflow.steps.worker_run import WorkerRun

if TYPE_CHECKING:
    from pathlib import Path

    from supervisor.context.roles import Role
    from supervisor.core.dag import Component
    from supervisor.state.store import Workflow


def run_worker(
    c: StepContext,
    wf: Workflow,
    name: str,
    role_name: str,
    *,
    base: str | None = None,
    component: Component | None = None,
    branch: str | None = None,
    attempt: int | None = None,
) -> Outcome:
    """One fresh worker run; `base` overrides where its worktree starts, `component` narrows its
    task to one planned component, `branch` (set by the component fan-out) is where its commit
    lands instead of the candidate, `attempt` overrides the attempt number (a fix-up that
    continues a component's count)."""
    role = load_role(role_name, c.repo)
    chosen = _cli(c, wf, role)
    if isinstance(chosen, Outcome):
        return chosen
    cli, cli_settings, creds = chosen
    tip = c.ws.branch_tip(wf.task_branch)
    if base is None:
        base = _base(wf, tip)
    asked_attempt = attempt
    begun = _begin(c, wf, name, role.name, cli, base, creds, attempt)
    attempt, worktree, step_id = begun.attempt, begun.worktree, begun.step_id
    creds, prepared = begun.creds, begun.prepared
    c.reporter.step(wf.id, name, f"{role.name} via {cli} (attempt {attempt})")
    run = WorkerRun(c, wf, name, role, cli, step_id)
    run.prepared = prepared
    run.record_dir = _record_dir(c, wf, name, step_id, prepared, begun.adopted)
    outcome: Outcome | None = None
    kept = False  # left for `resume` to adopt: see host_faults.leaves_runs
    try:
        outcome = run.invoke(cli_settings, creds, worktree, base, tip, component, branch)
    except (adopt.AdoptionLost, engine_loss.RunLost) as e:
        # Cut short by the crash, or died with the Docker engine: run afresh, as if interrupted.
        adopt.interrupted(c.store, step_id, name, role.name, e)
    except (SandboxError, CommandTimeoutError) as e:
        # A hung worker (idle or time limit) is ended by the sandbox and retried; a sandbox
        # that cannot run at all (or ran out of memory) goes to a human.
        why = recovery.classify_exception(e)
        escalate = e if why.action == recovery.Action.ESCALATE else None
        payload = {**err(e), "category": str(why.category)}
        record = run.record("worker_failed", message(e), payload, category=str(why.category))
        outcome = Outcome(
            "failed", escalate=escalate, transient=None if escalate else why, records=[record]
        )
    except BaseException as e:  # a stop from outside, a full disk after the model answered...
        kept = host_faults.leaves_runs(e)
        raise
    finally:
        if prepared is not None and prepared.warm is not None:  # never reached its run
            warm.discard(prepared.warm)
        if outcome is not None and any(r.step_id == step_id for r in outcome.records):
            # What holds its answer and its changes stays until the caller records the step's
            # end: a kill before that leaves them for `resume` to adopt, not to buy again.
            c.store.after_record.wait_for(step_id, run.leftovers(worktree))
        elif not kept:
            run.leftovers(worktree)()
    if outcome is not None and run.home is not None:  # a role that may continue its session
        continuation.after_run(outcome, cli, run.session_id, run.home)
    if outcome is None:
        return run_worker(
            c,
            wf,
            name,
            role_name,
            base=base,
            component=component,
            branch=branch,
            attempt=asked_attempt,
        )
    outcome.cli = cli
    return outcome


def _cli(
    c: StepContext, wf: Workflow, role: Role
) -> tuple[str, Any, credentials.Credentials] | Outcome:
    """The CLI that runs the role, its settings and credentials; a failure for a person when
    either is missing."""
    # The engine's choice (adaptive) first, then the role's list, past unavailable CLIs.
    cli = cli_for(role, wf.cli, wf.context, preferred=c.routes.get(role.name))
    cli_settings = c.settings.clis.get(cli)
    if cli_settings is None:
        return Outcome(
            "failed",
            escalate=SupervisorError(
                f"No settings for the '{cli}' CLI.", "Add it under `clis:` in the config."
            ),
        )
    try:
        creds = credentials.collect(cli, cli_settings)
    except CredentialsError as e:
        return Outcome("failed", escalate=e, cli=cli)
    return cli, cli_settings, creds


def _base(wf: Workflow, tip: str) -> str:
    """Where a step's worktree starts. Every step works on the integrated result so far:
    reviewers judge it, implementers build on it (a fix-up after a gate or a review keeps what
    already passed). Only before any candidate exists does a step start from the locked
    interfaces or the task branch."""
    candidate = wf.context.get("candidate")
    return candidate or wf.context.get("locked_sha") or tip


@dataclasses.dataclass(frozen=True)
class _Begun:
    """The step run a worker run belongs to, however it began."""

    attempt: int
    worktree: Path
    step_id: int
    creds: credentials.Credentials
    prepared: prepare.Prepared | None
    adopted: adopt.Adoption | None


def _begin(
    c: StepContext,
    wf: Workflow,
    name: str,
    role: str,
    cli: str,
    base: str,
    creds: credentials.Credentials,
    attempt: int | None,
) -> _Begun:
    """Which run this is: a killed run's container adopted (its attempt, worktree and step row
    go on), one prepared while the previous step ran (its worktree and credentials), or a fresh
    worktree; a step row is started for all but the adopted."""
    adopted = adopt.claim(c.sandbox, wf.id, name, role, base)  # a killed run's container
    prepared = None  # made while the previous step ran (steps/prepare.py)
    if adopted is None:
        prepared = prepare.take(c, wf.id, role, cli, base, creds)
    if adopted is not None:
        attempt, worktree, step_id = adopted.attempt, adopted.worktree, adopted.step_id
        c.store.add_event(wf.id, adopt.event(adopted))
    else:
        if attempt is None:
            attempt = c.store.count_steps(wf.id, name, role) + 1
        began = now()  # the step's time includes making its worktree
        if prepared is not None:
            worktree = prepared.worktree
        else:
            worktree = c.ws.add_worktree(f"wf{wf.id}-{name}-{role}-{attempt}", base)
        step_id = c.store.start_step(wf.id, name, attempt, role, str(worktree), began)
    if prepared is not None:
        creds = prepared.creds  # its placeholder is the one its route and container know
        prepare.used(c, prepared, name, step_id)
    return _Begun(attempt, worktree, step_id, creds, prepared, adopted)


def _record_dir(
    c: StepContext,
    wf: Workflow,
    name: str,
    step_id: int,
    prepared: prepare.Prepared | None,
    adopted: adopt.Adoption | None,
) -> Path:
    """Where the proxy records the run: the folder a prepared run was given (adopted or not),
    else one named after the step."""
    if prepared is not None:
        return prepared.record_dir
    if adopted is not None and adopted.record_dir is not None:  # a prepared run, adopted
        return adopted.record_dir
    label = f"{RUN_PREFIX}{run_dir_label(c.labels(wf.id, name))}"
    return witnessing.new_record_dir(label, step_id)
