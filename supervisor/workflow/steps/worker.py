"""The worker step: one fresh AI CLI run in a sandbox, from prompt to a parsed answer.

It composes the prompt (task, plan, feedback, packed context), runs the CLI in a container with
the credentials injected by the egress proxy, classifies a failed run for the engine's recovery
policy, and hands a parsed answer to the result handler for its role's output kind
(supervisor.workflow.steps.results). It writes no workflow progress: the finished step run goes
back in the Outcome's records for the engine to commit with its transition.
"""

from __future__ import annotations

import dataclasses
import time
from typing import TYPE_CHECKING, Any

from supervisor.context import project_scope, prompts
from supervisor.context.plan_view import plan_files, plan_for_prompt
from supervisor.context.roles import Role, load_role
from supervisor.core import faults, host_faults
from supervisor.core.errors import (
    CommandTimeoutError,
    ConfigError,
    CredentialsError,
    ParsingError,
    SandboxError,
    SupervisorError,
)
from supervisor.core.parsing import parse_worker_output
from supervisor.gates import base_oracle
from supervisor.guard import credentials, protected
from supervisor.policy import budgets, recovery
from supervisor.sandbox import adopt, model_paths, warm
from supervisor.sandbox.docker import RUN_PREFIX, run_dir_label
from supervisor.state.store import EventSpec, StepRecord, now
from supervisor.workers import adapter_for
from supervisor.workflow import continuation, depth, plan_projects
from supervisor.workflow.cli_choice import cli_for
from supervisor.workflow.steps import assessing, prepare, results, witnessing, worker_spec
from supervisor.workflow.steps.base import (
    LineSplitter,
    Outcome,
    StepContext,
    candidate_ref,
    err,
    feedback_of,
    message,
)
from supervisor.workflow.steps.images import image_for
from supervisor.workspace.treedata import CommitFiles

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

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
    candidate = wf.context.get("candidate")
    tip = c.ws.branch_tip(wf.task_branch)
    if base is None:
        # Every step works on the integrated result so far: reviewers judge it, implementers
        # build on it (a fix-up after a gate or a review keeps what already passed). Only
        # before any candidate exists does a step start from the locked interfaces or the
        # task branch.
        base = candidate or wf.context.get("locked_sha") or tip
    asked_attempt = attempt
    adopted = adopt.claim(c.sandbox, wf.id, name, role.name, base)  # a killed run's container
    prepared = None  # made while the previous step ran (steps/prepare.py)
    if adopted is None:
        prepared = prepare.take(c, wf.id, role.name, cli, base, creds)
    if adopted is not None:
        attempt, worktree, step_id = adopted.attempt, adopted.worktree, adopted.step_id
        c.store.add_event(wf.id, adopt.event(adopted))
    else:
        if attempt is None:
            attempt = c.store.count_steps(wf.id, name, role.name) + 1
        began = now()  # the step's time includes making its worktree
        if prepared is not None:
            worktree = prepared.worktree
        else:
            worktree = c.ws.add_worktree(f"wf{wf.id}-{name}-{role.name}-{attempt}", base)
        step_id = c.store.start_step(wf.id, name, attempt, role.name, str(worktree), began)
    if prepared is not None:
        creds = prepared.creds  # its placeholder is the one its route and container know
        prepare.used(c, prepared, name, step_id)
    c.reporter.step(wf.id, name, f"{role.name} via {cli} (attempt {attempt})")
    run = _Run(c, wf, name, role, cli, step_id)
    label = f"{RUN_PREFIX}{run_dir_label(c.labels(wf.id, name))}"
    run.prepared = prepared
    if prepared is not None:
        run.record_dir = prepared.record_dir
    elif adopted is not None and adopted.record_dir is not None:  # a prepared run, adopted
        run.record_dir = adopted.record_dir
    else:
        run.record_dir = witnessing.new_record_dir(label, step_id)
    outcome: Outcome | None = None
    kept = False  # left for `resume` to adopt: see host_faults.leaves_runs
    try:
        outcome = run.invoke(cli_settings, creds, worktree, base, tip, component, branch)
    except adopt.AdoptionLost as e:  # cut short by the crash: run afresh, as if interrupted
        adopt.interrupted(c.store, step_id, name, role.name, e)
    except (SandboxError, CommandTimeoutError) as e:
        # A hung worker (idle or time limit) is ended by the sandbox and retried; a sandbox
        # that cannot run at all (or ran out of memory) goes to a human.
        why = recovery.classify_exception(e)
        escalate = e if why.action == recovery.Action.ESCALATE else None
        record = StepRecord(
            step_id,
            "failed",
            error=message(e),
            event=EventSpec(
                "worker_failed",
                step=name,
                role=role.name,
                status="failed",
                payload={**err(e), "category": str(why.category)},
            ),
            invocation=run.invocation("", False, 0.0, {}, str(why.category)),
        )
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


