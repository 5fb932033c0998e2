"""The workflow engine: walks the state machine one step at a time, checkpointing every move.

Where work lives between steps: a worker's changes become a *candidate* commit (kept alive by the
ref `refs/supervisor/wf<id>/candidate`), gates and reviews run on throwaway worktrees of that
candidate, and only the `commit` action moves the task branch, to a candidate that passed every
gate before it. The database records each step's outcome and the next step in one transaction, so
after a crash `resume` re-runs at most the step that was interrupted, never a completed one.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, NoReturn

from supervisor import credentials, interfaces, prompts, protected, recovery
from supervisor.config import Settings, StepDef, WorkflowDef
from supervisor.dag import WorkGraph
from supervisor.errors import (
    ApprovalRequired,
    CandidateRefusedError,
    CommandTimeoutError,
    ConfigError,
    CredentialsError,
    ParsingError,
    SandboxError,
    StepFailedError,
    SupervisorError,
)
from supervisor.gates import GateResult, run_gate
from supervisor.parsing import parse_worker_output
from supervisor.plan_view import plan_for_prompt
from supervisor.recovery import Classification
from supervisor.roles import Role, load_role
from supervisor.sandbox.docker import LABEL_REPO, LABEL_STEP, LABEL_WORKFLOW, RunSpec, repo_label
from supervisor.schemas import PlanOutput
from supervisor.state.store import EventSpec, now
from supervisor.treedata import CommitFiles, SnapshotLimits
from supervisor.workers.base import adapter_for
from supervisor.workflow import gate_problems, history
from supervisor.workspace import Workspace

if TYPE_CHECKING:
    from pathlib import Path

    from supervisor.dag import Component
    from supervisor.sandbox.base import Sandbox
    from supervisor.state.store import Store, Workflow


class Reporter:
    """Where the engine tells a person what it is doing; the CLI supplies a richer one."""

    def step(self, wf_id: int, name: str, detail: str) -> None: ...
    def output(self, text: str) -> None: ...
    def info(self, text: str) -> None: ...


@dataclass
class Outcome:
    """What one step run amounted to, before the engine decides where to go next."""

    result: str  # passed | failed | rejected
    feedback: str | None = None
    events: list[EventSpec] = field(default_factory=list)
    context: dict[str, Any] = field(default_factory=dict)
    git_sha: str | None = None
    escalate: SupervisorError | None = None
    transient: Classification | None = None
    """Set when the step should simply run again (after a delay): network, crash, rate limit."""
    resume_at: str | None = None
    """With `escalate`: the step a later `resume` starts at (a gate, to re-check it first)."""
    goto: str | None = None
    """With a failure or rejection: the step the work goes back to, instead of on_fail/on_reject."""


class LineSplitter:
    """Turns streamed chunks into whole lines for an adapter's progress formatter."""

    def __init__(self, describe: Callable[[str], str | None], sink: Callable[[str], None]):
        self.describe = describe
        self.sink = sink
        self.pending = ""

    def __call__(self, chunk: str) -> None:
        self.pending += chunk
        *lines, self.pending = self.pending.split("\n")
        for line in lines:
            text = self.describe(line)
            if text:
                self.sink(text)


OnDone = Callable[[str, list[str], Callable[[dict[str, Any] | None], None]], None]
"""Told (commit, tree hashes of the attempts so far, finish) when an implementation succeeds; it
must call finish(context) to record the step done and the workflow's new context as one."""


def candidate_ref(wf_id: int) -> str:
    return f"refs/supervisor/wf{wf_id}/candidate"


