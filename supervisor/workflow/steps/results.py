"""One result handler per output kind: a plan, a review, an implementation.

A worker's answer is data from an adversary: a plan is checked as a work graph, a review's
verdict is taken as given, and an implementation is judged by what git sees in its worktree, not
by what the worker claims (loops, locked interfaces, protected paths, modules shadowing the test
runner's, weakened test files and the role's own gates are checked here). Each handler returns
an Outcome whose records close the step run; the engine commits them with its transition.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from supervisor.context import interfaces
from supervisor.core.dag import WorkGraph
from supervisor.core.errors import (
    CandidateRefusedError,
    ConfigError,
    SpecConflictError,
    StepFailedError,
)
from supervisor.core.schemas import PlanOutput
from supervisor.gates import problems as gate_problems
from supervisor.gates import test_pins
from supervisor.gates.run import GateResult, run_gate
from supervisor.guard import protected
from supervisor.project import shadowing
from supervisor.state.store import EventSpec, StepRecord
from supervisor.workflow import history, plan_projects
from supervisor.workflow.steps.base import Outcome, StepContext, err
from supervisor.workspace.candidate_tree import SnapshotLimits

if TYPE_CHECKING:
    from pathlib import Path

    from supervisor.context.roles import Role
    from supervisor.state.store import Workflow


@dataclass
class Answer:
    """A worker's parsed answer and the facts of its run, as the handlers need them."""

    c: StepContext
    wf: Workflow
    name: str
    role: Role
    step_id: int
    data: dict[str, Any]
    payload: dict[str, Any]
    usage: dict[str, Any]
    invocation: dict[str, Any]
    """The run's metrics row (a successful run: the CLI answered); it goes with the record."""

    def record(
        self,
        status: str,
        kind: str,
        event_status: str,
        *,
        error: str | None = None,
        payload: dict[str, Any] | None = None,
        usage: bool = True,
    ) -> StepRecord:
        """The step run's end: its status, output, event and metrics row."""
        return StepRecord(
            self.step_id,
            status,
            output=self.data,
            error=error,
            event=EventSpec(
                kind,
                step=self.name,
                role=self.role.name,
                status=event_status,
                payload=self.payload if payload is None else payload,
                **(self.usage if usage else {}),
            ),
            invocation=self.invocation,
        )

    def reject(self, problem: str, kind: str = "implementation", **extra: Any) -> list[StepRecord]:
        """A judged implementation's failure: its problem, with what git saw it change."""
        return [
            self.record("failed", kind, "failed", error=problem, payload={**self.payload, **extra})
        ]


def plan(a: Answer) -> Outcome:
    """A complete plan whose components form a valid work graph passes."""
    data = a.data
    records = [a.record("succeeded", "plan", data["status"])]
    if data["status"] != "COMPLETE":
        return Outcome(
            "failed",
            feedback=f"The plan came back {data['status']}; make it complete.",
            records=records,
        )
    projects = protected.project_map(a.wf.context, a.c.settings)
    wrong = plan_projects.problem(data, projects)  # no project, an unknown one, its files
    if wrong is not None:
        return Outcome("failed", feedback=wrong, records=records)
    try:
        WorkGraph.from_plan(PlanOutput.model_validate(data), projects)
    except ConfigError as e:  # a cycle (across projects too), a dangling depends_on, ...
        return Outcome("failed", feedback=f"{e.message} {e.hint}", records=records)
    # A new plan starts its components afresh (a re-plan after a rejection, say).
    return Outcome(
        "passed",
        records=records,
        context={
            "plan": data,
            "components": {},
            "integrated": None,
            "claims": {},
            "planned_by": a.name,
        },
    )


def review(a: Answer, base: str) -> Outcome:
    """APPROVED passes (and is remembered for the reviewed tree); anything else is a rejection
    whose feedback lists the issues."""
    data = a.data
    verdict = data["status"]
    status = "succeeded" if verdict == "APPROVED" else "rejected"
    records = [a.record(status, "review", verdict)]
    if verdict == "APPROVED":
        reviewed = history.record_review(a.wf.context, a.c.ws.tree_hash(base), [a.role.name])
        return Outcome("passed", context={"reviewed": reviewed}, records=records)
    issues = (
        "\n".join(
            f"- [{i['severity']}] {i.get('file') or ''} {i['description']}" for i in data["issues"]
        )
        or "(no issues listed)"
    )
    return Outcome(
        "rejected",
        feedback=f"The reviewer answered {verdict}: {data['summary']}\n{issues}",
        records=records,
    )


