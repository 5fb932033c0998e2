"""One run of a task sent to the team's tools: the planned spans (supervisor/telemetry/spans.py)
made into OpenTelemetry spans with the official SDK, its metrics (metrics.py), and both handed
to the exporter the user chose (OTLP over HTTP, or the console) in one request each.

Why the SDK is driven by hand: the spans are made after the run, with the times the state
recorded and ids derived from the task, so a resumed run joins its trace; they are collected in
memory and exported at once, with the configured timeout, so a collector that is down costs the
task at most that timeout and one `telemetry_failed` event, never its run.
"""

from __future__ import annotations

import logging
import sys
import threading
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from opentelemetry.sdk.metrics.export import MetricExportResult
from opentelemetry.sdk.resources import OTELResourceDetector, Resource
from opentelemetry.sdk.trace import SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.id_generator import IdGenerator
from opentelemetry.trace import (
    Link,
    NonRecordingSpan,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    TraceFlags,
    set_span_in_context,
)

from supervisor.state.store import EventSpec
from supervisor.telemetry import attributes, metrics, reading, spans
from supervisor.telemetry.choice import PROTOCOLS

if TYPE_CHECKING:
    from opentelemetry.sdk.metrics.export import MetricExporter
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.sdk.trace.export import SpanExporter

    from supervisor.state.store import Store
    from supervisor.telemetry.choice import Chosen

log = logging.getLogger(__name__)
SAMPLED = TraceFlags(TraceFlags.SAMPLED)
HINT = (
    "Check that the collector listens at the OTLP/HTTP endpoint (OTEL_EXPORTER_OTLP_ENDPOINT or "
    "`telemetry.endpoint` in ~/.supervisor/config.yaml, usually port 4318); the spans not sent "
    "go with the task's next run."
)


class _Chosen(IdGenerator):
    """Ids decided by the caller: the task's trace, and each span's id derived from its key."""

    def __init__(self, trace: int) -> None:
        self.trace = trace
        self.next_span = 1

    def generate_span_id(self) -> int:
        return self.next_span

    def generate_trace_id(self) -> int:
        return self.trace


_LOCK = threading.Lock()  # one export at a time: the id generator is shared state


def export_run(store: Store, wf_id: int, asked: Chosen) -> None:
    """Send the spans and metrics of the run of task `wf_id` that just ended, and mark them sent."""
    snap = reading.snapshot(store, wf_id)
    if asked.protocol not in PROTOCOLS:
        _failed(store, wf_id, snap.sent, f"OTLP protocol {asked.protocol!r} is not supported "
                "(set OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf)")  # fmt: skip
        return
    planned = spans.plan(snap, datetime.now(UTC), asked.capture_content)
    resource = _resource(asked)
    problems: list[str] = []
    with _LOCK:
        if asked.traces != "none":
            made = _spans(planned, spans.trace_id(snap.wf), resource)
            problems += _send_spans(_span_exporter(asked), made)
        if asked.metrics != "none":
            data = metrics.collect(planned, resource)
            problems += _send_metrics(_metric_exporter(asked), data, asked.timeout_s)
    if problems:
        _failed(store, wf_id, snap.sent, "; ".join(problems))
        return
    payload = {
        "run": snap.sent.runs + 1,
        "trace_id": f"{spans.trace_id(snap.wf):032x}",
        "spans": len(planned.spans) + 1,
        "steps": planned.steps,
        "approvals": planned.approvals,
        "last_event": planned.last_event,
    }
    store.add_event(wf_id, EventSpec(reading.MARK, status="sent", payload=payload))


def _resource(asked: Chosen) -> Resource:
    """The block's service name and attributes, under `OTEL_SERVICE_NAME` and
    `OTEL_RESOURCE_ATTRIBUTES` (the variables win, as they do for any SDK)."""
    given = {"service.name": asked.service_name, **asked.resource_attributes}
    return Resource.create(given).merge(OTELResourceDetector().detect())


