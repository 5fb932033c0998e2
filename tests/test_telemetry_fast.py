"""Telemetry: a scripted task's trace and metrics, as a team's collector receives them.

The real engine, SQLite, git and the claude adapter, with workers scripted by the stand-in
sandbox, which records each model exchange as the credential proxy does; the OTLP/HTTP exporter of
the official SDK sends to a receiver on 127.0.0.1 that decodes the protobuf with the official
opentelemetry-proto messages (tests/otlp_receiver.py).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest
import test_engine_fast
from otlp_receiver import Receiver, attributes
from test_engine_fast import Project, reviews, writes

from supervisor.core.config import load_settings
from supervisor.core.errors import ApprovalRequired
from supervisor.core.settings import TelemetrySettings
from supervisor.lifecycle import tasks
from supervisor.sandbox.standin import WorkerCall, answer, record
from supervisor.telemetry.choice import chosen

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path

project = test_engine_fast.project  # the stand-in project fixture
warm_packer = test_engine_fast.warm_packer

AWS_KEY = "AKIAZ4QW7RT2LMXN5PQK"
ANTHROPIC_KEY = "sk-ant-api03-Xq7vR2mN9pL4kT8wZ3yB6cD1fG5hJ0sA-abcdEFGH12345678xyz"
TASK = f"Write the answer file (the deploy key is {AWS_KEY})"
WORKFLOW = """implement
  steps:
    implement: {role: implementer, next: test}
    test: {gate: test, next: review}
    review: {role: reviewer, next: commit, on_reject: implement}
    commit: {action: commit}
"""
GATES = {"test": "grep -q right answer.txt && printf 'Ran 2 tests in 0.01s\\n\\nOK\\n'"}
OTEL = [
    "OTEL_TRACES_EXPORTER",
    "OTEL_METRICS_EXPORTER",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
    "OTEL_EXPORTER_OTLP_PROTOCOL",
    "OTEL_EXPORTER_OTLP_HEADERS",
    "OTEL_SERVICE_NAME",
    "OTEL_RESOURCE_ATTRIBUTES",
    "OTEL_SDK_DISABLED",
]


@pytest.fixture(autouse=True)
def no_otel(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each spec sets the variables it means: none leak in from the machine."""
    for name in OTEL:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with Receiver() as found:
        yield found


def implements_after_a_rate_limit(call: WorkerCall) -> str:
    """The implementer's CLI is answered 429 once, tries again and is answered (the proxy's
    record holds both); its answer's summary carries a planted key."""
    call.write("answer.txt", "right\n")
    reply = answer(
        {
            "status": "SUCCESS",
            "summary": f"wrote answer.txt; the key {ANTHROPIC_KEY} was in the task",
            "files_created": ["answer.txt"],
            "files_modified": [],
            "tests_written": [],
            "blockers": [],
        }
    )
    record(call, "rate limited", status=429, headers={"retry-after": "7"})
    record(call, json.loads(reply.splitlines()[-1])["result"])
    return reply


def user_config(root: Path, block: str) -> None:
    """The user's own ~/.supervisor/config.yaml (SUPERVISOR_USER_DIR, the api_keys fixture)."""
    user = root.parent / "user"
    user.mkdir(exist_ok=True)
    (user / "config.yaml").write_text(block)


def scripted(project: Callable[..., Project]) -> Project:
    return project(
        WORKFLOW,
        GATES,
        ("ROLE: implementer", implements_after_a_rate_limit),
        ("ROLE: reviewer", reviews("APPROVED")),
    )


def seq(span: Any) -> int:
    return int(attributes(span.attributes)["supervisor.request.seq"])


def by_name(spans: list[Any]) -> dict[str, Any]:
    return {span.name: span for span in spans}


