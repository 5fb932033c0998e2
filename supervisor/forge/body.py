"""The pull request's body, written from the task's state alone: what was asked, how deep it
went, every gate that ran and its result (the base oracle's too), the reviews and their
concerns, who approved what, what it cost, and where its events are.

Every text that a worker, an issue's author or a reviewing model wrote is untrusted: it is
shown inside a code block or code span (no markup, no HTML, no @mention, no link), never as the
body's own Markdown. The body holds no credential: the state never holds one.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pathlib import Path

    from supervisor.state.records import Event, Workflow

MARK = "<!-- supervisor:pull-request -->"
"""The body's first line: what `pr sync` and a person reading the raw body know it by."""
SHOWN = 30
"""Gate runs listed in full; older ones are counted."""


@dataclass
class Facts:
    """What the body says, read from the state by the lifecycle (pull_request.py)."""

    wf: Workflow
    sha: str
    events: list[Event]
    steps: list[dict[str, Any]]
    usage: dict[str, float]
    repo: Path
    dashboard_url: str | None = None
    issue: dict[str, Any] = field(default_factory=dict)


def title(wf: Workflow) -> str:
    """The first line of the task, short (GitHub shows a title as text, never as markup)."""
    first = next((line.strip() for line in wf.description.splitlines() if line.strip()), "")
    return (first[:69] + "...") if len(first) > 72 else first or f"supervisor task {wf.id}"


def render(facts: Facts) -> str:
    wf = facts.wf
    parts = [
        MARK,
        f"Task {wf.id} of the supervisor, branch `{wf.task_branch}` at `{facts.sha[:12]}` "
        "(the commit its gates passed).",
        "",
        "### Task",
        block(wf.description),
        *_issue(facts.issue),
        *_depth(wf.context),
        *_gates(facts.events),
        *_reviews(facts.steps),
        *_approvals(facts.events),
        "### Cost",
        f"{int(facts.usage.get('input_tokens', 0))} input / "
        f"{int(facts.usage.get('output_tokens', 0))} output tokens, "
        f"${float(facts.usage.get('cost_usd', 0.0)):.4f}",
        "",
        *_events_link(facts),
    ]
    return "\n".join(parts).rstrip() + "\n"


def block(text: str) -> str:
    """`text` as a fenced code block: shown, never rendered (a fence longer than any run of
    backticks in it)."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}text\n{text.rstrip()}\n{fence}"


def span(text: object) -> str:
    """One line of untrusted text as a code span."""
    line = " ".join(str(text).split())[:200]
    longest = max((len(m) for m in re.findall(r"`+", line)), default=0)
    ticks = "`" * (longest + 1)
    return f"{ticks} {line} {ticks}" if line else "(none)"


def _issue(issue: dict[str, Any]) -> list[str]:
    if not issue:
        return []
    who = span(issue.get("author", "?"))
    line = f"From issue #{issue.get('number')} by {who}"
    approved = "" if issue.get("author_can_write") else " (no write access: started after approval)"
    return [f"{line}{approved}.", ""]


def _depth(context: dict[str, Any]) -> list[str]:
    depth = context.get("depth") or {}
    plan = context.get("plan") or {}
    lines = ["### Depth and plan"]
    lines.append(f"Depth: {depth.get('path') or depth.get('asked') or 'fixed pipeline'}.")
    if plan:
        components = [c for p in plan.get("phases") or [] for c in p.get("components") or []]
        lines.append(f"Plan ({len(components)} component(s)):")
        lines.append(block(str(plan.get("summary") or "")))
    return [*lines, ""]


def _gates(events: list[Event]) -> list[str]:
    runs = [e for e in events if e.type in ("gate", "gate_reused", "base_oracle")]
    lines = ["### Gates", "| step | gate | result | on commit |", "|---|---|---|---|"]
    for e in runs[-SHOWN:]:
        what = (
            "base oracle (the base's tests on this code)"
            if e.type == "base_oracle"
            else span(e.payload.get("command") or e.payload.get("gate") or "")
        )
        result = f"{e.status}" + (" (reused)" if e.type == "gate_reused" else "")
        commit = str(e.payload.get("commit") or "")[:12]
        lines.append(f"| {span(e.step or '')} | {what} | {result} | {commit or '—'} |")
    if len(runs) > SHOWN:
        lines.append(f"({len(runs) - SHOWN} earlier run(s) not shown)")
    if not runs:
        lines = ["### Gates", "No gate ran (the task was started with --no-gate?)."]
    return [*lines, ""]


def _reviews(steps: list[dict[str, Any]]) -> list[str]:
    lines = ["### Reviews"]
    for row in steps:
        output = row.get("output")
        if not isinstance(output, dict) or "issues" not in output or not row.get("role"):
            continue
        lines.append(f"- {span(row['role'])} in {span(row['name'])}: {span(output.get('status'))}")
        for issue in output.get("issues") or []:
            if isinstance(issue, dict):
                where = issue.get("file") or ""
                said = f"[{issue.get('severity')}] {where} {issue.get('description')}"
                lines.append(f"  - {span(said)}")
    if len(lines) == 1:
        lines.append("No review ran.")
    return [*lines, ""]


def _approvals(events: list[Event]) -> list[str]:
    decided = [e for e in events if e.type == "approval_decided"]
    lines = ["### Approvals"]
    for e in decided:
        # an approval lists its approvers (one or several votes), a rejection its approver
        names = e.payload.get("approvers") or [e.payload.get("approver") or "(unknown)"]
        who = ", ".join(span(name) for name in names)
        lines.append(f"- {span(e.step or '')}: {e.status} by {who}")
    if not decided:
        lines.append("None asked for.")
    return [*lines, ""]


def _events_link(facts: Facts) -> list[str]:
    if not facts.dashboard_url:
        return [f"Events: `supervisor status {facts.wf.id}` in the repository."]
    # The dashboard's key of a repository (supervisor/web/board.py key_of), above this wing.
    key = hashlib.sha256(str(facts.repo).encode()).hexdigest()[:12]
    url = f"{facts.dashboard_url.rstrip('/')}/r/{key}/w/{facts.wf.id}"
    return [f"Events: [the task on the dashboard]({url})"]
