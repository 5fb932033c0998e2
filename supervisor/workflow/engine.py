"""The workflow engine: walks the state machine one step at a time, checkpointing every move.

The engine decides, step modules act (supervisor.workflow.steps): it runs the current step through
`steps.run`, then turns the Outcome into the next move (advance, retry with feedback, retry the
same step after a backoff or a rate limit's reset, wait for a human, fail) and is the only writer
of workflow progress. Each move commits in one transaction with the step runs the Outcome
finished and their events (`Store.transition`), so after a crash `resume` re-runs at most the
step that was interrupted, never a completed one.

Where work lives between steps: a worker's changes become a *candidate* commit (kept alive by the
ref `refs/supervisor/wf<id>/candidate`), gates and reviews run on throwaway worktrees of that
candidate, and only the `commit` action moves the task branch, to a candidate that passed every
gate before it.
"""

from __future__ import annotations

import dataclasses
import time
import traceback
from typing import TYPE_CHECKING, Any, NoReturn

from supervisor.context.roles import load_role
from supervisor.core import host_faults, trustmap
from supervisor.core.config import Settings, StepDef, WorkflowDef
from supervisor.core.errors import (
    ApprovalRequired,
    ConfigError,
    RemoteNotUpdatedError,
    StepFailedError,
    SupervisorError,
)
from supervisor.policy import budgets, recovery, risk
from supervisor.policy.dependency_review import DependencyApprovalRequired
from supervisor.routing import failover, route
from supervisor.state import gate_history
from supervisor.state.store import EventSpec, StepRecord
from supervisor.workflow import continuation, decompose, lookahead, resuming
from supervisor.workflow.decide import Facts, decide
from supervisor.workflow.state import WorkflowState
from supervisor.workflow.steps import registry as steps
from supervisor.workflow.steps.base import (
    LineSplitter,
    Outcome,
    Reporter,
    StepContext,
    candidate_ref,
    component_branch,
    err,
    message,
)
from supervisor.workflow.steps.dispatched import ComponentsDispatched
from supervisor.workflow.steps.prepare import Pipeline

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from supervisor.sandbox.base import Sandbox
    from supervisor.state.store import Store, Workflow
    from supervisor.workspace.worktrees import Workspace

__all__ = [
    "Engine",
    "LineSplitter",
    "Outcome",
    "Reporter",
    "candidate_ref",
    "component_branch",
]