def implementation(a: Answer, worktree: Path, base: str, ref: str, *, in_fan_out: bool) -> Outcome:
    """Trust the worktree, not the worker's claims: what changed is what git sees."""
    c, wf, name, role, data = a.c, a.wf, a.name, a.role, a.data
    if data["status"] == "TOO_LARGE":  # nothing of it is kept: the fan-out may split it
        return too_large(a, in_fan_out=in_fan_out)
    if data["status"] == "SPEC_CONFLICT":  # nothing of it is kept: a person decides
        return spec_conflict(a)
    limits = c.settings.limits
    try:
        sha = c.ws.snapshot(
            worktree,
            f"{name}: {wf.description[:60]}",
            limits=SnapshotLimits(int(limits.max_worktree_mb * 2**20), limits.max_files_added),
        )
    except CandidateRefusedError as e:
        record = a.record(
            "failed",
            e.kind,
            "failed",
            error=e.message,
            payload={**a.payload, **err(e)},
            usage=False,
        )
        return Outcome("failed", feedback=f"{e.message} {e.hint}", records=[record])
    changed = c.ws.changed_files(base, sha) if sha else []
    claimed = sorted(set(data["files_created"]) | set(data["files_modified"]))
    a.payload = {
        **a.payload,
        "changed_files": changed,
        "claimed_but_unchanged": sorted(set(claimed) - set(changed)),
        "changed_but_unclaimed": sorted(set(changed) - set(claimed)),
    }
    if sha is not None:
        # Every attempt stays inspectable, whatever its gates say later.
        c.ws.set_ref(history.attempt_ref(wf.id, name, a.step_id), sha, None)
    if sha is None or data["status"] == "FAILED":
        return no_candidate(a, base, sha, claimed, in_fan_out=in_fan_out)
    # Semantic loop: a retry that reproduces an earlier attempt's content will fail the same
    # way, however often it is fed back.
    tree = c.ws.tree_hash(sha)
    seen = dict(wf.context.get("trees", {}))
    earlier = list(seen.get(name, []))
    if tree in earlier:
        return looped(a, tree, earlier.index(tree) + 1)
    seen[name] = [*earlier, tree]
    pins = protected.pinned(wf.context, c.settings)
    refused = forbidden_change(a, base, sha, changed, pins, seen)
    if refused is not None:
        return refused
    floor = test_pins.merged(
        test_pins.pins_at(c.ws.git_dir, wf.base_sha), wf.context.get("test_pins") or {}
    )
    weakened = test_pins.weakened(c.ws.git_dir, floor, wf.base_sha, sha, pins.allowed)
    if weakened:
        problem = test_pins.feedback(weakened)
        records = a.reject(problem, "tests_weakened", weakened=weakened)
        return Outcome("failed", feedback=problem, context={"trees": seen}, records=records)
    refused = role_gate_failure(a, sha, seen)
    if refused is not None:
        return refused
    c.ws.set_ref(ref, sha, None)
    proposed = test_pins.proposal(c.ws.git_dir, role.name, sha, tree, floor)
    return Outcome(
        "passed",
        context={"candidate": sha, "trees": seen, **proposed},
        git_sha=sha,
        records=[a.record("succeeded", "implementation", "succeeded")],
    )


def too_large(a: Answer, *, in_fan_out: bool) -> Outcome:
    """The worker's word that the work is too large for one worker: in a fan-out the component
    may be split (the reason goes to the engine in the context); elsewhere it is a failure."""
    data = a.data
    reason = data["reason"] or "; ".join(data["blockers"]) or "(no reason given)"
    record = a.record("failed", "too_large", "too_large", error=reason)
    return Outcome(
        "failed",
        feedback=f"The worker reported the work too large for one worker: {reason}",
        context={"too_large": reason} if in_fan_out else {},
        records=[record],
    )