def test_a_task_sends_one_trace_with_its_steps_gate_model_requests_and_metrics(
    project: Callable[..., Project], receiver: Receiver
) -> None:
    p = scripted(project)
    user_config(
        p.root,
        f"telemetry:\n  enabled: true\n  endpoint: {receiver.url}\n"
        "  headers: {x-team: blue}\n  resource_attributes: {deployment.environment: ci}\n",
    )
    wf = tasks.start_task(TASK, p.root)
    assert wf.status == "completed"

    spans = receiver.spans()
    assert len({span.trace_id for span in spans}) == 1  # one trace for the task
    named = by_name(spans)
    run = named["invoke_workflow"]
    assert run.parent_span_id == b""
    assert attributes(run.attributes)["supervisor.workflow.status"] == "completed"

    agent = named["invoke_agent implementer"]
    assert agent.parent_span_id == run.span_id
    seen = attributes(agent.attributes)
    [implemented] = p.events("implementation")
    assert implemented.payload["witnessed"] is True  # the tokens are the proxy's record's
    assert seen["gen_ai.operation.name"] == "invoke_agent"
    assert seen["gen_ai.agent.name"] == "implementer"
    assert seen["gen_ai.provider.name"] == "anthropic"
    assert seen["gen_ai.usage.input_tokens"] == implemented.input_tokens
    assert seen["gen_ai.usage.output_tokens"] == implemented.output_tokens
    assert seen["supervisor.cost.usd"] == implemented.cost_usd
    assert agent.start_time_unix_nano < agent.end_time_unix_nano

    requests = [
        s for s in spans if s.name.startswith("chat ") and s.parent_span_id == agent.span_id
    ]
    limited, answered = sorted(
        requests, key=lambda s: attributes(s.attributes)["supervisor.request.seq"]
    )
    assert attributes(limited.attributes)["http.response.status_code"] == 429
    assert attributes(limited.attributes)["error.type"] == "rate_limited"
    assert attributes(limited.attributes)["supervisor.rate_limit.reset_s"] > 0
    assert attributes(answered.attributes)["http.response.status_code"] == 200
    assert attributes(answered.attributes)["supervisor.request.retry"] is True

    gate = attributes(named["gate test"].attributes)
    assert gate["supervisor.gate.command"] == GATES["test"]
    assert gate["supervisor.gate.exit_code"] == 0
    assert gate["supervisor.gate.tests"] == 2
    assert gate["supervisor.gate.passed"] is True
    assert "invoke_agent reviewer" in named

    metrics = receiver.metrics()
    assert {"supervisor.step.duration", "gen_ai.client.token.usage", "supervisor.gate.runs",
            "supervisor.cost"} <= set(metrics)  # fmt: skip
    gate_runs = metrics["supervisor.gate.runs"].sum.data_points
    assert [attributes(d.attributes)["supervisor.gate.passed"] for d in gate_runs] == [True]
    tokens = metrics["gen_ai.client.token.usage"].histogram.data_points
    counted = {
        (
            attributes(d.attributes)["gen_ai.agent.name"],
            attributes(d.attributes)["gen_ai.token.type"],
        ): d.sum
        for d in tokens
    }
    assert counted[("implementer", "input")] == implemented.input_tokens

    assert all(h.get("X-Team") == "blue" or h.get("x-team") == "blue" for h in receiver.headers())
    assert receiver.resources()[0]["deployment.environment"] == "ci"
    assert receiver.resources()[0]["service.name"] == "supervisor"
    [sent] = p.events("telemetry_exported")
    assert sent.payload["trace_id"] == run.trace_id.hex()


def test_a_planted_secret_never_leaves_and_captured_content_is_redacted(
    project: Callable[..., Project], receiver: Receiver
) -> None:
    p = scripted(project)
    user_config(
        p.root,
        f"telemetry:\n  enabled: true\n  endpoint: {receiver.url}\n  capture_content: true\n",
    )
    assert tasks.start_task(TASK, p.root).status == "completed"

    sent = b"".join(r.SerializeToString() for rs in receiver.received.values() for _, r in rs)
    assert sent and AWS_KEY.encode() not in sent and ANTHROPIC_KEY.encode() not in sent
    named = by_name(receiver.spans())
    described = attributes(named["invoke_workflow"].attributes)["supervisor.task.description"]
    assert "[REDACTED:aws_access_key_id]" in described
    said = attributes(named["invoke_agent implementer"].attributes)["gen_ai.output.messages"]
    assert "[REDACTED:anthropic_key]" in said and "wrote answer.txt" in said


def test_without_content_capture_no_text_of_the_task_or_the_answers_is_sent(
    project: Callable[..., Project], receiver: Receiver
) -> None:
    p = scripted(project)
    user_config(p.root, f"telemetry:\n  enabled: true\n  endpoint: {receiver.url}\n")
    tasks.start_task(TASK, p.root)

    sent = b"".join(r.SerializeToString() for rs in receiver.received.values() for _, r in rs)
    assert b"Write the answer file" not in sent and b"wrote answer.txt" not in sent
    assert b"REDACTED" not in sent  # nothing of the text went out, not even redacted


