"""A worker's container and command line, one definition for the worker step (steps/worker.py)
and its preparation (steps/prepare.py), so that the two make the same container: a prepared
one is used only when its fingerprint is the step's own (sandbox/warm.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from supervisor.context import prompts
from supervisor.sandbox.docker import RunSpec

if TYPE_CHECKING:
    from pathlib import Path

    from supervisor.context.roles import Role
    from supervisor.guard.credentials import Credentials
    from supervisor.sandbox.egress import Route
    from supervisor.state.store import Workflow
    from supervisor.workers.base import Invocation
    from supervisor.workflow.steps.base import StepContext


def container_spec(
    c: StepContext,
    role: Role,
    invocation: Invocation,
    cli_settings: Any,
    creds: Credentials,
    route: Route,
    worktree: Path,
    image: str | None,
    cli: str,
) -> RunSpec:
    """A worker's RunSpec, but for its prompt, labels, callbacks and folders (the step adds
    them): one function for the step and its preparation, so that they make the same container."""
    limits = c.settings.limits
    return RunSpec(
        argv=invocation.argv,
        worktree=worktree,
        image=image,
        env={**cli_settings.extra_env, **role.env, **invocation.env, **creds.env},
        home_files={**invocation.home_files, **creds.home_files},
        run_files={"output_schema.json": prompts.schema_text(role.schema, cli)},
        network=c.settings.sandbox.egress_network,
        route=route,
        timeout=limits.step_timeout_seconds,
        memory=limits.worker_memory,
        cpus=limits.worker_cpus,
        idle_timeout=limits.idle_timeout_seconds,
    )


def invocation_for(
    c: StepContext,
    wf: Workflow,
    name: str,
    role: Role,
    cli: str,
    cli_settings: Any,
    creds: Any,
    base_url: str,
) -> tuple[str, Invocation]:
    """The model and the CLI's command line, as the worker step builds them."""
    from supervisor.policy import budgets
    from supervisor.workers import adapter_for

    adapter = adapter_for(cli)
    model = role.model_for(cli, cli_settings.default_model, cli_settings.model)
    schema_file = "/run/supervisor/output_schema.json" if adapter.supports_json_schema else None
    invocation = adapter.build(
        model=model,
        base_url=base_url,
        workdir="/workspace",
        extra_flags=[
            *cli_settings.extra_flags,
            *role.flags,
            *budgets.cli_flags(adapter.budget_flag, budgets.remaining_usd(c.store, wf, name)),
        ],
        api_key_env=next(iter(creds.env), None),
        schema_path=schema_file,
    )
    return model, invocation