def no_candidate(
    a: Answer, base: str, sha: str | None, claimed: list[str], *, in_fan_out: bool
) -> Outcome:
    """No candidate to judge: the worker changed no file (which `unchanged` may still accept)
    or reported FAILED. The feedback names the files it claimed but did not write."""
    data = a.data
    noop_context: dict[str, Any] = {}
    if sha is None and data["status"] != "FAILED":
        same, noop_context = unchanged(a, base, in_fan_out=in_fan_out)
        if same is not None:
            return same
    problem = (
        "The worker changed no files"
        if sha is None
        else f"The worker reported FAILED: {'; '.join(data['blockers'])}"
    )
    if sha is None and claimed:
        problem += f", although it claimed to have written {', '.join(claimed)}"
    return Outcome(
        "failed", feedback=problem + ".", context=noop_context, records=a.reject(problem)
    )


def looped(a: Answer, tree: str, attempt: int) -> Outcome:
    """The same content as attempt `attempt`: feeding it back again would loop, so a person
    changes the task, role or model."""
    name, wf = a.name, a.wf
    records = a.reject(
        "same content as an earlier attempt",
        "loop_detected",
        tree=tree,
        same_as_attempt=attempt,
    )
    return Outcome(
        "failed",
        records=records,
        escalate=StepFailedError(
            f"Step '{name}' produced exactly the same content as its attempt "
            f"{attempt}: the feedback is not changing the result, so "
            "retrying again would loop.",
            f"Read the feedback in `supervisor events {wf.id}`, change the task, role or "
            f"model, then `supervisor resume {wf.id}`.",
        ),
    )


def forbidden_change(
    a: Answer,
    base: str,
    sha: str,
    changed: list[str],
    pins: protected.Pinned,
    seen: dict[str, Any],
) -> Outcome | None:
    """The first path the candidate may not touch, fed back: a locked interface, a protected
    path, a module shadowing the test runner's; None when it touched none."""
    c, wf, name, role = a.c, a.wf, a.name, a.role
    locked = [] if wf.context.get("locked_by") == name else wf.context.get("locked_files", [])
    frozen = interfaces.touched(locked, changed)
    if frozen:
        problem = (
            f"The step changed {', '.join(frozen)}, which the tech lead's interface step "
            "fixed for every component: they are read-only. Build against them unchanged "
            "(if one really must change, report it under blockers)."
        )
        records = a.reject(problem, "interface_changed", locked=frozen)
        return Outcome("failed", feedback=problem, context={"trees": seen}, records=records)
    guarded = protected.changed_protected(c.repo, pins, role.allow_paths, base, sha, changed)
    guarded += shadowing.added_shadows(c.ws.git_dir, base, sha, changed, pins.allowed, guarded)
    if guarded:
        problem = protected.feedback(guarded)
        records = a.reject(problem, "protected_path_changed", protected=guarded)
        return Outcome("failed", feedback=problem, context={"trees": seen}, records=records)
    return None


def role_gate_failure(a: Answer, sha: str, seen: dict[str, Any]) -> Outcome | None:
    """The role's own gates on the candidate: a failed one set to block goes to a person, any
    other is fed back; None when all pass."""
    c, wf, name, role = a.c, a.wf, a.name, a.role
    failed_gate = role_gates(c, wf, name, role, sha)
    if failed_gate is None:
        return None
    gate, result = failed_gate
    records = a.reject(f"role gate '{gate.name}' failed")
    if gate.on_fail == "block":
        return Outcome(
            "failed",
            records=records,
            escalate=StepFailedError(
                f"Role gate '{gate.name}' of {role.name} failed and is set to block: "
                f"{result.output[-800:]}",
                f"Fix what `{gate.command}` reports, then `supervisor resume {wf.id}`.",
            ),
        )
    return Outcome("failed", feedback=result.feedback(), context={"trees": seen}, records=records)