class Engine:
    # The Temporal runner (supervisor/temporal/) runs the engine one step per activity and owns
    # the waits: `one_step` returns after one transition, `external_waits` leaves a rate limit's
    # wait to a durable timer instead of sleeping here. The decisions are the same code.
    one_step = False
    external_waits = False
    # With a shared git remote (supervisor/workspace/remote.py): publish the task's refs before a
    # move that may name new commits is committed, so the database never names a missing one.
    before_commit: Callable[[int], None] | None = None

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
        _, self.breaker_threshold = recovery.load_policies()  # once per run
        self.steps = StepContext(
            repo, settings, store, workspace, sandbox, self.reporter, self._checkpoint
        )

    # -- the loop --------------------------------------------------------------------------

    def run(self, wf_id: int) -> Workflow:
        """Run until the workflow completes, fails, or waits for a human. What was prepared for
        a next step goes when the run ends, however it ends (steps/prepare.py)."""
        ahead = self.settings.limits.prepare_ahead
        if ahead and not self.one_step:  # one step per run (Temporal): nothing comes next here
            self.steps.pipeline = Pipeline(self.steps, ahead)
        try:
            return self._run(wf_id)
        finally:
            pipeline, self.steps.pipeline = self.steps.pipeline, None
            if pipeline is not None:
                pipeline.close()

    def _run(self, wf_id: int) -> Workflow:
        while True:
            wf = self.store.workflow(wf_id)
            if wf.status == "awaiting_approval" and risk.timed_wait(self.steps, wf):
                # A notify_and_timeout approval, decided or timed out: applied as resume would.
                resuming.prepare(self.store, self.store.workflow(wf_id), self.settings)
                continue
            if wf.status == "awaiting_approval":
                raise ApprovalRequired(
                    f"Workflow {wf_id} waits for approval of step '{_pending_step(wf)}'"
                    f"{risk.summary(wf)}{decompose.blocked_summary(wf.context)}.",
                    f"Approve with `supervisor approve {wf_id}` or reject with `supervisor reject "
                    f'{wf_id} --reason "..."`, then run `supervisor resume {wf_id}`.',
                )
            if wf.status == "rate_limited":
                if self._wait(wf):
                    continue
                return wf
            if wf.status != "running" or wf.current_step is None:
                return wf
            definition = WorkflowDef.model_validate(wf.definition)
            name = wf.current_step
            step = definition.steps[name]
            if not (self.steps.dispatch and step.for_each):  # past its budget, the task waits
                # Not with the components the Temporal runner relays back to their fan-out
                # (steps/dispatched.py): they are paid for, and the step applies them before it
                # asks the budget itself (nothing new past it). Paused here, their results would
                # be lost and `--extend` then `resume` would buy them again.
                self._budget(wf, name)
            wf = self.store.workflow(wf_id)
            self._prepare_after(wf, definition, step)
            try:
                outcome = self._routed(wf, name, step)
            except DependencyApprovalRequired as stop:  # a rebuild waits for a person
                self._await_dependencies(stop)
            except (ApprovalRequired, RemoteNotUpdatedError, ComponentsDispatched):
                # a wait for a person, the same step again (workspace/remote.py), or the fan-out
                # handing its components to the Temporal runner (steps/dispatched.py)
                raise
            except Exception as e:  # anything else ends the step as failed, resumable
                outcome = self._crashed(wf, name, e)
                # decided on what the step recorded as it went (a fan-out's merges), not on
                # the state read before it: a crash's outcome carries no context of its own
                wf = self.store.workflow(wf_id)
            if self.steps.pipeline is not None:
                if outcome.result == "passed":  # a plan: the fan-out's packs, gathered now
                    self.steps.pipeline.answered(wf, outcome.context)
                self.steps.pipeline.settle()  # prepared for this step and not taken: gone
            self._transition(wf, definition, name, step, outcome)
            if self.one_step:
                return self.store.workflow(wf_id)

    def _prepare_after(self, wf: Workflow, definition: WorkflowDef, step: StepDef) -> None:
        """Start preparing the worker steps that may follow `step` (lookahead.py decides which
        and from which commit; the engine's own CLI choice for each); a guess, never progress,
        made in the background while `step` sets up."""
        pipeline = self.steps.pipeline
        if pipeline is None:
            return

        def guess() -> list[lookahead.Expected]:
            tip = self.ws.branch_tip(wf.task_branch)

            def commits(role: str) -> bool:
                return load_role(role, self.repo).output == "implementation"

            odds = self._fail_odds(wf, wf.current_step, step)
            width = lookahead.fan_out_width(
                wf.context, self.settings.limits.max_parallel_components
            )
            expected = lookahead.after(definition, step, wf.context, tip, commits, odds, width)
            if not expected:  # a step that commits: the step after its gate, advanced later

                def gate_odds(name: str) -> float:
                    return self._fail_odds(wf, name, definition.steps[name])

                expected = lookahead.beyond(definition, step, wf.context, tip, commits, gate_odds)
            chosen = []
            for item in expected:
                picks = route.for_step(
                    self.repo, self.settings, self.store, wf.cli, definition.steps[item.step]
                )
                cli = next((p.cli for p in picks if p.role == item.role), None)
                chosen.append(dataclasses.replace(item, cli=cli))
            return chosen

        pipeline.ahead(wf, guess, worker=step.role is not None)

    def _fail_odds(self, wf: Workflow, name: str | None, step: StepDef) -> float:
        """A gate's odds of failing this run, from its runs at the same attempt (lookahead.py)."""
        if step.gate is None or name is None:
            return 0.0
        attempt = self.store.count_steps(wf.id, name) + 1
        return lookahead.fail_odds(
            gate_history.failed(self.store, name, attempt, lookahead.HISTORY)
        )

    def _routed(self, wf: Workflow, name: str, step: StepDef) -> Outcome:
        """Choose each role's CLI (supervisor.routing), run the step on it, and keep the choices
        as events of the step's transition."""
        try:
            chosen = route.for_step(self.repo, self.settings, self.store, wf.cli, step)
        except ConfigError as e:
            return Outcome("failed", escalate=e)
        self.steps.routes = {c.role: c.cli for c in chosen}
        outcome = steps.run(self.steps, wf, name, step)
        outcome.events[:0] = [c.event(name) for c in chosen if route.worth_recording(c)]
        if outcome.escalate is not None:  # a step's typed failure that is the machine's fault
            fault = host_faults.machine_fault(outcome.escalate, wf.id, near=self._written())
            if fault is not None:  # (Docker's full data root, said as a SandboxError) named so
                outcome = dataclasses.replace(outcome, escalate=fault)
        return outcome

    def _crashed(self, wf: Workflow, name: str, error: Exception) -> Outcome:
        """An exception out of a step (a bug, a disk error, worker output nothing foresaw):
        the step's open runs end failed and the workflow fails, resumable at this step, with
        the error as an event, instead of staying `running` with no supervisor. A typed
        SupervisorError keeps its message and hint; anything else names its type. A fault of
        the machine (a full disk, a locked state database: supervisor/core/host_faults.py) is said
        as such, and its open runs stay as a crash leaves them, for `resume` to adopt a worker
        that already answered instead of buying its answer again."""
        trace = "".join(traceback.format_exception(error))[-4000:]
        fault = host_faults.machine_fault(error, wf.id, near=self._written())
        if fault is not None:
            error = fault
        elif not isinstance(error, SupervisorError):
            error = StepFailedError(
                f"Step '{name}' of workflow {wf.id} ended with an unexpected "
                f"{type(error).__name__}: {str(error)[:600]}",
                f"Nothing of the step was committed. See `supervisor events {wf.id}` (the "
                f"traceback is in the step_crashed event), then `supervisor resume {wf.id}` "
                "runs the step again.",
            )
        event = EventSpec(
            "step_crashed", step=name, status="failed", payload={**err(error), "traceback": trace}
        )
        if fault is not None:  # its runs stay `running`: `resume` adopts or re-runs each
            return Outcome("failed", events=[event], escalate=error)
        mine = [
            r["id"]
            for r in self.store.running_steps(wf.id)
            if r["name"] == name or str(r["name"]).startswith(f"{name}/")
        ]
        records = [StepRecord(i, "failed", error=message(error)) for i in mine]
        return Outcome("failed", events=[event], escalate=error, records=records)

    def _written(self) -> list[Path]:
        """Where a run writes: the state folder (database, worktrees, bases), the repository's
        git directory (objects and refs: a merge, a commit) and the repository."""
        state = self.repo / trustmap.STATE_DIR
        return [state / "worktrees", state, self.ws.git_dir, self.repo]

    # -- transitions -----------------------------------------------------------------------

    def _budget(self, wf: Workflow, name: str) -> None:
        """Commit what `budgets.check` decided before step `name`: the limits pinned on first
        sight, and past a limit the wait in `budget_exceeded` (then raise BudgetExceeded)."""
        verdict = budgets.check(self.settings, self.store, wf, name)
        if verdict.events:
            self.store.update_workflow(
                wf.id,
                status=budgets.EXCEEDED if verdict.exceeded else wf.status,
                current_step=wf.current_step,
                context=verdict.context,
                events=verdict.events,
            )
        if verdict.exceeded is not None:
            raise budgets.exceeded_error(wf.id, verdict.exceeded)

    def _await_dependencies(self, stop: DependencyApprovalRequired) -> NoReturn:
        """Commit the wait a dependency change asked for (supervisor/policy/dependency_review.py):
        the
        workflow awaits approval, the runs that wanted the image close as waiting; then raise."""
        wait = stop.wait
        current = self.store.workflow(wait.wf_id)
        if current.status != "awaiting_approval":
            state = WorkflowState.load(current.context)
            state.approval_step, state.dependency_request = wait.producer, wait.request
            state.decision = None
            self.store.transition(
                wait.wf_id,
                step=wait.producer,
                next_step=wait.waiting,
                records=wait.records(self.store),
                context=state.dump(),
                status="awaiting_approval",
                checkpoint_status="awaiting_approval",
                request_approval=True,
                events=[wait.event],
            )
        raise stop

    def _transition(
        self, wf: Workflow, definition: WorkflowDef, name: str, step: StepDef, outcome: Outcome
    ) -> None:
        """Decide the move after `outcome` (supervisor/workflow/decide.py), commit it with the
        step runs it finished in one transaction, then wait, sleep or raise as it says."""
        move = decide(wf, definition, name, step, outcome, self._facts(wf, name, step, outcome))
        if move.error is not None:
            continuation.discard_all(self.repo / trustmap.STATE_DIR, wf.id)  # kept CLI homes
        if self.before_commit is not None:
            self.before_commit(wf.id)
        self.store.transition(
            wf.id,
            step=name,
            next_step=move.next_step,
            records=outcome.records,
            context=move.state.dump(),
            status=move.status,
            checkpoint_status=move.checkpoint_status,
            git_sha=move.git_sha,
            events=move.events,
            request_approval=move.request_approval,
            error=message(move.error) if move.error is not None else None,
        )
        if move.error is not None:
            raise move.error
        for line in move.info:
            self.reporter.info(line)
        if move.wait:
            self._wait(self.store.workflow(wf.id))
        elif move.sleep_s:
            time.sleep(move.sleep_s)

    def _facts(self, wf: Workflow, name: str, step: StepDef, outcome: Outcome) -> Facts:
        """What a decision needs from outside: the clock, the policies, the role's CLIs (read
        only when the step did not pass: only a failover needs them) and the approval policy."""
        failing = outcome.result != "passed" or outcome.escalate or outcome.transient
        clis: list[str] = []
        if step.role and failing:
            clis = failover.chain(load_role(step.role, self.repo).clis, wf.cli)

        def judge(judged: dict[str, Any], own: list[EventSpec]) -> tuple[bool, EventSpec]:
            return risk.assess(self.steps, wf, name, judged, own, step.human_approval)

        return Facts(
            now=time.time(),
            breaker_threshold=self.breaker_threshold,
            max_continuation_turns=self.settings.continuity.max_continuation_turns,
            retry_policy=self.settings.retry_policy,
            failover=self.settings.failover,
            role_clis=clis,
            judge=judge,
            decomposition=self.settings.limits.decomposition,
        )

    def _wait(self, wf: Workflow) -> bool:
        """A rate limit is a waiting state, not a failure: sleep to the reset, then run again.
        False: the wait is left to the runner (`external_waits`), the workflow still waits."""
        until = float(wf.context.get("waiting_until") or 0)
        if self.external_waits and until > time.time():
            return False
        time.sleep(max(0.0, until - time.time()))
        state = WorkflowState.load(wf.context)
        state.waiting_until = None
        self.store.update_workflow(
            wf.id,
            status="running",
            current_step=wf.current_step,
            context=state.dump(),
            events=[EventSpec("rate_limit_over", step=wf.current_step)],
        )
        return True

    def _checkpoint(
        self,
        wf_id: int,
        step: str,
        context: dict[str, Any],
        events: list[EventSpec],
        records: list[StepRecord],
    ) -> None:
        """Progress inside a running step (the component fan-out's moves), one transaction."""
        valid = WorkflowState.load(context).dump()
        if self.before_commit is not None:
            self.before_commit(wf_id)
        self.store.checkpoint(wf_id, step=step, context=valid, events=events, records=records)


def _pending_step(wf: Workflow) -> str:
    return str(wf.context.get("approval_step") or wf.current_step)
