"""The engine's side of the approval policy: the candidate's facts, and the wait it decides.

Before the `commit` step the engine asks `assess` whether the candidate may go on. The facts are
read the way the host reads every candidate: as git data (numstat, name-status, blobs), never by
checking it out or running anything from it; Python files are parsed with `ast`, never imported.
What the gates and reviewers said comes from the event log plus the outcome of the step that just
ended: its events commit with the engine's move, after this judgement, so the committed log alone
would miss the very review that approved (and the security concerns it listed). The decision
(level, action, every condition that fired) goes into the workflow's context and a
`risk_assessed` event, which is what `approve`, `status` and the TUI show.

`notify_and_timeout` waits in the running process: the approval is requested as usual, a
notification goes out, and if nobody rejects (or approves) within the timeout the engine records
the approval itself, by "timeout", and goes on.
"""

from __future__ import annotations

import ast
import contextlib
import time
from typing import TYPE_CHECKING, Any, Protocol

from supervisor.core import process
from supervisor.core.errors import SupervisorError
from supervisor.policy import approval_policy, notify
from supervisor.policy.approval_policy import Facts, FileChange
from supervisor.state.store import EventSpec
from supervisor.workspace import treedata

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

    from supervisor.gates.asking import Asking
    from supervisor.state.store import Workflow

CONTEXT_KEY = "risk"
MAX_PARSE_BYTES = 1_000_000
TS_SUFFIXES = (".ts", ".tsx", ".mts", ".cts", ".js", ".jsx", ".mjs", ".cjs")
POLL_SECONDS = 1.0


def assess(
    engine: Asking,
    wf: Workflow,
    name: str,
    ctx: dict[str, Any],
    own: Sequence[EventSpec] = (),
    human: bool = False,
) -> tuple[bool, EventSpec]:
    """Judge the candidate about to be committed; (whether the run must wait for a person, the
    event recording why). The decision is written into `ctx` under "risk". `own`: the events of
    the step that just ended, not yet committed. `human`: the step is marked `human_approval`, so
    nothing less than one person's approval will do."""
    candidate = ctx.get("candidate")
    tip = engine.ws.branch_tip(wf.task_branch)
    policy = approval_policy.load(engine.repo)
    history: list[Recorded] = [*engine.store.events(wf.id), *own]
    facts = gather(engine.repo, tip, candidate, history) if candidate else Facts()
    if candidate:
        tree = engine.ws.tree_hash(candidate)
        if not spec_facts(facts, ctx.get("spec_change"), tree):
            unjudged_spec(facts, engine.ws.git_dir, wf.base_sha, candidate)
    decision = approval_policy.evaluate(policy, facts)
    if human and not decision.stops:
        decision.action = "require_approval"
        decision.reasons.append(f"step '{name}' is marked human_approval")
    record = {**decision.as_context(), "step": name, "approved_by": []}
    if decision.action == "notify_and_timeout":
        record["proceed_at"] = time.time() + decision.timeout_minutes * 60
    ctx[CONTEXT_KEY] = record
    payload = {
        **decision.as_context(),
        "files": len(facts.files),
        "lines": facts.lines,
        "policy": policy.source,
    }
    event = EventSpec("risk_assessed", step=name, status=decision.level, payload=payload)
    if not decision.stops:  # a stop shows them once, with what waits (policy/approvals.pending)
        for line in approval_policy.describe(record):
            engine.reporter.info(line)
    return decision.action != "auto_approve", event


def times_out(wf: Workflow) -> bool:
    """Whether the workflow waits on a `notify_and_timeout` approval (the engine waits it out)."""
    judged = wf.context.get(CONTEXT_KEY) or {}
    return judged.get("action") == "notify_and_timeout" and judged.get("step") == wf.context.get(
        "approval_step"
    )


def summary(wf: Workflow) -> str:
    """` (risk high: why; why)` for the message that says a workflow waits; empty if unjudged."""
    judged = wf.context.get(CONTEXT_KEY) or {}
    if judged.get("step") != wf.context.get("approval_step") or not judged.get("level"):
        return ""
    return f" (risk {judged['level']}: {'; '.join(judged.get('reasons', []))})"[:600]