def test_a_resumed_run_continues_the_trace_linked_to_the_run_that_waited_for_approval(
    project: Callable[..., Project], receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url)  # the variables alone
    monkeypatch.setenv("OTEL_SERVICE_NAME", "team-supervisor")
    p = project(  # a change to auth/ waits for a person's approval before its commit
        "implement\n  steps:\n    implement: {role: implementer, next: commit}\n"
        "    commit: {action: commit}\n",
        None,
        ("ROLE: implementer", writes({"auth/login.py": "def login(user):\n    return False\n"})),
    )
    with pytest.raises(ApprovalRequired):
        tasks.start_task(TASK, p.root)
    first = receiver.spans()
    [waited] = [s for s in first if s.name == "invoke_workflow"]
    assert attributes(waited.attributes)["supervisor.workflow.status"] == "awaiting_approval"

    tasks.decide(1, p.root, approve=True, approver="ana@example.com")
    assert p.resume().status == "completed"

    later = receiver.spans()[len(first) :]
    [resumed] = [s for s in later if s.name == "invoke_workflow"]
    assert resumed.trace_id == waited.trace_id  # the same trace
    assert [link.span_id for link in resumed.links] == [waited.span_id]
    assert attributes(resumed.attributes)["supervisor.run.number"] == 2
    [approval] = [s for s in later if s.name.startswith("approval ")]
    assert attributes(approval.attributes)["supervisor.approval.decided_by"] == "ana@example.com"
    assert approval.parent_span_id == waited.span_id  # asked for in the run that waited
    assert not [s for s in later if s.name == "invoke_agent implementer"]  # sent once, before
    assert receiver.resources()[-1]["service.name"] == "team-supervisor"


def test_console_exporter_prints_the_spans(
    project: Callable[..., Project],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "console")
    p = scripted(project)
    tasks.start_task(TASK, p.root)

    printed = capsys.readouterr().out
    assert '"name": "invoke_workflow"' in printed
    assert '"name": "invoke_agent implementer"' in printed
    assert '"gen_ai.usage.input_tokens"' in printed
    assert AWS_KEY not in printed and ANTHROPIC_KEY not in printed


def test_an_unreachable_collector_costs_the_task_one_event_not_its_run(
    project: Callable[..., Project],
) -> None:
    p = scripted(project)
    user_config(p.root, "telemetry:\n  enabled: true\n  endpoint: http://127.0.0.1:9\n"
                "  timeout_seconds: 1\n")  # fmt: skip
    assert tasks.start_task(TASK, p.root).status == "completed"

    [failed] = p.events("telemetry_failed")
    assert "traces not sent" in failed.payload["error"]
    assert "OTEL_EXPORTER_OTLP_ENDPOINT" in failed.payload["hint"]
    assert not p.events("telemetry_exported")


def test_a_repository_cannot_turn_export_on_or_point_it_elsewhere(
    project: Callable[..., Project], receiver: Receiver
) -> None:
    p = scripted(project)
    config = p.root / ".supervisor" / "config.yaml"
    config.write_text(
        config.read_text() + f"telemetry:\n  enabled: true\n  endpoint: {receiver.url}\n"
    )
    assert load_settings(p.root).telemetry.enabled is False
    assert tasks.start_task(TASK, p.root).status == "completed"
    assert receiver.spans() == [] and receiver.metrics() == {}
    assert not p.events("telemetry_exported") and not p.events("telemetry_failed")


def test_off_by_default_and_the_standard_variables_switch_it_on() -> None:
    assert chosen(TelemetrySettings(), {}) is None
    assert chosen(None, {"OTEL_TRACES_EXPORTER": "none"}) is None
    on = chosen(None, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"})
    assert on is not None and (on.traces, on.metrics) == ("otlp", "otlp")
    console = chosen(None, {"OTEL_TRACES_EXPORTER": "console"})
    assert console is not None and (console.traces, console.metrics) == ("console", "none")
    block = TelemetrySettings(enabled=True, endpoint="http://mine:4318", metrics="none")
    configured = chosen(block, {})
    assert configured is not None and configured.endpoint == "http://mine:4318"
    assert chosen(block, {"OTEL_SDK_DISABLED": "true"}) is None
    assert chosen(block, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://env:4318"}).endpoint is None  # type: ignore[union-attr]
    only_traces = chosen(None, {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"})
    assert only_traces is not None and (only_traces.traces, only_traces.metrics) == ("otlp", "none")
