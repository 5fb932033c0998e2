"""The spans of one run of a task, planned from its state: pure, so the shape is tested without
an exporter, and the same state always gives the same trace.

One trace per task: its id is derived from the task (id, base commit, creation time), so every
run of it, resumed on any host, lands in the same trace. Each run is an `invoke_workflow` span
linked to the run it continues; under it a span per step attempt (`invoke_agent <role>` for a
worker, `gate <step>` for a gate, `approval <step>` for a person's decision, `step <name>` for the
rest) and, under a worker's, a `chat <model>` span per model request the proxy relayed.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from supervisor.telemetry import attributes as a
from supervisor.telemetry.reading import MARK

if TYPE_CHECKING:
    from supervisor.state.store import Event, Workflow
    from supervisor.telemetry.reading import Snapshot

SLACK = timedelta(seconds=5)
"""A step's event and worker row are written as it finishes, a moment after its row's end."""
WAIT_KINDS = {"wait_and_retry", "wait"}


@dataclass
class Planned:
    """One span to send: its times, attributes and place in the trace (by key)."""

    key: str
    name: str
    start: datetime
    end: datetime
    attributes: a.Attributes
    parent: str | None = None
    links: list[str] = field(default_factory=list)
    error: str | None = None
    """`error.type` when the span's work failed (the span's status is then ERROR)."""


@dataclass
class Plan:
    run: Planned
    spans: list[Planned]
    steps: list[int]
    approvals: list[int]
    last_event: int


def trace_id(wf: Workflow) -> int:
    """The task's trace: the same for every run of it, on every host."""
    seed = f"{wf.id}:{wf.base_sha}:{wf.created_at.isoformat()}"
    return int(hashlib.sha256(seed.encode()).hexdigest()[:32], 16) or 1


def span_id(trace: int, key: str) -> int:
    return int(hashlib.sha256(f"{trace:032x}:{key}".encode()).hexdigest()[:16], 16) or 1


def plan(snap: Snapshot, now: datetime, capture: bool = False) -> Plan:
    """The spans of the run that just ended: everything finished that no export sent yet."""
    wf, sent = snap.wf, snap.sent
    number = sent.runs + 1
    run_key = f"run:{number}"
    previous = f"run:{sent.runs}" if sent.runs else None
    steps = [s for s in snap.steps if s["finished_at"] is not None and s["id"] not in sent.steps]
    events = [e for e in snap.events if e.id > sent.last_event and e.type != MARK]
    spans: list[Planned] = []
    for step in steps:
        spans += step_spans(step, snap, run_key, capture)
    decided = [x for x in snap.approvals if x["decided_at"] and x["id"] not in sent.approvals]
    for approval in decided:
        spans.append(approval_span(approval, snap.events, previous or run_key))
    spans += wait_spans(events, run_key)
    times = [s.start for s in spans if s.parent == run_key] + [e.timestamp for e in events]
    start = min(times, default=_naive(now))
    run = Planned(
        run_key,
        "invoke_workflow",
        start,
        max([_naive(now), *(s.end for s in spans if s.parent == run_key)]),
        run_attributes(wf, number, events, capture),
        links=[previous] if previous else [],
        error="workflow_failed" if wf.status == "failed" else None,
    )
    return Plan(
        run,
        spans,
        [s["id"] for s in steps],
        [x["id"] for x in decided],
        max((e.id for e in snap.events), default=0),
    )


def run_attributes(wf: Workflow, number: int, events: list[Event], capture: bool) -> a.Attributes:
    found = a.bounded(
        {
            "gen_ai.operation.name": "invoke_workflow",
            "gen_ai.conversation.id": f"task-{wf.id}",
            "supervisor.workflow.id": wf.id,
            "supervisor.workflow.status": wf.status,
            "supervisor.workflow.step": wf.current_step,
            "supervisor.cli": wf.cli,
            "supervisor.run.number": number,
            "supervisor.run.resumed": number > 1,
            "supervisor.retries": sum(1 for e in events if e.type in ("retry", "retry_scheduled")),
        }
    )
    if capture:
        found["supervisor.task.description"] = a.safe_text(wf.description)
    return found