def _spans(plan: spans.Plan, trace: int, resource: Resource) -> list[ReadableSpan]:
    """The planned spans as the SDK's, with the task's trace id and their derived span ids."""
    ids = _Chosen(trace)
    kept = InMemorySpanExporter()
    provider = TracerProvider(
        resource=resource,
        id_generator=ids,
        span_limits=SpanLimits(max_attributes=64, max_attribute_length=attributes.MAX_TEXT),
    )
    provider.add_span_processor(SimpleSpanProcessor(kept))
    tracer = provider.get_tracer("supervisor.telemetry")
    for planned in [plan.run, *plan.spans]:
        ids.next_span = spans.span_id(trace, planned.key)
        context = None
        if planned.parent is not None:
            parent = SpanContext(trace, spans.span_id(trace, planned.parent), False, SAMPLED)
            context = set_span_in_context(NonRecordingSpan(parent))
        links = [
            Link(SpanContext(trace, spans.span_id(trace, key), True, SAMPLED))
            for key in planned.links
        ]
        kind = SpanKind.CLIENT if planned.name.startswith("chat ") else SpanKind.INTERNAL
        span = tracer.start_span(
            planned.name,
            context=context,
            kind=kind,
            attributes=planned.attributes,
            links=links,
            start_time=_ns(planned.start),
        )
        if planned.error is not None:
            span.set_attribute("error.type", planned.error)
            span.set_status(Status(StatusCode.ERROR))
        span.end(end_time=max(_ns(planned.end), _ns(planned.start)))
    provider.shutdown()
    return list(kept.get_finished_spans())


def _span_exporter(asked: Chosen) -> SpanExporter:
    if asked.traces == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter(out=sys.stdout)  # the stdout of now, not of import time
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter(**_otlp(asked, "traces"))


def _metric_exporter(asked: Chosen) -> MetricExporter:
    if asked.metrics == "console":
        from opentelemetry.sdk.metrics.export import ConsoleMetricExporter

        return ConsoleMetricExporter(out=sys.stdout, preferred_temporality=metrics.DELTA)
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter

    return OTLPMetricExporter(**_otlp(asked, "metrics"), preferred_temporality=metrics.DELTA)


def _otlp(asked: Chosen, signal: str) -> dict[str, Any]:
    """The block's endpoint and headers; without them the exporter reads `OTEL_EXPORTER_OTLP_*`."""
    found: dict[str, Any] = {"timeout": asked.timeout_s}
    if asked.endpoint:
        found["endpoint"] = f"{asked.endpoint.rstrip('/')}/v1/{signal}"
    if asked.headers:
        found["headers"] = dict(asked.headers)
    return found


def _send_spans(exporter: SpanExporter, made: list[ReadableSpan]) -> list[str]:
    try:
        result = exporter.export(made)
    except Exception as e:  # the exporter's own errors: said, never raised
        return [f"traces not sent: {e}"]
    finally:
        exporter.shutdown()
    return [] if result == SpanExportResult.SUCCESS else ["traces not sent (the exporter failed)"]


def _send_metrics(exporter: MetricExporter, data: Any, timeout_s: float) -> list[str]:
    if data is None:
        return []
    try:
        result = exporter.export(data, timeout_millis=timeout_s * 1000)
    except Exception as e:
        return [f"metrics not sent: {e}"]
    finally:
        exporter.shutdown()
    ok = result == MetricExportResult.SUCCESS
    return [] if ok else ["metrics not sent (the exporter failed)"]


def _failed(store: Store, wf_id: int, sent: reading.Sent, why: str) -> None:
    """Logged each time, recorded once per task: a collector that is down is one note."""
    log.warning("telemetry of workflow %s: %s", wf_id, why)
    if sent.failures == 0:
        payload = {"error": why[:1000], "hint": HINT}
        store.add_event(wf_id, EventSpec(reading.FAILED, status="failed", payload=payload))


def _ns(moment: datetime) -> int:
    aware = moment if moment.tzinfo else moment.replace(tzinfo=UTC)
    return int(aware.timestamp() * 1_000_000_000)
