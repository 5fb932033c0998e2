"""One worker run, from its prompt to the step's record: the part of the worker step that talks
to the CLI.

Every way a run ends (its prompt refused for size, the proxy's record contradicting the CLI, the
CLI failing, an answer that does not parse, the sandbox failing under it, a valid answer) becomes
the step's record in one place, `WorkerRun.record`, so the event, the error and the metrics row
are written alike whether the run was fresh, prepared ahead or adopted after a crash.
"""

from __future__ import annotations

import dataclasses
import time
from typing import TYPE_CHECKING, Any

from supervisor.context import project_scope, prompts
from supervisor.context.plan_view import plan_files, plan_for_prompt
from supervisor.core import faults
from supervisor.core.errors import (
    ConfigError,
    CredentialsError,
    ParsingError,
    SupervisorError,
)
from supervisor.core.parsing import parse_worker_output
from supervisor.gates import base_oracle
from supervisor.guard import credentials, protected
from supervisor.policy import budgets, recovery
from supervisor.sandbox import adopt, engine_loss, model_paths
from supervisor.sandbox.docker import RunResult, run_dir_label
from supervisor.state.store import EventSpec, StepRecord
from supervisor.workers import adapter_for, witness
from supervisor.workers.base import WorkerResult
from supervisor.workflow import continuation, depth, plan_projects
from supervisor.workflow.steps import assessing, prepare, results, witnessing, worker_spec
from supervisor.workflow.steps.base import (
    LineSplitter,
    Outcome,
    StepContext,
    candidate_ref,
    err,
    feedback_of,
)
from supervisor.workflow.steps.images import image_for
from supervisor.workspace.treedata import CommitFiles

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from supervisor.context.roles import Role
    from supervisor.core.dag import Component
    from supervisor.sandbox.docker import RunResult
    from supervisor.state.store import Workflow
    from supervisor.workers.base import WorkerResult


@dataclasses.dataclass(frozen=True)
class Spent:
    """What a finished run cost and how it went, for its record."""

    model: str = ""
    duration: float = 0.0
    usage: dict[str, Any] = dataclasses.field(default_factory=dict)
    payload: dict[str, Any] = dataclasses.field(default_factory=dict)
    """exit code, duration, session, turns, witnessed: the facts every record of the run carries."""


NOTHING_SPENT = Spent()