class Engine:
    def __init__(
        self,
        repo: Path,
        settings: Settings,
        store: Store,
        workspace: Workspace,
        sandbox: Sandbox,
        reporter: Reporter | None = None,
    ) -> None:
        self.repo = repo
        self.settings = settings
        self.store = store
        self.ws = workspace
        self.sandbox = sandbox
        self.reporter = reporter or Reporter()

    # -- the loop --------------------------------------------------------------------------

    def run(self, wf_id: int) -> Workflow:
        """Run until the workflow completes, fails, or waits for a human."""
        while True:
            wf = self.store.workflow(wf_id)
            if wf.status == "awaiting_approval":
                raise ApprovalRequired(
                    f"Workflow {wf_id} waits for approval of step '{_pending_step(wf)}'.",
                    f"Approve with `supervisor approve {wf_id}` or reject with `supervisor reject "
                    f'{wf_id} --reason "..."`, then run `supervisor resume {wf_id}`.',
                )
            if wf.status == "rate_limited":
                self._wait(wf)
                continue
            if wf.status != "running" or wf.current_step is None:
                return wf
            definition = WorkflowDef.model_validate(wf.definition)
            name = wf.current_step
            step = definition.steps[name]
            outcome = self._execute(wf, name, step)
            self._transition(wf, definition, name, step, outcome)

    def _execute(self, wf: Workflow, name: str, step: StepDef) -> Outcome:
        if step.for_each == "component":
            from supervisor.workflow.components import ComponentFanOut

            return ComponentFanOut(self, wf, name, step).run()
        if step.kind == "action":
            return self._commit(wf)
        if step.kind == "gate":
            return self._gate(wf, name, step)
        if step.kind == "parallel":
            return self._parallel(wf, name, step.roles or [])
        outcome = self._worker(wf, name, step.role or "")
        if step.interfaces and outcome.result == "passed" and outcome.git_sha:
            return self._lock_interfaces(wf, name, outcome)
        return outcome

    def _lock_interfaces(self, wf: Workflow, name: str, outcome: Outcome) -> Outcome:
        """Compile the interface files the step wrote, then freeze them for later steps."""
        files = self.ws.changed_files(self.ws.branch_tip(wf.task_branch), outcome.git_sha or "")
        worktree = self.ws.add_worktree(f"wf{wf.id}-{name}-compile", outcome.git_sha or "")
        try:
            commit = CommitFiles(self.ws.git_dir, outcome.git_sha or "")  # read as blobs
            image = self._image_for(wf, name, commit)  # the compilers run in the sandbox
            problems = interfaces.compile_errors(
                self.repo, worktree, files, self.sandbox, image, self._labels(wf.id, name)
            )
        finally:
            self.ws.remove_worktree(worktree)
        event = EventSpec(
            "interfaces",
            step=name,
            status="failed" if problems else "locked",
            payload={"files": files, "compiler": problems},
        )
        if problems:
            return Outcome(
                "failed",
                events=[*outcome.events, event],
                feedback=f"The interface files do not compile:\n{problems}",
                context={"trees": outcome.context.get("trees", {})},
            )
        self.reporter.info(f"interfaces locked: {', '.join(files)}")
        context = {
            **outcome.context,
            "locked_files": files,
            "locked_by": name,
            "locked_sha": outcome.git_sha,
        }
        return replace(outcome, events=[*outcome.events, event], context=context)

    def _parallel(self, wf: Workflow, name: str, roles: list[str]) -> Outcome:
        """Several reviewers at once; the step passes only when every one approves."""
        with ThreadPoolExecutor(max_workers=len(roles), thread_name_prefix="reviewer") as pool:
            outcomes = list(pool.map(lambda r: self._worker(wf, name, r), roles))
        events = [e for o in outcomes for e in o.events]
        for outcome in outcomes:
            if outcome.escalate is not None:
                return Outcome("failed", events=events, escalate=outcome.escalate)
        transient = next((o.transient for o in outcomes if o.transient is not None), None)
        if transient is not None:
            return Outcome("failed", events=events, transient=transient)
        if all(o.result == "passed" for o in outcomes):
            reviewed: dict[str, list[str]] = {}
            for o in outcomes:
                for tree, names in o.context.get("reviewed", {}).items():
                    reviewed.setdefault(tree, [])
                    reviewed[tree] += [n for n in names if n not in reviewed[tree]]
            return Outcome("passed", events=events, context={"reviewed": reviewed})
        merged = "\n\n".join(
            f"Reviewer {role}: {o.feedback or o.result}"
            for role, o in zip(roles, outcomes, strict=True)
            if o.result != "passed"
        )
        return Outcome("rejected", events=events, feedback=merged)

    def _transition(
        self, wf: Workflow, definition: WorkflowDef, name: str, step: StepDef, outcome: Outcome
    ) -> None:
        ctx = dict(wf.context)
        ctx.update(outcome.context)
        events = list(outcome.events)
        if outcome.escalate is not None:
            self._fail(wf, name, ctx, events, outcome.escalate, resume_at=outcome.resume_at)
        breaker = ctx.setdefault("breaker", {})
        if outcome.result != "passed":
            breaker[name] = breaker.get(name, 0) + 1
            _, threshold = recovery.load_policies()
            if breaker[name] >= threshold:
                outcome.escalate = StepFailedError(
                    f"Circuit breaker open for step '{name}': {breaker[name]} consecutive "
                    f"failures (threshold {threshold}); last: "
                    f"{(outcome.feedback or getattr(outcome.transient, 'reason', '') or '')[:600]}",
                    f"Look at `supervisor events {wf.id}`, fix the cause, then `supervisor "
                    f"resume {wf.id}` (a resume after a failure closes the breaker).",
                )
                self._fail(wf, name, ctx, events, outcome.escalate)
        if outcome.transient is not None:
            self._retry_same(wf, name, step, ctx, events, outcome.transient)
            return
        if outcome.result == "passed":
            breaker.pop(name, None)
            ctx.get("transient", {}).pop(name, None)
            _feedback(ctx).pop(name, None)
            next_step = step.next
            status = "running" if next_step is not None else "completed"
            if step.human_approval:
                status = "awaiting_approval"
                ctx["approval_step"] = name
                events.append(EventSpec("approval_requested", step=name, status="pending"))
            if status == "completed":
                events.append(EventSpec("workflow_completed", status="completed"))
            self.store.advance(
                wf.id,
                step=name,
                next_step=next_step,
                context=ctx,
                status=status,
                git_sha=outcome.git_sha,
                events=events,
                request_approval=step.human_approval,
            )
            return
        # A failure or a rejection: go back to the step that can fix it, with feedback.
        target = name
        if outcome.goto is not None:
            target = outcome.goto
        elif outcome.result == "failed" and step.on_fail:
            target = step.on_fail
        elif outcome.result == "rejected" and step.on_reject:
            target = step.on_reject
        attempts = ctx.setdefault("attempts", {})
        attempts[target] = attempts.get(target, 0) + 1
        limit = definition.steps[target].max_retries
        if outcome.feedback:
            _feedback(ctx).setdefault(target, []).append(outcome.feedback)
        if attempts[target] > limit:
            error = StepFailedError(
                f"Step '{target}' of workflow {wf.id} failed {attempts[target]} times (limit "
                f"{limit}); last problem: {(outcome.feedback or outcome.result)[:800]}",
                f"The task branch {wf.task_branch} keeps its last good state. Fix the cause "
                f"(see `supervisor events {wf.id}`), then `supervisor resume {wf.id}` tries "
                "again.",
            )
            # After a gate failure, `resume` re-runs that gate on the candidate first: the cause
            # may have been the gate's configuration, fixed meanwhile.
            self._fail(wf, name, ctx, events, error, resume_at=name if step.gate else target)
        events.append(
            EventSpec(
                "retry",
                step=target,
                status=outcome.result,
                payload={"from_step": name, "attempt": attempts[target] + 1, "limit": limit + 1},
            )
        )
        self.store.advance(
            wf.id,
            step=name,
            next_step=target,
            context=ctx,
            checkpoint_status=outcome.result,
            events=events,
        )

    def _fail(
        self,
        wf: Workflow,
        name: str,
        ctx: dict[str, Any],
        events: list[EventSpec],
        error: SupervisorError,
        resume_at: str | None = None,
    ) -> NoReturn:
        """Record the failure (a later `resume` starts again at `resume_at`) and raise it."""
        at = resume_at or name
        events.append(EventSpec("workflow_failed", step=at, status="failed", payload=_err(error)))
        self.store.advance(
            wf.id,
            step=name,
            next_step=at,
            context=ctx,
            status="failed",
            checkpoint_status="failed",
            events=events,
            error=_message(error),
        )
        raise error

    def _retry_same(
        self,
        wf: Workflow,
        name: str,
        step: StepDef,
        ctx: dict[str, Any],
        events: list[EventSpec],
        why: Classification,
    ) -> None:
        """Run the same step again after the policy's backoff, or the rate limit's reset."""
        policy = recovery.policy(step.retry_policy or self.settings.retry_policy)
        transient = ctx.setdefault("transient", {})
        transient[name] = transient.get(name, 0) + 1
        if transient[name] >= policy.max_attempts:
            self._fail(
                wf,
                name,
                ctx,
                events,
                StepFailedError(
                    f"Step '{name}' failed {transient[name]} times in a row ({why.category}): "
                    f"{why.reason[:600]}",
                    "Check the model API and the CLI (`supervisor doctor`), then "
                    f"`supervisor resume {wf.id}`.",
                ),
            )
        delay = why.wait_seconds if why.wait_seconds is not None else policy.delay(transient[name])
        waiting = why.action == recovery.Action.WAIT
        until = time.time() + delay
        if waiting:
            ctx["waiting_until"] = until
        events.append(
            EventSpec(
                "retry_scheduled",
                step=name,
                status=str(why.action),
                payload={
                    "category": str(why.category),
                    "reason": why.reason[:1000],
                    "delay_s": round(delay, 2),
                    "attempt": transient[name] + 1,
                    "max_attempts": policy.max_attempts,
                },
            )
        )
        self.store.advance(
            wf.id,
            step=name,
            next_step=name,
            context=ctx,
            status="rate_limited" if waiting else "running",
            checkpoint_status=str(why.category),
            events=events,
        )
        if waiting:
            self.reporter.info(f"rate limited: waiting {delay:.0f} s before retrying '{name}'")
            self._wait(self.store.workflow(wf.id))
        else:
            self.reporter.info(f"{why.category}: retrying '{name}' in {delay:.1f} s")
            time.sleep(delay)

    def _wait(self, wf: Workflow) -> None:
        """A rate limit is a waiting state, not a failure: sleep to the reset, then run again."""
        until = float(wf.context.get("waiting_until") or 0)
        time.sleep(max(0.0, until - time.time()))
        ctx = dict(wf.context)
        ctx.pop("waiting_until", None)
        self.store.update_workflow(
            wf.id,
            status="running",
            current_step=wf.current_step,
            context=ctx,
            events=[EventSpec("rate_limit_over", step=wf.current_step)],
        )

    # -- step kinds ------------------------------------------------------------------------

    def _worker(
        self,
        wf: Workflow,
        name: str,
        role_name: str,
        *,
        base: str | None = None,
        component: Component | None = None,
        on_done: OnDone | None = None,
        branch: str | None = None,
    ) -> Outcome:
        """One fresh worker run; `base` overrides where its worktree starts, `component` narrows
        its task to one planned component (whose commit then lands on the component's branch, or
        on `branch`), `on_done` records a successful implementation (see OnDone)."""
        role = load_role(role_name, self.repo)
        cli = role.cli or wf.cli
        cli_settings = self.settings.clis.get(cli)
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
            return Outcome("failed", escalate=e)
        candidate = wf.context.get("candidate")
        tip = self.ws.branch_tip(wf.task_branch)
        if base is None:
            # Every step works on the integrated result so far: reviewers judge it, implementers
            # build on it (a fix-up after a gate or a review keeps what already passed). Only
            # before any candidate exists does a step start from the locked interfaces or the
            # task branch.
            base = candidate or wf.context.get("locked_sha") or tip
        attempt = self.store.count_steps(wf.id, name, role.name) + 1
        began = now()  # the step's time includes making its worktree
        worktree = self.ws.add_worktree(f"wf{wf.id}-{name}-{role.name}-{attempt}", base)
        step_id = self.store.start_step(wf.id, name, attempt, role.name, str(worktree), began)
        self.reporter.step(wf.id, name, f"{role.name} via {cli} (attempt {attempt})")
        try:
            outcome = self._run_worker(
                wf,
                name,
                role,
                cli,
                cli_settings,
                creds,
                worktree,
                base,
                tip,
                step_id,
                component,
                on_done,
                branch,
            )
        except (SandboxError, CommandTimeoutError) as e:
            # A hung worker (idle or time limit) is ended by the sandbox and retried; a sandbox
            # that cannot run at all (or ran out of memory) goes to a human.
            why = recovery.classify_exception(e)
            escalate = e if why.action == recovery.Action.ESCALATE else None
            outcome = Outcome("failed", escalate=escalate, transient=None if escalate else why)
            self.store.finish_step(
                step_id,
                "failed",
                error=_message(e),
                event=EventSpec(
                    "worker_failed",
                    step=name,
                    role=role.name,
                    status="failed",
                    payload={**_err(e), "category": str(why.category)},
                ),
                invocation=self._invocation(
                    wf, name, role, cli, "", False, 0.0, {}, str(why.category)
                ),
            )
        finally:
            self.ws.remove_worktree(worktree)
        return outcome

    def _run_worker(
        self,
        wf: Workflow,
        name: str,
        role: Role,
        cli: str,
        cli_settings: Any,
        creds: credentials.Credentials,
        worktree: Path,
        base: str,
        tip: str,
        step_id: int,
        component: Component | None,
        on_done: OnDone | None,
        branch: str | None = None,
    ) -> Outcome:
        adapter = adapter_for(cli)
        route = self.sandbox.route(cli_settings.base_url, creds.injection)  # the key stays here
        plan = wf.context.get("plan")
        task = wf.description
        if component is not None:
            targets = component.files
            task += _component_task(component)
        elif base != tip:
            targets = self.ws.changed_files(tip, base)
        else:
            targets = _plan_files(plan)
        files = CommitFiles(self.ws.git_dir, base)  # what the worktree holds, read as blobs
        prompt, pack = prompts.compose(
            role,
            self.repo,
            files,
            task=task,
            feedback=_feedback(wf.context).get(name, []),
            plan=plan_for_prompt(plan, component),
            targets=targets,
            diff=self.ws.diff(tip, base) if base != tip else "",
            run_id=f"wf{wf.id}-{name}-{role.name}-step{step_id}",
        )
        model = role.model_for(cli, cli_settings.default_model, cli_settings.model)
        schema_file = "/run/supervisor/output_schema.json" if adapter.supports_json_schema else None
        invocation = adapter.build(
            model=model,
            base_url=route.url,
            workdir="/workspace",
            extra_flags=[*cli_settings.extra_flags, *role.flags],
            api_key_env=next(iter(creds.env), None),
            schema_path=schema_file,
        )
        limits = self.settings.limits
        events: list[EventSpec] = []
        prompt_bytes = len(prompt.encode())
        if prompt_bytes > limits.max_prompt_bytes:
            error = ConfigError(
                f"The prompt for '{name}' ({role.name}) is {prompt_bytes} bytes, over "
                f"limits.max_prompt_bytes ({limits.max_prompt_bytes}); it was not sent.",
                f"Lower context.token_budget for '{role.name}', shorten the task, or raise "
                "limits.max_prompt_bytes.",
            )
            self.store.finish_step(
                step_id,
                "failed",
                error=error.message,
                event=EventSpec(
                    "prompt_too_large",
                    step=name,
                    role=role.name,
                    status="failed",
                    payload={"prompt_bytes": prompt_bytes, **_err(error)},
                ),
            )
            return Outcome("failed", escalate=error)
        self.store.add_event(
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
        image = self._image_for(wf, name, files)
        run = self.sandbox.run(
            RunSpec(
                argv=invocation.argv,
                worktree=worktree,
                image=image,
                env={**cli_settings.extra_env, **role.env, **invocation.env, **creds.env},
                stdin_text=prompt,
                home_files={**invocation.home_files, **creds.home_files},
                run_files={"output_schema.json": prompts.schema_text(role.schema, cli)},
                network=self.settings.sandbox.egress_network,
                extra_hosts={route.alias: route.gateway},
                timeout=limits.step_timeout_seconds,
                memory=limits.worker_memory,
                cpus=limits.worker_cpus,
                idle_timeout=limits.idle_timeout_seconds,
                labels=self._labels(wf.id, name),
                on_output=LineSplitter(adapter.progress, self.reporter.output),
                on_start=lambda cid: self.store.set_step_container(step_id, cid),
            )
        )
        result = adapter.parse_output(run.stdout, run.stderr, run.exit_code)
        self.reporter.info(
            f"{cli} finished in {run.duration:.1f} s: exit {run.exit_code}, "
            f"{result.num_turns or 0} turns, {result.input_tokens} in / {result.output_tokens} "
            f"out tokens, ${result.cost_usd:.4f}"
        )
        usage = {
            "input_tokens": result.input_tokens,
            "output_tokens": result.output_tokens,
            "cost_usd": result.cost_usd,
        }
        base_payload = {
            "exit_code": run.exit_code,
            "duration_s": round(run.duration, 3),
            "session_id": result.session_id,
            "num_turns": result.num_turns,
        }
        if not result.ok:
            error = f"The {cli} worker failed ({result.error_kind}): {result.error}"
            why = recovery.classify_worker(result)
            escalate = None
            if why.action == recovery.Action.ESCALATE:
                escalate = CredentialsError(
                    error, credentials.LOGIN_HINTS.get(cli, "Check the CLI's credentials.")
                )
            self.store.finish_step(
                step_id,
                "failed",
                error=error,
                event=EventSpec(
                    "worker_failed",
                    step=name,
                    role=role.name,
                    status="failed",
                    payload={
                        **base_payload,
                        "error": error,
                        "category": str(why.category),
                        "action": str(why.action),
                        "retry_after": result.retry_after,
                    },
                    **usage,
                ),
                invocation=self._invocation(
                    wf, name, role, cli, model, False, run.duration, usage, str(why.category)
                ),
            )
            if why.action == recovery.Action.RETRY_WITH_FEEDBACK:
                return Outcome("failed", feedback=error, events=events)
            return Outcome(
                "failed", events=events, escalate=escalate, transient=None if escalate else why
            )
        try:
            output = parse_worker_output(result.text, role.schema)
        except ParsingError as e:
            status = "rejected" if role.output == "review" else "failed"
            why = recovery.classify_exception(e)
            self.store.finish_step(
                step_id,
                status,
                error=e.message,
                invocation=self._invocation(
                    wf, name, role, cli, model, False, run.duration, usage, str(why.category)
                ),
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
            return Outcome("failed", feedback=e.message, events=events)
        self.store.record_invocation(
            self._invocation(wf, name, role, cli, model, True, run.duration, usage, None)
        )
        data = output.model_dump()
        payload = {**base_payload, "output": data}
        if role.output == "implementation":
            # A component's commit lands on its branch in the fan-out (on_done set); a fix-up
            # named after its component works on the candidate like any plain step.
            ref = (
                candidate_ref(wf.id)
                if component is None or on_done is None
                else f"refs/heads/{branch or component_branch(wf.task_branch, component.id)}"
            )
            return self._after_implementation(
                wf, name, role, worktree, base, step_id, data, payload, usage, events, ref, on_done
            )
        if role.output == "review":
            verdict = data["status"]
            status = "succeeded" if verdict == "APPROVED" else "rejected"
            self.store.finish_step(
                step_id,
                status,
                output=data,
                event=EventSpec(
                    "review", step=name, role=role.name, status=verdict, payload=payload, **usage
                ),
            )
            if verdict == "APPROVED":
                reviewed = history.record_review(wf.context, self.ws.tree_hash(base), [role.name])
                return Outcome("passed", events=events, context={"reviewed": reviewed})
            issues = (
                "\n".join(
                    f"- [{i['severity']}] {i.get('file') or ''} {i['description']}"
                    for i in data["issues"]
                )
                or "(no issues listed)"
            )
            return Outcome(
                "rejected",
                events=events,
                feedback=f"The reviewer answered {verdict}: {data['summary']}\n{issues}",
            )
        # planner
        self.store.finish_step(
            step_id,
            "succeeded",
            output=data,
            event=EventSpec(
                "plan", step=name, role=role.name, status=data["status"], payload=payload, **usage
            ),
        )
        if data["status"] != "COMPLETE":
            return Outcome(
                "failed",
                events=events,
                feedback=f"The plan came back {data['status']}; make it complete.",
            )
        try:
            WorkGraph.from_plan(PlanOutput.model_validate(data))
        except ConfigError as e:  # a cycle, a dangling depends_on, a component named twice
            return Outcome("failed", events=events, feedback=f"{e.message} {e.hint}")
        # A new plan starts its components afresh (a re-plan after a rejection, say).
        return Outcome(
            "passed",
            events=events,
            context={
                "plan": data,
                "components": {},
                "integrated": None,
                "claims": {},
                "planned_by": name,
            },
        )

    def _after_implementation(
        self,
        wf: Workflow,
        name: str,
        role: Role,
        worktree: Path,
        base: str,
        step_id: int,
        data: dict[str, Any],
        payload: dict[str, Any],
        usage: dict[str, Any],
        events: list[EventSpec],
        ref: str,
        on_done: OnDone | None = None,
    ) -> Outcome:
        """Trust the worktree, not the worker's claims: what changed is what git sees."""
        limits = self.settings.limits
        try:
            sha = self.ws.snapshot(
                worktree,
                f"{name}: {wf.description[:60]}",
                limits=SnapshotLimits(limits.max_worktree_mb * 2**20, limits.max_files_added),
            )
        except CandidateRefusedError as e:
            event = EventSpec(e.kind, name, role.name, "failed", payload={**payload, **_err(e)})
            self.store.finish_step(step_id, "failed", output=data, error=e.message, event=event)
            return Outcome("failed", feedback=f"{e.message} {e.hint}", events=events)
        changed = self.ws.changed_files(base, sha) if sha else []
        claimed = sorted(set(data["files_created"]) | set(data["files_modified"]))
        payload = {
            **payload,
            "changed_files": changed,
            "claimed_but_unchanged": sorted(set(claimed) - set(changed)),
            "changed_but_unclaimed": sorted(set(changed) - set(claimed)),
        }

        def reject(problem: str, kind: str = "implementation", **extra: Any) -> None:
            event = EventSpec(
                kind, name, role.name, "failed", payload={**payload, **extra}, **usage
            )
            self.store.finish_step(step_id, "failed", output=data, error=problem, event=event)

        if sha is not None:
            # Every attempt stays inspectable, whatever its gates say later.
            self.ws.set_ref(history.attempt_ref(wf.id, name, step_id), sha, None)
        noop_context: dict[str, Any] = {}
        if sha is None and data["status"] != "FAILED":
            unchanged, noop_context = self._unchanged(
                wf, name, role, base, step_id, data, payload, usage, on_done
            )
            if unchanged is not None:
                return replace(unchanged, events=[*events, *unchanged.events])
        if sha is None or data["status"] == "FAILED":
            problem = (
                "The worker changed no files"
                if sha is None
                else f"The worker reported FAILED: {'; '.join(data['blockers'])}"
            )
            if sha is None and claimed:
                problem += f", although it claimed to have written {', '.join(claimed)}"
            reject(problem)
            return Outcome("failed", feedback=problem + ".", events=events, context=noop_context)
        # Semantic loop: a retry that reproduces an earlier attempt's content will fail the same
        # way, however often it is fed back.
        tree = self.ws.tree_hash(sha)
        seen = dict(wf.context.get("trees", {}))
        earlier = list(seen.get(name, []))
        if tree in earlier:
            reject(
                "same content as an earlier attempt",
                "loop_detected",
                tree=tree,
                same_as_attempt=earlier.index(tree) + 1,
            )
            return Outcome(
                "failed",
                events=events,
                escalate=StepFailedError(
                    f"Step '{name}' produced exactly the same content as its attempt "
                    f"{earlier.index(tree) + 1}: the feedback is not changing the result, so "
                    "retrying again would loop.",
                    f"Read the feedback in `supervisor events {wf.id}`, change the task, role or "
                    f"model, then `supervisor resume {wf.id}`.",
                ),
            )
        seen[name] = [*earlier, tree]
        locked = [] if wf.context.get("locked_by") == name else wf.context.get("locked_files", [])
        frozen = interfaces.touched(locked, changed)
        if frozen:
            problem = (
                f"The step changed {', '.join(frozen)}, which the tech lead's interface step "
                "fixed for every component: they are read-only. Build against them unchanged "
                "(if one really must change, report it under blockers)."
            )
            reject(problem, "interface_changed", locked=frozen)
            return Outcome("failed", feedback=problem, events=events, context={"trees": seen})
        pins = protected.pinned(wf.context, self.settings)
        guarded = protected.changed_protected(self.repo, pins, role.allow_paths, base, sha, changed)
        if guarded:
            problem = protected.feedback(guarded)
            reject(problem, "protected_path_changed", protected=guarded)
            return Outcome("failed", feedback=problem, events=events, context={"trees": seen})
        failed_gate = self._role_gates(wf, name, role, sha)
        if failed_gate is not None:
            gate, result = failed_gate
            reject(f"role gate '{gate.name}' failed")
            if gate.on_fail == "block":
                return Outcome(
                    "failed",
                    events=events,
                    escalate=StepFailedError(
                        f"Role gate '{gate.name}' of {role.name} failed and is set to block: "
                        f"{result.output[-800:]}",
                        f"Fix what `{gate.command}` reports, then `supervisor resume {wf.id}`.",
                    ),
                )
            return Outcome(
                "failed", feedback=result.feedback(), events=events, context={"trees": seen}
            )
        self.ws.set_ref(ref, sha, None)

        def finish(context: dict[str, Any] | None) -> None:
            self.store.finish_step(
                step_id,
                "succeeded",
                output=data,
                workflow_context=context,
                event=EventSpec(
                    "implementation",
                    step=name,
                    role=role.name,
                    status="succeeded",
                    payload=payload,
                    **usage,
                ),
            )

        if on_done is None:
            finish(None)
        else:
            on_done(sha, seen[name], finish)
        return Outcome(
            "passed", events=events, context={"candidate": sha, "trees": seen}, git_sha=sha
        )

    def _unchanged(
        self,
        wf: Workflow,
        name: str,
        role: Role,
        base: str,
        step_id: int,
        data: dict[str, Any],
        payload: dict[str, Any],
        usage: dict[str, Any],
        on_done: OnDone | None,
    ) -> tuple[Outcome | None, dict[str, Any]]:
        """A worker that changed no file: a valid result when its role may change nothing; a
        gate problem when the gate that sent the work back fails again on the same tree; a loop
        when it gives the same answer again. (None, extra context) fails it as usual."""
        claimed = sorted(set(data["files_created"]) | set(data["files_modified"]))

        def finish(status: str, kind: str, event_status: str, error: str | None = None) -> None:
            self.store.finish_step(
                step_id,
                status,
                output=data,
                error=error,
                event=EventSpec(
                    kind,
                    name,
                    role.name,
                    event_status,
                    payload={**payload, "changed_files": []},
                    **usage,
                ),
            )

        if role.may_change_nothing and not claimed and on_done is None:
            finish("succeeded", "implementation", "unchanged")
            self.reporter.info(f"{role.name} changed nothing, which its role allows")
            return Outcome("passed"), {}
        failure = wf.context.get("gate_failure") or {}
        tree = self.ws.tree_hash(base)
        if failure.get("to") == name.split("/")[0] and failure.get("tree") == tree:
            again = self._gate_on(wf, failure["step"], failure["gate"], base)
            if again.escalate is None and again.result == "passed":
                finish("succeeded", "implementation", "unchanged")
                return Outcome("passed", context=again.context), {}
            finish("failed", "implementation", "failed", "the gate fails on the unchanged tree")
            error = again.escalate or gate_problems.gate_problem_error(
                failure["gate"],
                self.settings.gates.get(failure["gate"], ""),
                tree,
                again.context.get("gate_failure", {}).get("output", again.feedback or ""),
                wf.id,
            )
            return (
                Outcome("failed", escalate=error, context=again.context, resume_at=failure["step"]),
                {},
            )
        answer = hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]
        seen = {k: list(v) for k, v in wf.context.get("noops", {}).items()}
        earlier = seen.setdefault(name, [])
        if answer in earlier:
            finish("failed", "loop_detected", "failed", "same answer, no change, again")
            return Outcome(
                "failed",
                escalate=StepFailedError(
                    f"Step '{name}' gave the same answer as its attempt "
                    f"{earlier.index(answer) + 1} and again changed no file: the feedback is not "
                    "changing the result, so retrying again would loop.",
                    f"Read the feedback in `supervisor events {wf.id}`, change the task, role or "
                    f"model, then `supervisor resume {wf.id}`.",
                ),
            ), {}
        earlier.append(answer)
        return None, {"noops": seen}

    def _role_gates(
        self, wf: Workflow, name: str, role: Role, sha: str
    ) -> tuple[Any, GateResult] | None:
        """The role's own gates on its candidate; the first failure, or None."""
        for gate in role.gates:
            worktree = self.ws.add_worktree(f"wf{wf.id}-{name}-{gate.name}", sha)
            try:
                result = run_gate(
                    self.sandbox,
                    gate.name,
                    gate.command,
                    worktree,
                    self.settings.limits,
                    self._labels(wf.id, name),
                    on_output=self.reporter.output,
                )
            finally:
                self.ws.remove_worktree(worktree)
            self.store.add_event(
                wf.id,
                EventSpec(
                    "gate",
                    step=name,
                    role=role.name,
                    status="passed" if result.passed else "failed",
                    payload={
                        "gate": gate.name,
                        "command": gate.command,
                        "on_fail": gate.on_fail,
                        "exit_code": result.exit_code,
                        "output_tail": result.output[-4000:],
                    },
                ),
            )
            if not result.passed:
                return gate, result
        return None

    def _gate(self, wf: Workflow, name: str, step: StepDef) -> Outcome:
        commit = wf.context.get("candidate") or self.ws.branch_tip(wf.task_branch)
        outcome = self._gate_on(wf, name, step.gate or "", commit)
        failure = outcome.context.get("gate_failure")
        if failure is not None:  # the step the work goes back to, for _unchanged
            failure["to"] = step.on_fail or name
        return outcome

    def _gate_on(self, wf: Workflow, name: str, gate: str, commit: str) -> Outcome:
        """Run the named gate on `commit` in a no-network sandbox, as step `name`."""
        command = protected.pinned(wf.context, self.settings).gates[gate]
        attempt = self.store.count_steps(wf.id, name) + 1
        began = now()  # the step's time includes making its worktree
        worktree = self.ws.add_worktree(f"wf{wf.id}-{name}-{attempt}", commit)
        step_id = self.store.start_step(wf.id, name, attempt, None, str(worktree), began)
        self.reporter.step(wf.id, name, f"gate `{command}` (no network)")
        try:
            image = self._image_for(wf, name, CommitFiles(self.ws.git_dir, commit))
        except SandboxError as e:
            self.ws.remove_worktree(worktree)
            self.store.finish_step(
                step_id,
                "failed",
                error=e.message,
                event=EventSpec("gate", step=name, status="failed", payload=_err(e)),
            )
            return Outcome("failed", escalate=e)
        try:
            result = run_gate(
                self.sandbox,
                name,
                command,
                worktree,
                self.settings.limits,
                self._labels(wf.id, name),
                on_output=self.reporter.output,
                image=image,
            )
        except CommandTimeoutError as e:
            self.store.finish_step(
                step_id,
                "failed",
                error=e.message,
                event=EventSpec("gate", step=name, status="failed", payload=_err(e)),
            )
            return Outcome("failed", feedback=f"The '{name}' gate timed out: {e.message}")
        finally:
            self.ws.remove_worktree(worktree)
        status = "succeeded" if result.passed else "failed"
        self.store.finish_step(
            step_id,
            status,
            event=EventSpec(
                "gate",
                step=name,
                status="passed" if result.passed else "failed",
                payload={
                    "command": command,
                    "exit_code": result.exit_code,
                    "commit": commit,
                    "duration_s": round(result.duration, 3),
                    "output_tail": result.output[-4000:],
                },
            ),
        )
        tree = self.ws.tree_hash(commit)
        if result.passed:
            passed = history.record_gate_pass(wf.context, gate, tree)
            return Outcome("passed", git_sha=commit, context={"gates_passed": passed})
        missing = gate_problems.missing_command(result)
        if missing is not None:
            return Outcome(
                "failed",
                escalate=gate_problems.missing_command_error(
                    gate, command, missing, result.output, wf.id
                ),
            )
        failure = {"step": name, "gate": gate, "tree": tree, "output": result.output[-4000:]}
        return Outcome("failed", feedback=result.feedback(), context={"gate_failure": failure})

    def _commit(self, wf: Workflow) -> Outcome:
        """One commit of the candidate's tree on the task branch tip, and only a tree that passed
        every gate the workflow defines: nothing a worker committed on the way (a failed
        attempt, a component commit, a merge) becomes reachable from the branch."""
        candidate = wf.context.get("candidate")
        if not candidate:
            return Outcome("passed", events=[EventSpec("commit", status="nothing_to_commit")])
        tree = self.ws.tree_hash(candidate)
        tip = self.ws.branch_tip(wf.task_branch)
        missing = history.missing_gates(wf.context, WorkflowDef.model_validate(wf.definition), tree)
        if missing and self.ws.tree_hash(tip) != tree:
            return Outcome(
                "failed",
                escalate=StepFailedError(
                    f"Refusing to commit tree {tree[:12]} to {wf.task_branch}: the "
                    f"{', '.join(missing)} gate(s) never passed on that exact tree (a step "
                    "changed it after the gates ran).",
                    "Put a gate step after every step that changes the code (see the shipped "
                    "templates in config/workflow_templates/), then `supervisor resume "
                    f"{wf.id}`.",
                ),
            )
        new = tip
        if self.ws.tree_hash(tip) != tree:  # else a crash came after the commit: done already
            message = history.commit_message(wf.description, wf.id, wf.context, tree)
            new = history.commit_tree(self.repo, tree, tip, message)
            self.ws.fast_forward_branch(wf.task_branch, new)
        self.ws.set_ref(history.attempt_ref(wf.id, "committed", 0), candidate, None)
        self.ws.delete_ref(candidate_ref(wf.id))
        self.reporter.info(f"{wf.task_branch} now at {new[:12]}")
        return Outcome(
            "passed",
            git_sha=new,
            context={"candidate": None},
            events=[
                EventSpec(
                    "commit",
                    status="committed",
                    payload={
                        "branch": wf.task_branch,
                        "sha": new,
                        "tree": tree,
                        "candidate": candidate,
                        "gates": wf.context.get("gates_passed", {}).get(tree, []),
                    },
                )
            ],
        )

    def _image_for(self, wf: Workflow, name: str, worktree: Path | CommitFiles) -> str | None:
        """The project image for this worktree's dependency files, built first if they changed
        (the build may use the network; the gate that follows never does)."""
        from supervisor import project_image

        wanted = project_image.image_for(self.repo, worktree, self.sandbox.base_image_id())
        if wanted is None:
            return None
        if not project_image.exists(self.sandbox.client, wanted.tag):
            from supervisor import dependency_review

            dependency_review.await_approval(self, wf, name, worktree, wanted)
            files = ", ".join(wanted.files) or "no dependency files"
            why = (
                f"the dependency files ({files}) changed since the project image was built"
                if project_image.project_images(self.sandbox.client, self.repo)
                else f"no project image yet for {files}"
            )
            self.reporter.info(f"{why}: building {wanted.tag} before '{name}' runs")
            seconds = project_image.build(self.sandbox.client, self.repo, worktree, wanted)
            self.store.add_event(
                wf.id,
                EventSpec(
                    "sandbox_rebuilt",
                    step=name,
                    status="built",
                    payload={
                        "image": wanted.tag,
                        "reason": why,
                        "files": wanted.files,
                        "seconds": round(seconds, 1),
                    },
                ),
            )
        return wanted.tag

    def _invocation(
        self,
        wf: Workflow,
        name: str,
        role: Role,
        cli: str,
        model: str,
        success: bool,
        duration: float,
        usage: dict[str, Any],
        category: str | None,
    ) -> dict[str, Any]:
        """One metrics row per worker run: what ran, how it went, what it cost."""
        return {
            "workflow_id": wf.id,
            "step": name,
            "role": role.name,
            "cli": cli,
            "model": model,
            "task_type": role.output,
            "success": success,
            "retries": self.store.count_steps(wf.id, name, role.name) - 1,
            "duration_s": round(duration, 3),
            "input_tokens": int(usage.get("input_tokens") or 0),
            "output_tokens": int(usage.get("output_tokens") or 0),
            "cost_usd": float(usage.get("cost_usd") or 0.0),
            "error_category": category,
        }

    def _labels(self, wf_id: int, step: str) -> dict[str, str]:
        return {LABEL_REPO: repo_label(self.repo), LABEL_WORKFLOW: str(wf_id), LABEL_STEP: step}


def component_branch(task_branch: str, component_id: str) -> str:
    """A sibling of the task branch (`ai/3-x--parser`): git forbids `ai/3-x/parser` next to it."""
    return f"{task_branch}--{Workspace.slugify(component_id)}"


def _component_task(component: Component) -> str:
    files = ", ".join(component.files) or "(the plan names none)"
    return (
        f"\n\nYour part of this task is one component of the plan: '{component.id}' (phase "
        f"{component.phase}): {component.description}\nIts files: {files}\nOther workers build "
        "the other components at the same time: change only what this component needs."
    )


def _plan_files(plan: dict[str, Any] | None) -> list[str]:
    """The files the plan's components name: the implementer's targets."""
    files: list[str] = []
    for phase in (plan or {}).get("phases", []):
        for component in phase.get("components", []):
            files += [f for f in component.get("files", []) if f not in files]
    return files


def _feedback(ctx: dict[str, Any]) -> dict[str, list[str]]:
    return ctx.setdefault("feedback", {})  # type: ignore[no-any-return]


def _pending_step(wf: Workflow) -> str:
    return str(wf.context.get("approval_step") or wf.current_step)


def _message(error: Exception) -> str:
    return error.message if isinstance(error, SupervisorError) else str(error)


def _err(error: Exception) -> dict[str, Any]:
    payload: dict[str, Any] = {"error": _message(error), "kind": type(error).__name__}
    if isinstance(error, SupervisorError) and error.hint:
        payload["hint"] = error.hint
    return payload