def timed_wait(engine: Asking, wf: Workflow) -> bool:
    """For a `notify_and_timeout` approval: notify, wait for a decision or the timeout, record
    the timeout's approval, and apply the decision as `resume` would. False when the waiting
    approval is not one that times out (the caller stops for a person as usual)."""
    risk = wf.context.get(CONTEXT_KEY) or {}
    approval = engine.store.latest_approval(wf.id)
    if (
        risk.get("action") != "notify_and_timeout"
        or approval is None
        or approval.step != risk.get("step")
    ):
        return False
    if approval.status == "pending":
        until = float(risk.get("proceed_at") or 0)
        minutes = max(0.0, (until - time.time()) / 60)
        message = (
            f"Workflow {wf.id} goes on in {minutes:.0f} min unless rejected "
            f"(`supervisor reject {wf.id} --reason ...`): " + "; ".join(risk.get("reasons", []))
        )
        engine.reporter.info(message)
        notify.Notifier.from_config(engine.repo, engine.settings).notify("approval", wf, message)
        while time.time() < until:
            time.sleep(min(POLL_SECONDS, max(0.0, until - time.time())))
            approval = engine.store.latest_approval(wf.id)
            if approval is None or approval.status != "pending":
                break
        if approval is not None and approval.status == "pending":
            # A person deciding at the last moment wins: theirs is then the decision recorded.
            with contextlib.suppress(SupervisorError):
                engine.store.decide_approval(
                    approval.id, "approved", "no rejection within the timeout", approver="timeout"
                )
    return True  # the engine applies the decision as `resume` would (workflow/resuming.py)


# -- facts ---------------------------------------------------------------------------------


class Recorded(Protocol):
    """An event as the facts read it: committed (state.records.Event) or about to be
    (EventSpec, the current step's own)."""

    @property
    def type(self) -> str: ...
    @property
    def step(self) -> str | None: ...
    @property
    def role(self) -> str | None: ...
    @property
    def status(self) -> str | None: ...
    @property
    def payload(self) -> dict[str, Any] | None: ...


def gather(repo: Path, base: str, head: str, events: Sequence[Recorded]) -> Facts:
    files = changed(repo, base, head)
    concerns, issues = latest_reviews(events)
    return Facts(
        files=files,
        api_changes=api_changes(repo, base, head, files),
        fixed_gates=fixed_gates(events),
        security_concerns=concerns,
        review_issues=issues,
    )


def spec_facts(facts: Facts, spec: dict[str, Any] | None, tree: str) -> bool:
    """What the candidate did to the base's tests, as its last counted gate judged it (the
    base oracle, supervisor/gates/base_oracle.py): only a verdict on this very tree counts.
    False when there is none."""
    if not spec or spec.get("tree") != tree:
        return False
    if spec.get("base_tests") == "failed":
        facts.spec_changes = [str(c) for c in spec.get("changed") or []]
    facts.tamper_signals = [str(s) for s in spec.get("signals") or []]
    return True


def unjudged_spec(facts: Facts, git_dir: Path, base: str, candidate: str) -> None:
    """A candidate that changed the base's tests with no verdict of the base's tests on its
    tree (a workflow whose gates run no tests, or none after the change) is a change of the
    specification nobody checked: a person's decision all the same."""
    from supervisor.gates import base_tests

    found = base_tests.changes(git_dir, base, candidate)
    facts.spec_changes = [f"{c} (the base's tests were not run on it)" for c in found.describe()]


def _git(repo: Path, *args: str) -> str:
    return process.run(["git", *treedata.SAFE_CONFIG, "-C", str(repo), *args]).stdout


def changed(repo: Path, base: str, head: str) -> list[FileChange]:
    """Every file the candidate changes, with its +/- lines and whether it was deleted."""
    flags = ["--no-renames", "--no-ext-diff", "--no-textconv", "-z"]
    statuses: dict[str, str] = {}
    parts = _git(repo, "diff", "--name-status", *flags, base, head, "--").split("\0")
    for status, path in zip(parts[0::2], parts[1::2], strict=False):
        if path:
            statuses[path] = status[:1]
    counts: dict[str, tuple[int, int]] = {}
    for record in _git(repo, "diff", "--numstat", *flags, base, head, "--").split("\0"):
        fields = record.split("\t")
        if len(fields) == 3:
            added, deleted, path = fields
            counts[path] = (
                int(added) if added.isdigit() else 0,
                int(deleted) if deleted.isdigit() else 0,
            )
    return [
        FileChange(path, *counts.get(path, (0, 0)), status=statuses[path])
        for path in sorted(statuses)
    ]


def _blob(repo: Path, commit: str, path: str) -> str | None:
    try:
        text = _git(repo, "cat-file", "blob", f"{commit}:{path}")
    except SupervisorError:
        return None
    return text if len(text) <= MAX_PARSE_BYTES else None


