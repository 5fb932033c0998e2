"""One implementation step fanned out over the plan's components (`for_each: component`).

Each ready component gets a fresh worker in its own worktree, started from the integration commit
(the task branch tip plus every component merged so far), so that it sees the work of the
components it depends on. The work graph batches ready components so that no two running at once
share a file, at most `limits.max_parallel_components` at a time; a finished component's slot
goes to the next ready one before its merge runs (one that needs the merged work, a dependant or
a component planned on the same file, is not ready until the merge is in). A component's commit
lands on its own branch (`<task branch>--<component>`); once the step's `gates` pass on it, it is
merged into the integration commit, in dependency order, and that commit becomes the candidate
the workflow's later test, review and commit steps judge.

Each move is saved in the workflow's context at once (one transaction), so after a crash `resume`
re-runs only components whose worker had not finished: an implemented one goes straight to its
gates, a gated one straight to its merge. A failed or conflicting component's branch is kept, and
never moved or deleted afterwards (its next attempt gets a branch of its own); only a merged
component's branch is deleted, its work being in the candidate by then. What a component may
change, and what a conflict tells its next attempt, is supervisor.workflow.ownership.
"""

from __future__ import annotations

import copy
import threading
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from supervisor.core import plural
from supervisor.core.dag import MERGING, WorkGraph
from supervisor.core.errors import MachineFault, SpecConflictError, StepFailedError, SupervisorError
from supervisor.gates import base_oracle, base_tests
from supervisor.guard import protected
from supervisor.policy import budgets, recovery
from supervisor.sandbox import adopt
from supervisor.state.store import EventSpec
from supervisor.workflow import decompose, ownership, retries
from supervisor.workflow.steps import (
    component_checks,
    component_merge,
    component_resume,
    dispatched,
    subplan,
)
from supervisor.workflow.steps.base import Outcome, StepContext, component_branch
from supervisor.workflow.steps.fix_up import fix_up
from supervisor.workflow.steps.worker import run_worker

if TYPE_CHECKING:
    from supervisor.core.config import StepDef
    from supervisor.core.dag import Component
    from supervisor.state.store import StepRecord, Workflow