def step_spans(
    step: dict[str, Any], snap: Snapshot, run_key: str, capture: bool = False
) -> list[Planned]:
    """The span of one step attempt and, for a worker, one per model request it made."""
    key = f"step:{step['id']}"
    event = _step_event(step, snap.events)
    common = {
        "supervisor.step.name": step["name"],
        "supervisor.step.attempt": step["attempt"],
        "supervisor.step.status": step["status"],
    }
    failed = step["status"] not in ("succeeded", "running")
    error = step["status"] if failed else None
    if event is not None and event.type == "gate":
        attrs = {**common, **_gate(event)}
        return [Planned(key, f"gate {step['name']}", step["started_at"], step["finished_at"],
                        a.bounded(attrs), run_key, error=error)]  # fmt: skip
    if step["role"] is None:
        return [Planned(key, f"step {step['name']}", step["started_at"], step["finished_at"],
                        a.bounded(common), run_key, error=error)]  # fmt: skip
    invocation = _invocation(step, snap.invocations)
    attrs = {**common, **agent_attributes(step, event, invocation, snap.wf.cli)}
    span = Planned(key, f"invoke_agent {step['role']}", step["started_at"], step["finished_at"],
                   a.bounded(attrs), run_key, error=error)  # fmt: skip
    if capture and event is not None:
        span.attributes.update(_content(event))
    requests = (event.payload.get("requests") if event is not None else None) or []
    return [span, *request_spans(key, attrs, requests)]


def agent_attributes(
    step: dict[str, Any], event: Event | None, invocation: dict[str, Any] | None, cli: str
) -> dict[str, Any]:
    """GenAI's agent attributes from the proxy's record (the event's tokens and cost are the
    witnessed ones, supervisor/workflow/steps/witnessing.py) and the worker's row."""
    run = invocation or {}
    used = run.get("cli") or cli
    found: dict[str, Any] = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": step["role"],
        "gen_ai.provider.name": a.PROVIDERS.get(used, used),
        "gen_ai.request.model": run.get("model") or None,
        "supervisor.cli": used,
        "supervisor.step.retries": run.get("retries"),
        "supervisor.error.category": run.get("error_category"),
    }
    if event is not None:
        found["gen_ai.usage.input_tokens"] = event.input_tokens
        found["gen_ai.usage.output_tokens"] = event.output_tokens
        found["supervisor.cost.usd"] = event.cost_usd
        found["supervisor.witnessed"] = event.payload.get("witnessed")
        found["supervisor.worker.exit_code"] = a.number(event.payload.get("exit_code"))
        found["supervisor.answer.kind"] = event.type
    elif invocation is not None:
        found["gen_ai.usage.input_tokens"] = run.get("input_tokens")
        found["gen_ai.usage.output_tokens"] = run.get("output_tokens")
        found["supervisor.cost.usd"] = run.get("cost_usd")
    return found


def request_spans(parent: str, agent: dict[str, Any], requests: list[Any]) -> list[Planned]:
    """One `chat` span per model request the proxy relayed: status, latency, retries, reset."""
    spans: list[Planned] = []
    failed_before = 0
    for request in requests:
        if not isinstance(request, dict):
            continue
        started, ended = a.number(request.get("started")), a.number(request.get("ended"))
        if not started:
            continue
        status = a.number(request.get("status"))
        model = request.get("model") or agent.get("gen_ai.request.model")
        attrs = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": agent.get("gen_ai.provider.name"),
            "gen_ai.request.model": agent.get("gen_ai.request.model") or model,
            "gen_ai.response.model": request.get("model"),
            "gen_ai.usage.input_tokens": a.number(request.get("input_tokens")),
            "gen_ai.usage.output_tokens": a.number(request.get("output_tokens")),
            "http.response.status_code": status,
            "supervisor.request.seq": a.number(request.get("seq")),
            "supervisor.request.retry": failed_before > 0,
            "supervisor.rate_limit.reset_s": a.number(request.get("reset_after_s")),
        }
        start = _time(started)
        end = _time(ended) if ended and ended >= started else start
        error = None if status == 200 else ("rate_limited" if status == 429 else f"{status}")
        spans.append(Planned(f"{parent}:request:{request.get('seq')}",
                             f"chat {model or 'model'}", start, end, a.bounded(attrs), parent,
                             error=error))  # fmt: skip
        failed_before += status != 200
    return spans