def api_changes(repo: Path, base: str, head: str, files: list[FileChange]) -> list[str]:
    """Exported symbols the candidate removes or whose signature it changes."""
    found: list[str] = []
    for change in files:
        if change.status == "A":
            continue  # a new file removes nothing
        is_py = change.path.endswith(".py")
        if not is_py and not change.path.endswith(TS_SUFFIXES):
            continue
        before = _blob(repo, base, change.path)
        after = "" if change.status == "D" else _blob(repo, head, change.path)
        if before is None or after is None:
            continue
        found += [f"{change.path}: {line}" for line in api_diff(before, after, python=is_py)]
    return found


def api_diff(before: str, after: str, *, python: bool) -> list[str]:
    """What of `before`'s public API `after` removes or changes, one line each."""
    if not python:
        old, new = _ts_exports(before), set(_ts_exports(after))
        return [f"`{line}` removed or changed" for line in old if line not in new]
    old_api, new_api = python_api(before), python_api(after)
    if old_api is None or new_api is None:
        return [] if old_api is None else ["no longer parses as Python"]
    lines = []
    for symbol, signature in old_api.items():
        if symbol not in new_api:
            lines.append(f"{symbol}{signature} removed")
        elif new_api[symbol] != signature:
            lines.append(f"{symbol}{signature} -> {symbol}{new_api[symbol]}")
    return lines


def _ts_exports(text: str) -> list[str]:
    return [" ".join(line.split()) for line in text.splitlines() if line.startswith("export ")]


def python_api(text: str) -> dict[str, str] | None:
    """Module-level public names (or `__all__`) with their signatures; methods of public classes
    as `Class.method`. None when the text does not parse."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return None
    api: dict[str, str] = {}
    exported = _dunder_all(tree)
    for node in tree.body:
        for name, signature in _defined(node):
            if (exported is None and not name.startswith("_")) or (exported and name in exported):
                api[name] = signature
                if isinstance(node, ast.ClassDef):
                    for item in node.body:
                        for method, sig in _defined(item):
                            if not method.startswith("_") or method == "__init__":
                                api[f"{name}.{method}"] = sig
    return api


def _defined(node: ast.stmt) -> list[tuple[str, str]]:
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        returns = f" -> {ast.unparse(node.returns)}" if node.returns else ""
        return [(node.name, f"({ast.unparse(node.args)}){returns}")]
    if isinstance(node, ast.ClassDef):
        return [(node.name, "")]
    if isinstance(node, ast.Assign):
        return [(t.id, "") for t in node.targets if isinstance(t, ast.Name)]
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return [(node.target.id, "")]
    return []


def _dunder_all(tree: ast.Module) -> set[str] | None:
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)
            and isinstance(node.value, ast.List | ast.Tuple)
        ):
            return {
                e.value
                for e in node.value.elts
                if isinstance(e, ast.Constant) and isinstance(e.value, str)
            }
    return None


def fixed_gates(events: Sequence[Recorded]) -> list[str]:
    """Gates that failed at some point of the task and passed on their latest run."""
    last: dict[str, str] = {}
    failed: set[str] = set()
    for event in events:
        if event.type != "gate" or event.status not in ("passed", "failed"):
            continue
        gate = str((event.payload or {}).get("gate") or event.step)
        last[gate] = event.status
        if event.status == "failed":
            failed.add(gate)
    return sorted(g for g in failed if last.get(g) == "passed")


def security_concerns(events: Sequence[Recorded]) -> list[str]:
    """What the latest review round (after the latest implementation) lists as security
    concerns, per reviewer."""
    return latest_reviews(events)[0]


def latest_reviews(events: Sequence[Recorded]) -> tuple[list[str], list[str]]:
    """(security concerns, issues as `[severity] file: description`) of the latest review
    round (after the latest implementation), each prefixed with its reviewer: a review that
    approves while listing them is judged by the policy, not taken at its word."""
    latest: dict[str, dict[str, Any]] = {}
    for event in events:
        if event.type == "implementation" and event.status == "succeeded":
            latest = {}
        elif event.type == "review":
            output = (event.payload or {}).get("output")
            latest[str(event.role)] = output if isinstance(output, dict) else {}
    concerns, issues = [], []
    for role, output in latest.items():
        concerns += [f"{role}: {c}"[:200] for c in _listed(output.get("security_concerns"))]
        for issue in _listed(output.get("issues")):
            if isinstance(issue, dict):
                where = f"{issue.get('file')}: " if issue.get("file") else ""
                said = f"[{issue.get('severity', '?')}] {where}{issue.get('description', '')}"
                issues.append(f"{role}: {said}"[:200])
    return concerns, issues


def _listed(value: object) -> list[Any]:
    return value if isinstance(value, list) else []