class ComponentFanOut:
    def __init__(self, c: StepContext, wf: Workflow, name: str, step: StepDef) -> None:
        self.c = c
        self.wf = wf
        self.name = name
        self.step = step
        self.ctx: dict[str, Any] = copy.deepcopy(wf.context)
        self.state: dict[str, dict[str, Any]] = self.ctx.setdefault("components", {})
        self.lock = threading.Lock()
        self.errors: dict[str, SupervisorError] = {}
        self.waiting: dict[str, recovery.Classification] = {}
        self.waiting_on: dict[str, str | None] = {}  # the CLI each waits for (a failover's start)
        self.strays: dict[str, dict[str, list[str]]] = {}
        """Components that changed others' files, under `component_scope: replan`."""
        self.scope = c.settings.limits.component_scope
        self.claims: dict[str, str] = self.ctx.setdefault("claims", {})
        self.work: WorkGraph | None = None
        # a monorepo's, as pinned at start: what a component may touch
        self.projects = protected.project_map(wf.context, c.settings)
        self.kept: list[str] = self.ctx.setdefault("kept_branches", [])
        """Every branch the user was told is kept, for the whole workflow (a new plan too)."""
        self.held: dict[str, Any] | None = None  # the budget reached: nothing new dispatched
        self.tree = decompose.Tree.model_validate(self.ctx.get("decomposition") or {})
        """Components split into sub-plans (steps/subplan.py); sub-components are components."""
        self.flat_plan: dict[str, Any] | None = None
        self.splitting: list[str] = []  # split asked for: the engine decides once the rest ran
        self.pending_records: list[StepRecord] = []
        self.unsettled: dict[str, tuple[list[StepRecord], dict[str, Any]]] = {}
        """A failed run's end, kept until `_settle` records what follows from it (`_hold`)."""

    def run(self) -> Outcome:
        plan = self.ctx.get("plan")
        work = subplan.work_graph(self, plan) if plan else None
        self.work = work
        role = self.step.role or ""
        if work is None or not work.components:
            return run_worker(self.c, self.wf, self.name, role)
        relay = self.c.dispatch
        finished = dispatched.take(self, relay or [])  # the Temporal runner's component results
        merged = all(self.state.get(c, {}).get("status") == "merged" for c in work.components)
        if merged and self.ctx.get("feedback", {}).get(self.name):
            # Every component is in and a later gate or review sent work back: that is one
            # worker's fix on the integrated result, not a second round of components. (All
            # merged without feedback is a crash after the last merge: nothing is left to run.)
            return fix_up(self.c, replace(self.wf, context=self.ctx), self.name, work, role)
        component_resume.resume_entries(self, work)
        integrated = (
            self.ctx.get("integrated")
            or self.ctx.get("candidate")
            or self.ctx.get("locked_sha")
            or self.c.ws.branch_tip(self.wf.task_branch)
        )
        self.ctx["integrated"] = integrated
        for cid, outcome in finished:  # a component that failed elsewhere: counted as here
            # before the tree's changes: a split it asks for goes to the engine with the rest
            integrated = self._settle(work.components[cid], outcome, integrated)
        tree_changes = subplan.before_dispatch(self, work, integrated)  # the engine decides
        if tree_changes is not None:
            return tree_changes
        order = {cid: i for i, cid in enumerate(work.merge_order())}
        limit = self.c.settings.limits.max_parallel_components
        with ThreadPoolExecutor(max_workers=limit, thread_name_prefix="component") as pool:
            running: dict[Future[Outcome], str] = {
                pool.submit(self._gate_and_hand_over, cid): cid
                for cid, entry in self.state.items()
                if entry["status"] in ("implemented", "gated")
            }
            while True:
                if relay is not None and not running and not self._stopped():
                    # the budget is checked as here (a held step hands nothing over), and a
                    # component planned too big is split, not handed over
                    batch = subplan.unsplit(self, self._dispatchable(work, limit), integrated)
                    dispatched.hand_over(self, batch, integrated)
                if relay is None:
                    self._dispatch(work, limit, integrated, pool, running)
                if not running:
                    break
                done, _ = wait(running, return_when=FIRST_COMPLETED)
                ended = [
                    (running.pop(f), f.result())
                    for f in sorted(done, key=lambda f: order[running[f]])
                ]
                if relay is None and all(self._merges(cid, outcome) for cid, outcome in ended):
                    # Their slots go to the next ready components before the merges run: a
                    # merge waits for no one, and whoever needs the merged work (a dependant,
                    # a component sharing a file) is not ready until it is in.
                    for cid, _ in ended:
                        work.components[cid].status = MERGING
                    self._dispatch(work, limit, integrated, pool, running)
                for cid, outcome in ended:
                    integrated = self._settle(work.components[cid], outcome, integrated)
        return self._outcome(work, integrated)

    def _dispatch(
        self,
        work: WorkGraph,
        limit: int,
        integrated: str,
        pool: ThreadPoolExecutor,
        running: dict[Future[Outcome], str],
    ) -> None:
        if self._stopped():
            return
        for comp in self._dispatchable(work, limit):
            base = self._adopted_base(comp.id) or self.base_for(comp.id, integrated)
            if subplan.over_scope(self, comp, base):
                continue
            comp.status = "running"
            self._save(comp.id, status="running", started_from=base)
            running[pool.submit(self._build, comp, base)] = comp.id

    def _stopped(self) -> bool:
        """Nothing new starts: a component failed, strayed, or waits for the engine's split."""
        return bool(self.errors or self.strays or self.splitting)

    def _merges(self, cid: str, outcome: Outcome) -> bool:
        """A finished top-level component whose next move is its merge into the candidate."""
        return (
            outcome.result == "passed"
            and bool(outcome.git_sha)
            and self.tree.parent_of(cid) is None
        )

    def _dispatchable(self, work: WorkGraph, limit: int) -> list[Component]:
        """The next batch, unless the task or this step reached its budget: then none, for good
        in this run (the running components finish, their work paid for; `_outcome` holds the
        rest until `approve --extend`)."""
        ready = work.batch(limit)
        if ready and self.held is None:
            budget = self.ctx.get(budgets.KEY) or {}
            self.held = budgets.reached(budget, self.c.store, self.wf.id, self.name)
        return [] if self.held is not None else ready

    # -- in a worker thread ----------------------------------------------------------------

    def _build(self, comp: Component, base: str) -> Outcome:
        """The component's worker, then its gates. A transient error (rate limit, network) is
        not retried here: the component waits, and the engine's one recovery policy runs the
        step again for it once the others are done (see `_outcome`)."""
        step_name = f"{self.name}/{comp.id}"
        if subplan.is_container(self, comp.id):  # its sub-components are in: the QA pass
            return subplan.qa_pass(self, comp)
        outcome = run_worker(
            subplan.routed(self, comp.id),
            self._view(),
            step_name,
            self.step.role or "",
            base=base,
            component=comp,
            branch=self._branch(comp.id),
        )
        trees = outcome.context.get("trees", {}).get(step_name)
        if outcome.result != "passed":
            self._hold(comp.id, outcome.records, trees=trees)
            return replace(outcome, records=[])
        if outcome.git_sha is None:
            # The step run's end (and the loop memory) is recorded at once, in one transaction.
            self._save(comp.id, trees=trees, records=outcome.records)
        else:
            # The step's end and the component's progress: one transaction.
            self._save(
                comp.id,
                status="implemented",
                sha=outcome.git_sha,
                base=base,
                trees=trees,
                records=outcome.records,
            )
        return self._gate_and_hand_over(comp.id)

    def _gate_and_hand_over(self, cid: str) -> Outcome:
        """Its checks before its merge (steps/component_checks.py)."""
        return component_checks.gate_and_hand_over(self, cid)

    def base_for(self, cid: str, integrated: str) -> str:
        """Where a component starts and merges: its split parent's branch (begun at the
        integration when its first sub-component starts), else the integration commit."""
        parent = self.tree.parent_of(cid)
        if parent is None:
            return integrated
        entry = self.state.setdefault(parent, {"status": "pending", "attempts": 0})
        if not entry.get("integrated"):
            begun = self.base_for(parent, integrated)
            with self.lock:
                entry["integrated"] = begun
        return str(entry["integrated"])

    def _adopted_base(self, cid: str) -> str | None:
        """The commit a component interrupted by a kill started from, while its worker's
        container waits to be adopted: the integration may have moved on since (another
        component merged), and a worker is adopted only on the tree it was started on."""
        begun = self.state.get(cid, {}).get("started_from")
        pending = adopt.pending(self.c.sandbox)
        return str(begun) if begun and f"{self.name}/{cid}" in pending else None

    def snapshot(self) -> dict[str, Any]:
        with self.lock:
            subplan.snapshot_tree(self, self.ctx)
            return copy.deepcopy(self.ctx)

    # -- in the main thread ----------------------------------------------------------------

    def _settle(self, comp: Component, outcome: Outcome, integrated: str) -> str:
        """Merge a finished component, or count its failure; returns the integration commit."""
        if outcome.result == "passed" and outcome.git_sha:
            return component_merge.merge(self, comp, outcome.git_sha, integrated)
        if outcome.transient is not None and outcome.escalate is None:
            why = outcome.transient
            comp.status = "waiting"  # the others go on; the engine's recovery policy resumes it
            self.waiting[comp.id] = why
            self.waiting_on[comp.id] = outcome.cli
            until = time.time() + (why.wait_seconds or 0.0)
            self._save(
                comp.id,
                status="waiting",
                until=until if why.wait_seconds is not None else None,
                reason=why.reason[:400],
                event=EventSpec(
                    "component_waiting",
                    step=self.name,
                    status=str(why.category),
                    payload={"component": comp.id, "reason": why.reason[:1000]},
                ),
            )
            return integrated
        if isinstance(outcome.escalate, MachineFault):
            # The machine's fault (its gate's tests out of disk space), not the component's:
            # its work stays as recorded (implemented: `resume` gates it again, buying
            # nothing), nothing new starts, and the step stops for a person (`_outcome`).
            comp.status = "failed"
            self.errors[comp.id] = outcome.escalate
            payload = {"component": comp.id, "error": outcome.escalate.message[:2000]}
            event = EventSpec("component_failed", step=self.name, status="machine", payload=payload)
            self._save(comp.id, event=event)
            return integrated
        strays = outcome.context.get("out_of_scope")
        if strays and self.scope == "replan" and self.ctx.get("planned_by"):
            comp.status = "pending"  # the plan goes back to its planner once the others are done
            self.strays[comp.id] = strays
            self._save(comp.id, status="pending")
            return integrated
        counted = retries.FeedbackRetry.after(
            self.state[comp.id].get("attempts", 0), self.step.max_retries
        )
        attempts = counted.failures
        problem = outcome.feedback or outcome.result
        trigger = subplan.failure_trigger(self, comp.id, outcome, counted.exhausted)
        if trigger is not None:  # split, or decided on by the engine (steps/subplan.py)
            subplan.split(self, comp, trigger, problem, outcome.cli, attempts=attempts)
            return integrated
        if outcome.escalate is not None:
            error = outcome.escalate
        elif counted.exhausted:
            error = StepFailedError(
                f"Component '{comp.id}' failed {attempts} times, its limit of "
                f"{plural.counted(self.step.max_retries + 1, 'attempt')} (the first and "
                f"{plural.counted(self.step.max_retries, 'retry', 'retries')}); last problem: "
                f"{problem[:600]}",
                "Fix the cause (see `supervisor events`).",
            )
        else:
            comp.status = "pending"  # the next batch runs it again, with the feedback
            self._save(comp.id, status="pending", attempts=attempts, feedback=problem)
            return integrated
        self._fail(
            comp,
            error,
            status="failed",
            attempts=attempts,
            event=EventSpec(
                "component_failed",
                step=self.name,
                status="failed",
                payload={"component": comp.id, "error": error.message[:2000]},
            ),
        )
        return integrated

    def _fail(self, comp: Component, error: SupervisorError, **fields: Any) -> None:
        """`comp` ends failed for this run: nothing new is dispatched after it, its files are
        free, and its record says why (a failure, or a merge conflict)."""
        comp.status = "failed"
        self.errors[comp.id] = error
        self._release(comp.id)
        self._save(comp.id, error=error.message, **fields)

    def _outcome(self, work: WorkGraph, integrated: str) -> Outcome:
        ctx = self.snapshot()
        if not self.errors and self.splitting:  # the engine splits (steps/subplan.py)
            return Outcome(decompose.EXPAND, context=ctx)
        if not self.errors and self.held is not None and not self.strays:  # a replan goes first
            held = [c.id for c in work.components.values() if c.status == "pending"]
            payload = {"components": held, **self.held}
            event = EventSpec("components_held", step=self.name, status="budget", payload=payload)
            return Outcome(budgets.HELD, context=ctx, events=[event])
        if not self.errors and self.waiting:
            # The longest wait decides; the engine records the waiting state (`status` shows it
            # with its reset time) and runs this step again, for the waiting components only.
            longest = max(self.waiting, key=lambda c: self.waiting[c].wait_seconds or 0.0)
            ids = ", ".join(self.waiting)
            why = self.waiting[longest]
            why = replace(why, reason=f"component(s) {ids}: {why.reason}")
            return Outcome("failed", context=ctx, transient=why, cli=self.waiting_on.get(longest))
        if not self.errors:
            for cid in work.components:
                ctx.get("feedback", {}).pop(f"{self.name}/{cid}", None)
        if not self.errors and self.strays:
            planner = str(self.ctx["planned_by"])
            return Outcome(
                "rejected",
                context=ctx,
                feedback=ownership.replan_feedback(self.strays),
                goto=planner,
                events=[
                    EventSpec(
                        "replan_requested",
                        step=self.name,
                        status="out_of_scope",
                        payload={"to": planner, "files": self.strays},
                    )
                ],
            )
        if not self.errors:
            ctx["candidate"] = integrated
            verdicts = [self.state[cid].get(base_oracle.CONTEXT_KEY) for cid in work.components]
            joined = base_tests.joined(verdicts, self.c.ws.tree_hash(integrated))
            if joined is not None:  # what the components' own gates found, for the policy
                ctx[base_oracle.CONTEXT_KEY] = joined
            return Outcome("passed", git_sha=integrated, context=ctx)
        waiting = [c.id for c in work.components.values() if c.status == "pending"]
        kept = [
            self._branch(cid) for cid in self.errors if self.c.ws.branch_exists(self._branch(cid))
        ]
        ctx["kept_branches"] = [*self.kept, *(b for b in kept if b not in self.kept)]
        faults = [e for e in self.errors.values() if isinstance(e, MachineFault)]
        if faults:  # the machine first: the rest is tried again once it is fixed
            return Outcome("failed", context=ctx, escalate=faults[0])
        conflicts = [e for e in self.errors.values() if isinstance(e, SpecConflictError)]
        if conflicts and len(conflicts) == len(self.errors):  # a person decides (decide.py)
            return Outcome("failed", context=ctx, escalate=conflicts[0])
        problems = "; ".join(f"{cid}: {e.message}" for cid, e in self.errors.items())
        blocked = f" {', '.join(waiting)} did not start (they wait for it)." if waiting else ""
        merged = sum(c.status == "complete" for c in work.components.values())
        return Outcome(
            "failed",
            context=ctx,
            escalate=StepFailedError(
                f"Step '{self.name}': {len(self.errors)} of {len(work.components)} components "
                f"could not be finished ({merged} merged). {problems}{blocked}",
                (f"Their branches are kept: {', '.join(kept)}. " if kept else "")
                + f"Fix the cause (see `supervisor events {self.wf.id}`), then `supervisor "
                f"resume {self.wf.id}` runs only the unfinished components.",
            ),
        )

    # -- branches and ownership ------------------------------------------------------------

    def _branch(self, cid: str) -> str:
        """Where the component's next commit goes: its own branch, or a fresh one once the user
        was told that one is kept."""
        return self.state.get(cid, {}).get("branch") or component_branch(self.wf.task_branch, cid)

    def _drop_branch(self, cid: str) -> None:
        """A merged component's branch goes (its work is in the candidate); a kept one never."""
        branch = self._branch(cid)
        if branch not in self.kept:
            self.c.ws.delete_ref(f"refs/heads/{branch}")

    def _release(self, cid: str) -> None:
        """A component that finally failed gives up the undeclared files it claimed."""
        with self.lock:
            for path in [p for p, owner in self.claims.items() if owner == cid]:
                del self.claims[path]

    # -- the shared context ----------------------------------------------------------------

    def _view(self) -> Workflow:
        """The workflow as a worker should see it now (feedback and loop memory included)."""
        with self.lock:
            ctx = copy.deepcopy(self.ctx)
        if self.flat_plan is not None and self.tree.nodes:  # sub-components see the tree
            ctx["plan"] = self.flat_plan
        return replace(self.wf, context=ctx)

    def _hold(self, cid: str, records: list[StepRecord], **fields: Any) -> None:
        """A failed run's end (its step row, its loop memory) is recorded in the transaction of
        `_settle`'s decision on it (retry with feedback, wait, split, fail): a supervisor killed
        between two transactions ran the component again as if nothing had been decided, one
        worker run or gate more than the task needed."""
        with self.lock:
            kept, more = self.unsettled.setdefault(cid, ([], {}))
            kept.extend(records)
            more.update(fields)

    def _save(
        self,
        cid: str,
        *,
        event: EventSpec | None = None,
        integrated: str | None = None,
        feedback: str | None = None,
        trees: list[str] | None = None,
        records: list[StepRecord] | None = None,
        **fields: Any,
    ) -> None:
        """Record one component's move in the workflow's context, in one transaction (with the
        step runs that finished with it), through the engine's writer."""
        with self.lock:
            held, more = self.unsettled.pop(cid, ([], {}))
            if held or more:
                trees = trees if trees is not None else more.pop("trees", None)
                fields = {**more, **fields}
                records = [*held, *(records or [])]
            self.state[cid].update(fields)
            subplan.snapshot_tree(self, self.ctx)
            if integrated is not None:
                self.ctx["integrated"] = integrated
                self.ctx["candidate"] = integrated
            if feedback is not None:
                self.ctx.setdefault("feedback", {}).setdefault(f"{self.name}/{cid}", []).append(
                    feedback
                )
            if trees is not None:
                self.ctx.setdefault("trees", {})[f"{self.name}/{cid}"] = trees
            self.c.checkpoint(
                self.wf.id,
                self.name,
                self.ctx,
                [event] if event is not None else [],
                records or [],
            )