class WorkerRun:
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

    def invocation(self, spent: Spent, success: bool, category: str | None) -> dict[str, Any]:
        """One metrics row per worker run: what ran, how it went, what it cost."""
        usage = spent.usage
        return {
            "workflow_id": self.wf.id,
            "step": self.name,
            "role": self.role.name,
            "cli": self.cli,
            "model": spent.model,
            "task_type": self.role.output,
            "success": success,
            "retries": self.c.store.count_steps(self.wf.id, self.name, self.role.name) - 1,
            "duration_s": round(spent.duration, 3),
            "input_tokens": int(usage.get("input_tokens") or 0),
            "output_tokens": int(usage.get("output_tokens") or 0),
            "cost_usd": float(usage.get("cost_usd") or 0.0),
            "error_category": category,
        }

    def record(
        self,
        kind: str,
        error: str,
        payload: dict[str, Any],
        *,
        spent: Spent | None = NOTHING_SPENT,
        category: str | None = None,
        status: str = "failed",
    ) -> StepRecord:
        """The step's record of a run that did not succeed: its event (`kind`, the run's facts and
        `payload`), its error and, when the run reached the CLI (`spent` not None), its metrics."""
        usage = spent.usage if spent is not None else {}
        return StepRecord(
            self.step_id,
            status,
            error=error,
            event=EventSpec(
                kind,
                step=self.name,
                role=self.role.name,
                status=status,
                payload={**(spent.payload if spent is not None else {}), **payload},
                **usage,
            ),
            invocation=None if spent is None else self.invocation(spent, False, category),
        )

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
        files = CommitFiles(self.c.ws.git_dir, base)  # what the worktree holds, read as blobs
        prompt, pack = self._compose(files, base, tip, component)
        try:
            resumed = continuation.begin(self, self.c, self.wf, prompt)
        except ConfigError as e:
            return Outcome("failed", escalate=e)
        prompt = resumed.prompt
        too_large = self._too_large(prompt)
        if too_large is not None:
            return too_large
        route = self._route(cli_settings, creds)
        model, invocation = worker_spec.invocation_for(
            self.c, self.wf, self.name, self.role, self.cli, cli_settings, creds, route.url
        )
        invocation = dataclasses.replace(invocation, argv=resumed.argv(self.cli, invocation.argv))
        self.c.store.add_event(
            self.wf.id,
            EventSpec(
                "context_packed",
                step=self.name,
                role=self.role.name,
                payload={
                    **pack.summary(),
                    "prompt_bytes": len(prompt.encode()),
                    "credentials": creds.source,
                },
            ),
        )
        image = image_for(self.c, self.wf, self.name, files)
        spec = worker_spec.container_spec(
            self.c, self.role, invocation, cli_settings, creds, route, worktree, image, self.cli
        )
        started = time.monotonic()
        try:
            run = self._run(spec, prompt, base, route)
        except engine_loss.RunLost:
            kept = self._answered_before_the_loss(started)
            if kept is None:
                raise  # nothing arrived to keep: the step runs afresh (worker.py)
            run, printed = kept
            return self._outcome(run, model, worktree, base, branch, printed)
        return self._outcome(run, model, worktree, base, branch)

    def _answered_before_the_loss(self, started: float) -> tuple[RunResult, WorkerResult] | None:
        """A worker whose container died with the Docker engine after the model's final answer
        had reached the proxy: that answer, from the proxy's record, as if the CLI had printed
        it (the witness is what decides a step, not the CLI's stdout), so it is not bought
        again; None when no complete final answer was recorded."""
        if not witness.has_record(self.record_dir):
            return None
        assert self.record_dir is not None
        seen = witness.witness(self.cli, self.record_dir, time.time())
        if not seen.answered or not seen.text.strip():
            return None
        self.c.reporter.info(
            f"{self.cli}'s container died with the Docker engine after the model answered: "
            "its answer is read from the proxy's record, not bought again"
        )
        run = RunResult(0, "", "", time.monotonic() - started, "")
        return run, WorkerResult(ok=True, text=seen.text)

    def _route(self, cli_settings: Any, creds: credentials.Credentials) -> Any:
        """The run's route through the credential proxy: prepared ahead, or opened now."""
        if self.prepared is not None:
            return self.prepared.route
        return adopt.route(
            self.c.sandbox,
            self.step_id,
            cli_settings.base_url,
            creds.injection,
            placeholder=creds.placeholder,
            vendor=model_paths.VENDOR_OF_CLI.get(self.cli),
            record_dir=self.record_dir,
            task=run_dir_label(self.c.labels(self.wf.id, self.name)),
        )

    def _compose(
        self, files: CommitFiles, base: str, tip: str, component: Component | None
    ) -> tuple[str, Any]:
        c, wf, name, role = self.c, self.wf, self.name, self.role
        plan = wf.context.get("plan")
        task = wf.description
        if component is not None:
            targets = component.files
            task += component_task(component)
        elif base != tip:
            targets = c.ws.changed_files(tip, base)
        else:
            targets = plan_files(plan)
        projects = protected.project_map(wf.context, c.settings)  # as the task started
        return prompts.compose(
            role,
            c.repo,
            files,
            task=task,
            feedback=feedback_of(wf.context).get(name, []),
            plan=plan_for_prompt(plan, component),
            targets=targets,
            diff=c.ws.diff(tip, base) if base != tip else "",
            run_id=f"wf{wf.id}-{name}-{role.name}-step{self.step_id}",
            degrade=(wf.context.get("degraded") or {}).get(name),  # the engine's decision
            research=depth.research_document(wf.context) if role.output == "plan" else "",
            scope=project_scope.for_component(c.settings, component, projects),
            projects=plan_projects.for_prompt(projects),
            ahead=prepare.packs(c),  # gathered while the step before ran, for these inputs only
            tests_changed=base_oracle.lines_for(wf.context, c.ws.tree_hash(base)),
        )

    def _too_large(self, prompt: str) -> Outcome | None:
        limits = self.c.settings.limits
        prompt_bytes = len(prompt.encode())
        if prompt_bytes <= limits.max_prompt_bytes:
            return None
        error = ConfigError(
            f"The prompt for '{self.name}' ({self.role.name}) is {prompt_bytes} bytes, over "
            f"limits.max_prompt_bytes ({limits.max_prompt_bytes}); it was not sent.",
            f"Lower context.token_budget for '{self.role.name}', shorten the task, or raise "
            "limits.max_prompt_bytes.",
        )
        payload = {"prompt_bytes": prompt_bytes, **err(error)}
        record = self.record("prompt_too_large", error.message, payload, spent=None)
        return Outcome("failed", escalate=error, records=[record])

    def _run(self, spec: Any, prompt: str, base: str, route: Any) -> RunResult:
        """The container: the prepared one when it is exactly this one; else the one a killed
        run left for this step, or a new one."""
        c, step_id = self.c, self.step_id
        adapter = adapter_for(self.cli)
        spec = dataclasses.replace(
            spec,
            stdin_text=prompt,
            labels=adopt.worker_labels(
                c.labels(self.wf.id, self.name), step_id, self.role.name, base, route
            ),
            on_output=LineSplitter(adapter.progress, c.reporter.output),
            on_start=lambda cid: _started(c, step_id, cid),
            keep=True,  # until the step's end is recorded (`leftovers`)
            home_dir=self.home,
            record_dir=self.record_dir,
        )
        run = prepare.run(c, step_id, self.prepared, spec, base, adapter.late_prompt(prompt))
        if run is None:
            run = adopt.run(c.sandbox, step_id, spec)
        self.container_id = run.container_id or None
        faults.reached("worker_ran")  # read, its end not yet recorded (tests/test_adopt_e2e.py)
        return run

    def _outcome(
        self,
        run: RunResult,
        model: str,
        worktree: Path,
        base: str,
        branch: str | None,
        printed: WorkerResult | None = None,
    ) -> Outcome:
        """The run's answer, as the proxy witnessed it, judged: a record for each way it fails,
        else the role's result handler. `printed`: what stands for the CLI's stdout when the
        CLI could print nothing (its container died with the engine after the answer)."""
        c, role = self.c, self.role
        printed, settled, spent = self._settled(run, model, printed)
        result = settled.result
        if settled.unrecorded is not None:  # the record's file system full: the machine's
            full = settled.unrecorded
            payload = {**err(full), "category": "disk_full"}
            record = self.record(
                "worker_failed", full.message, payload, spent=spent, category="disk_full"
            )
            return Outcome("failed", escalate=full, records=[record])
        if settled.tampered is not None:
            tampered = settled.tampered
            tails = {"printed_tail": printed.text[-2000:], "api_tail": result.text[-2000:]}
            payload = {**err(tampered), **tails}
            record = self.record(
                "result_tampered", tampered.message, payload, spent=spent, category="tampered"
            )
            return Outcome("failed", escalate=tampered, records=[record])
        if not result.ok:
            return self._failed(result, spent)
        try:
            output = parse_worker_output(result.text, role.schema)
        except ParsingError as e:
            return self._unusable(e, result.text, spent)
        # The outcome is said once the answer is validated, not when the CLI says it is done.
        c.reporter.info(f"answer valid: {getattr(output, 'status', 'ok')}")
        return self._answered(output.model_dump(), spent, worktree, base, branch)

    def _settled(
        self, run: RunResult, model: str, printed: WorkerResult | None = None
    ) -> tuple[WorkerResult, witnessing.Settled, Spent]:
        """What the CLI printed, what the run answered once the proxy's record settled it (the
        record wins over stdout), and what it spent."""
        c, cli = self.c, self.cli
        if printed is None:
            printed = adapter_for(cli).parse_output(run.stdout, run.stderr, run.exit_code)
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
        spent = Spent(
            model,
            run.duration,
            usage,
            {
                "exit_code": run.exit_code,
                "duration_s": round(run.duration, 3),
                "session_id": result.session_id,
                "num_turns": result.num_turns,
                "witnessed": settled.witnessed is not None,  # False: read from stdout
                # each model request the proxy relayed (supervisor/telemetry/ shows them)
                **({"requests": settled.witnessed.requests} if settled.witnessed else {}),
            },
        )
        return printed, settled, spent

    def _unusable(self, e: ParsingError, answer: str, spent: Spent) -> Outcome:
        """An answer that does not parse against the role's schema: fed back for another try
        (a review's counts as a rejection)."""
        self.c.reporter.info(f"answer not usable: {e.message}")
        status = "rejected" if self.role.output == "review" else "failed"
        why = recovery.classify_exception(e)
        payload = {"error": e.message, "answer_tail": answer[-2000:]}
        record = self.record(
            "output_invalid",
            e.message,
            payload,
            spent=spent,
            category=str(why.category),
            status=status,
        )
        return Outcome("failed", feedback=e.message, records=[record])

    def _answered(
        self, data: dict[str, Any], spent: Spent, worktree: Path, base: str, branch: str | None
    ) -> Outcome:
        """A valid answer, judged by the result handler of the role's output kind."""
        c, role = self.c, self.role
        done = results.Answer(
            c=c,
            wf=self.wf,
            name=self.name,
            role=role,
            step_id=self.step_id,
            data=data,
            payload={**spent.payload},
            usage=spent.usage,
            invocation=self.invocation(spent, True, None),
        )
        done.payload["output"] = done.data
        if role.output == "implementation":
            # A component's commit lands on its branch in the fan-out (branch set); a fix-up
            # named after its component works on the candidate like any plain step.
            ref = f"refs/heads/{branch}" if branch is not None else candidate_ref(self.wf.id)
            return results.implementation(done, worktree, base, ref, in_fan_out=branch is not None)
        if role.output == "review":
            return results.review(done, base)
        if role.output in ("analysis", "research"):
            return assessing.answer(done)
        return results.plan(done)

    def _failed(self, result: Any, spent: Spent) -> Outcome:
        """The CLI ran and failed: retried as its kind of failure says, or sent to a person."""
        error_text = f"The {self.cli} worker failed ({result.error_kind}): {result.error}"
        why = recovery.classify_worker(result)
        escalate: SupervisorError | None = None
        if why.action == recovery.Action.ESCALATE:
            escalate = CredentialsError(
                error_text, credentials.LOGIN_HINTS.get(self.cli, "Check the CLI's credentials.")
            )
        payload = {
            "error": error_text,
            "category": str(why.category),
            "action": str(why.action),
            "retry_after": result.retry_after,
        }
        record = self.record(
            "worker_failed", error_text, payload, spent=spent, category=str(why.category)
        )
        if why.action == recovery.Action.RETRY_WITH_FEEDBACK:
            return Outcome("failed", feedback=error_text, records=[record])
        return Outcome(
            "failed", escalate=escalate, transient=None if escalate else why, records=[record]
        )


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