def _content(event: Event) -> a.Attributes:
    """The worker's answer, redacted and clipped: sent only when the user's config asks."""
    output = event.payload.get("output")
    summary = output.get("summary") if isinstance(output, dict) else None
    text = summary if isinstance(summary, str) else event.payload.get("error")
    if not isinstance(text, str) or not text:
        return {}
    message = {"role": "assistant", "parts": [{"type": "text", "content": a.safe_text(text)}]}
    return {"gen_ai.output.messages": json.dumps([message])}


def approval_span(approval: dict[str, Any], events: list[Event], parent: str) -> Planned:
    """A person's decision: from the request to the decision, with who decided."""
    decided = [e for e in events if e.type == "approval_decided" and e.step == approval["step"]]
    who = decided[-1].payload if decided else {}
    approvers = who.get("approvers") or ([who["approver"]] if who.get("approver") else [])
    attrs = {
        "supervisor.step.name": approval["step"],
        "supervisor.approval.status": approval["status"],
        "supervisor.approval.decided_by": ", ".join(str(x) for x in approvers) or None,
    }
    return Planned(f"approval:{approval['id']}", f"approval {approval['step']}",
                   approval["requested_at"], approval["decided_at"], a.bounded(attrs), parent,
                   error="rejected" if approval["status"] == "rejected" else None)  # fmt: skip


def wait_spans(events: list[Event], run_key: str) -> list[Planned]:
    """Rate-limit waits: from the retry that waits to the limit's end (or its planned delay)."""
    spans: list[Planned] = []
    for event in events:
        if event.type != "retry_scheduled" or event.payload.get("category") != "rate_limited":
            continue
        delay = a.number(event.payload.get("delay_s")) or 0
        over = next((e for e in events if e.type == "rate_limit_over" and e.id > event.id), None)
        end = over.timestamp if over else event.timestamp + timedelta(seconds=delay)
        attrs = {"supervisor.step.name": event.step, "supervisor.rate_limit.delay_s": delay}
        spans.append(Planned(f"wait:{event.id}", f"rate_limit_wait {event.step}",
                             event.timestamp, end, a.bounded(attrs), run_key))  # fmt: skip
    return spans


def _gate(event: Event) -> dict[str, Any]:
    payload = event.payload
    return {
        "supervisor.gate.command": payload.get("command"),
        "supervisor.gate.exit_code": a.number(payload.get("exit_code")),
        "supervisor.gate.passed": event.status == "passed",
        "supervisor.gate.tests": a.number(payload.get("tests")),
        "supervisor.gate.base_tests": a.number(payload.get("base_tests")),
        "supervisor.gate.reused": False,
    }


def _step_event(step: dict[str, Any], events: list[Event]) -> Event | None:
    """The event the step's end wrote: a worker's answer or failure, or a gate's result."""
    found = None
    for event in events:
        if event.step != step["name"] or not _within(event.timestamp, step):
            continue
        if event.type == "gate" or (step["role"] and event.role == step["role"] and
                                    "witnessed" in event.payload):  # fmt: skip
            found = event
    return found


def _invocation(step: dict[str, Any], rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    found = None
    for row in rows:
        same = row["step"] == step["name"] and row["role"] == step["role"]
        if same and _within(row["timestamp"], step):
            found = row
    return found


def _within(when: datetime, step: dict[str, Any]) -> bool:
    return bool(step["started_at"] <= when <= step["finished_at"] + SLACK)


def _time(epoch: float) -> datetime:
    return datetime.fromtimestamp(epoch, UTC).replace(tzinfo=None)


def _naive(moment: datetime) -> datetime:
    return moment.astimezone(UTC).replace(tzinfo=None) if moment.tzinfo else moment