class _Run:
    """One worker run's fixed facts, so the helpers below take only what varies."""

    def __init__(
        self, c: StepContext, wf: Workflow, name: str, role: Role, cli: str, step_id: int
    ) -> None:
        self.c = c
        self.wf = wf
        self.name = name
        self.role = role
        self.cli = cli
        self.step_id = step_id
        self.home: Path | None = None  # a kept home, when the role may continue its session
        self.session_id: str | None = None
        self.record_dir: Path | None = None  # where the proxy records the run (witnessing.py)
        self.prepared: prepare.Prepared | None = None
        self.container_id: str | None = None  # kept (exited) until the step's end is recorded

    def leftovers(self, worktree: Path) -> Callable[[], None]:
        """The clean-up of what the run leaves: its container, worktree and model record."""

        def clean() -> None:
            remove_run = getattr(self.c.sandbox, "remove_run", None)
            if self.container_id is not None and remove_run is not None:
                remove_run(self.container_id)
            self.c.ws.remove_worktree(worktree)
            if self.record_dir is not None:
                witnessing.remove_record_dir(self.record_dir)

        return clean

    def invocation(
        self,
        model: str,
        success: bool,
        duration: float,
        usage: dict[str, Any],
        category: str | None,
    ) -> dict[str, Any]:
        """One metrics row per worker run: what ran, how it went, what it cost."""
        return {
            "workflow_id": self.wf.id,
            "step": self.name,
            "role": self.role.name,
            "cli": self.cli,
            "model": model,
            "task_type": self.role.output,
            "success": success,
            "retries": self.c.store.count_steps(self.wf.id, self.name, self.role.name) - 1,
            "duration_s": round(duration, 3),
            "input_tokens": int(usage.get("input_tokens") or 0),
            "output_tokens": int(usage.get("output_tokens") or 0),
            "cost_usd": float(usage.get("cost_usd") or 0.0),
            "error_category": category,
        }

    def invoke(
        self,
        cli_settings: Any,
        creds: credentials.Credentials,
        worktree: Path,
        base: str,
        tip: str,
        component: Component | None,
        branch: str | None,
    ) -> Outcome:
        c, wf, name, role, cli, step_id = (
            self.c,
            self.wf,
            self.name,
            self.role,
            self.cli,
            self.step_id,
        )
        adapter = adapter_for(cli)
        if self.prepared is not None:
            route = self.prepared.route
        else:
            route = adopt.route(
                c.sandbox,
                self.step_id,
                cli_settings.base_url,
                creds.injection,
                placeholder=creds.placeholder,
                vendor=model_paths.VENDOR_OF_CLI.get(cli),
                record_dir=self.record_dir,
                task=run_dir_label(c.labels(wf.id, self.name)),
            )
        plan = wf.context.get("plan")
        task = wf.description
        if component is not None:
            targets = component.files
            task += component_task(component)
        elif base != tip:
            targets = c.ws.changed_files(tip, base)
        else:
            targets = plan_files(plan)
        files = CommitFiles(c.ws.git_dir, base)  # what the worktree holds, read as blobs
        projects = protected.project_map(wf.context, c.settings)  # as the task started
        prompt, pack = prompts.compose(
            role,
            c.repo,
            files,
            task=task,
            feedback=feedback_of(wf.context).get(name, []),
            plan=plan_for_prompt(plan, component),
            targets=targets,
            diff=c.ws.diff(tip, base) if base != tip else "",
            run_id=f"wf{wf.id}-{name}-{role.name}-step{step_id}",
            degrade=(wf.context.get("degraded") or {}).get(name),  # the engine's decision
            research=depth.research_document(wf.context) if role.output == "plan" else "",
            scope=project_scope.for_component(c.settings, component, projects),
            projects=plan_projects.for_prompt(projects),
            ahead=prepare.packs(c),  # gathered while the step before ran, for these inputs only
            tests_changed=base_oracle.lines_for(wf.context, c.ws.tree_hash(base)),
        )
        try:
            resumed = continuation.begin(self, c, wf, prompt)
        except ConfigError as e:
            return Outcome("failed", escalate=e)
        prompt = resumed.prompt
        model, invocation = worker_spec.invocation_for(
            c, wf, name, role, cli, cli_settings, creds, route.url
        )
        invocation = dataclasses.replace(invocation, argv=resumed.argv(cli, invocation.argv))
        limits = c.settings.limits
        prompt_bytes = len(prompt.encode())
        if prompt_bytes > limits.max_prompt_bytes:
            error = ConfigError(
                f"The prompt for '{name}' ({role.name}) is {prompt_bytes} bytes, over "
                f"limits.max_prompt_bytes ({limits.max_prompt_bytes}); it was not sent.",
                f"Lower context.token_budget for '{role.name}', shorten the task, or raise "
                "limits.max_prompt_bytes.",
            )
            record = StepRecord(
                step_id,
                "failed",
                error=error.message,
                event=EventSpec(
                    "prompt_too_large",
                    step=name,
                    role=role.name,
                    status="failed",
                    payload={"prompt_bytes": prompt_bytes, **err(error)},
                ),
            )
            return Outcome("failed", escalate=error, records=[record])
        c.store.add_event(
            wf.id,
            EventSpec(
                "context_packed",
                step=name,
                role=role.name,
                payload={
                    **pack.summary(),
                    "prompt_bytes": len(prompt.encode()),
                    "credentials": creds.source,
                },
            ),
        )
        image = image_for(c, wf, name, files)
        spec = dataclasses.replace(
            worker_spec.container_spec(
                c, role, invocation, cli_settings, creds, route, worktree, image, cli
            ),
            stdin_text=prompt,
            labels=adopt.worker_labels(c.labels(wf.id, name), self.step_id, role.name, base, route),
            on_output=LineSplitter(adapter.progress, c.reporter.output),
            on_start=lambda cid: _started(c, step_id, cid),
            keep=True,  # until the step's end is recorded (`leftovers`)
            home_dir=self.home,
            record_dir=self.record_dir,
        )
        # The prepared container when it is exactly this one; else the container a killed run
        # left for this step, or a new one.
        stdin = adapter.late_prompt(prompt)
        run = prepare.run(c, self.step_id, self.prepared, spec, base, stdin)
        if run is None:
            run = adopt.run(c.sandbox, self.step_id, spec)
        self.container_id = run.container_id or None
        faults.reached("worker_ran")  # read, its end not yet recorded (tests/test_adopt_e2e.py)
        printed = adapter.parse_output(run.stdout, run.stderr, run.exit_code)
        settled = witnessing.settle(
            cli,
            self.record_dir,
            printed,
            c.settings,
            model,
            time.time(),
            record_required=getattr(c.sandbox, "records_model_exchanges", False),
        )
        result = settled.result
        self.session_id = result.session_id
        c.reporter.info(
            f"{cli} finished in {run.duration:.1f} s: exit {run.exit_code}, "
            f"{result.num_turns or 0} turns, {result.input_tokens} in / {result.output_tokens} "
            f"out tokens, ${result.cost_usd:.4f}"
        )
        usage: dict[str, Any] = {
            "input_tokens": result.input_tokens,
            "output_tokens": result.output_tokens,
            "cost_usd": result.cost_usd,
        }
        usage["cost_usd"] = budgets.priced(c.settings, model, usage)  # where none reported
        base_payload = {
            "exit_code": run.exit_code,
            "duration_s": round(run.duration, 3),
            "session_id": result.session_id,
            "num_turns": result.num_turns,
            "witnessed": settled.witnessed is not None,  # False: read from stdout (no record)
        }
        if settled.tampered is not None:
            tampered = settled.tampered
            record = StepRecord(
                step_id,
                "failed",
                error=tampered.message,
                event=EventSpec(
                    "result_tampered",
                    step=name,
                    role=role.name,
                    status="failed",
                    payload={
                        **base_payload,
                        **err(tampered),
                        "printed_tail": printed.text[-2000:],
                        "api_tail": result.text[-2000:],
                    },
                    **usage,
                ),
                invocation=self.invocation(model, False, run.duration, usage, "tampered"),
            )
            return Outcome("failed", escalate=tampered, records=[record])
        if not result.ok:
            error_text = f"The {cli} worker failed ({result.error_kind}): {result.error}"
            why = recovery.classify_worker(result)
            escalate = None
            if why.action == recovery.Action.ESCALATE:
                escalate = CredentialsError(
                    error_text, credentials.LOGIN_HINTS.get(cli, "Check the CLI's credentials.")
                )
            record = StepRecord(
                step_id,
                "failed",
                error=error_text,
                event=EventSpec(
                    "worker_failed",
                    step=name,
                    role=role.name,
                    status="failed",
                    payload={
                        **base_payload,
                        "error": error_text,
                        "category": str(why.category),
                        "action": str(why.action),
                        "retry_after": result.retry_after,
                    },
                    **usage,
                ),
                invocation=self.invocation(model, False, run.duration, usage, str(why.category)),
            )
            if why.action == recovery.Action.RETRY_WITH_FEEDBACK:
                return Outcome("failed", feedback=error_text, records=[record])
            return Outcome(
                "failed",
                escalate=escalate,
                transient=None if escalate else why,
                records=[record],
            )
        try:
            output = parse_worker_output(result.text, role.schema)
        except ParsingError as e:
            c.reporter.info(f"answer not usable: {e.message}")
            status = "rejected" if role.output == "review" else "failed"
            why = recovery.classify_exception(e)
            record = StepRecord(
                step_id,
                status,
                error=e.message,
                invocation=self.invocation(model, False, run.duration, usage, str(why.category)),
                event=EventSpec(
                    "output_invalid",
                    step=name,
                    role=role.name,
                    status=status,
                    payload={
                        **base_payload,
                        "error": e.message,
                        "answer_tail": result.text[-2000:],
                    },
                    **usage,
                ),
            )
            return Outcome("failed", feedback=e.message, records=[record])
        # The outcome is said once the answer is validated, not when the CLI says it is done.
        c.reporter.info(f"answer valid: {getattr(output, 'status', 'ok')}")
        done = results.Answer(
            c=c,
            wf=wf,
            name=name,
            role=role,
            step_id=step_id,
            data=output.model_dump(),
            payload={**base_payload},
            usage=usage,
            invocation=self.invocation(model, True, run.duration, usage, None),
        )
        done.payload["output"] = done.data
        if role.output == "implementation":
            # A component's commit lands on its branch in the fan-out (branch set); a fix-up
            # named after its component works on the candidate like any plain step.
            ref = f"refs/heads/{branch}" if branch is not None else candidate_ref(wf.id)
            return results.implementation(done, worktree, base, ref, in_fan_out=branch is not None)
        if role.output == "review":
            return results.review(done, base)
        if role.output in ("analysis", "research"):
            return assessing.answer(done)
        return results.plan(done)


def _started(c: StepContext, step_id: int, container_id: str) -> None:
    """The step's row names its container (a kill from here on leaves it to adopt), and what is
    prepared for the step after next may start now (steps/prepare.py)."""
    c.store.set_step_container(step_id, container_id)
    prepare.prompted(c)


def component_task(component: Component) -> str:
    files = ", ".join(component.files) or "(the plan names none)"
    return (
        f"\n\nYour part of this task is one component of the plan: '{component.id}' (phase "
        f"{component.phase}): {component.description}\nIts files: {files}\nOther workers build "
        "the other components at the same time: change only what this component needs."
        + (
            f"\nIt belongs to project '{component.project}' of this monorepo: change files of "
            "that project (and the shared paths) only."
            if component.project
            else ""
        )
    )