def spec_conflict(a: Answer) -> Outcome:
    """The worker's word that the task contradicts the base's tests: no retry can settle that,
    so the step stops for a person with the worker's reason (ImpossibleBench's way out: a
    worker offered it cheats less). Whatever the worker changed is not kept."""
    data = a.data
    reason = (data["reason"] or "; ".join(data["blockers"]) or "(no reason given)")[:2000]
    tests = [str(t)[:300] for t in data["conflicting_tests"][:20]]
    named = f" ({', '.join(tests)})" if tests else ""
    error = SpecConflictError(
        f"Step '{a.name}': the worker reports that the task contradicts the existing "
        f"tests{named}: {reason}",
        f"The tests of the task's base are its specification, so a person decides: `supervisor "
        f"approve {a.wf.id}` lets the next attempt change those tests (its change is shown "
        f"again before it is committed); `supervisor reject {a.wf.id} --reason ...` sends your "
        f"answer to the worker instead. Then `supervisor resume {a.wf.id}`.",
        step=a.name,
        reason=reason,
        tests=tests,
    )
    payload = {**a.payload, "reason": reason, "tests": tests}
    record = a.record("failed", "spec_conflict", "spec_conflict", error=reason, payload=payload)
    return Outcome("failed", escalate=error, records=[record])


def unchanged(a: Answer, base: str, *, in_fan_out: bool) -> tuple[Outcome | None, dict[str, Any]]:
    """A worker that changed no file: a valid result when its role may change nothing; a gate
    problem when the gate that sent the work back fails again on the same tree; a loop when it
    gives the same answer again. (None, extra context) fails it as usual."""
    from supervisor.workflow.steps.gate import gate_on

    c, wf, name, role, data = a.c, a.wf, a.name, a.role, a.data
    claimed = sorted(set(data["files_created"]) | set(data["files_modified"]))
    payload = {**a.payload, "changed_files": []}

    def finish(status: str, kind: str, event_status: str, error: str | None = None) -> StepRecord:
        return a.record(status, kind, event_status, error=error, payload=payload)

    if role.may_change_nothing and not claimed and not in_fan_out:
        c.reporter.info(f"{role.name} changed nothing, which its role allows")
        return Outcome("passed", records=[finish("succeeded", "implementation", "unchanged")]), {}
    failure = wf.context.get("gate_failure") or {}
    tree = c.ws.tree_hash(base)
    if failure.get("to") == name.split("/")[0] and failure.get("tree") == tree:
        again = gate_on(c, wf, failure["step"], failure["gate"], base)
        if again.escalate is None and again.result == "passed":
            mine = finish("succeeded", "implementation", "unchanged")
            return Outcome("passed", context=again.context, records=[*again.records, mine]), {}
        mine = finish("failed", "implementation", "failed", "the gate fails on the unchanged tree")
        error = again.escalate or gate_problems.gate_problem_error(
            failure["gate"],
            c.settings.gates.get(failure["gate"], ""),
            tree,
            again.context.get("gate_failure", {}).get("output", again.feedback or ""),
            wf.id,
        )
        outcome = Outcome(
            "failed",
            escalate=error,
            context=again.context,
            resume_at=failure["step"],
            records=[*again.records, mine],
        )
        return outcome, {}
    answer = hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]
    seen = {k: list(v) for k, v in wf.context.get("noops", {}).items()}
    earlier = seen.setdefault(name, [])
    if answer in earlier:
        return Outcome(
            "failed",
            records=[finish("failed", "loop_detected", "failed", "same answer, no change, again")],
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


def role_gates(
    c: StepContext, wf: Workflow, name: str, role: Role, sha: str
) -> tuple[Any, GateResult] | None:
    """The role's own gates on its candidate; the first failure, or None."""
    for gate in role.gates:
        worktree = c.ws.add_worktree(f"wf{wf.id}-{name}-{gate.name}", sha)
        try:
            result = run_gate(
                c.sandbox,
                gate.name,
                gate.command,
                worktree,
                c.settings.limits,
                c.labels(wf.id, name),
                on_output=c.reporter.output,
            )
        finally:
            c.ws.remove_worktree(worktree)
        c.store.add_event(
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
