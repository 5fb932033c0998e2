"""A run's metrics, counted from its planned spans: step duration, tokens and cost per role,
CLI and model, gate runs by result (the pass rate), retries and rate-limit waits.

Why from the spans: they already hold what the proxy witnessed, matched to each step, so the
metrics and the traces cannot disagree. Each export reports what its run added (delta
temporality): a collector sums them, whichever host ran which part of the task.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from opentelemetry.sdk.metrics import Counter, Histogram, MeterProvider, UpDownCounter
from opentelemetry.sdk.metrics.export import AggregationTemporality, InMemoryMetricReader

if TYPE_CHECKING:
    from opentelemetry.sdk.metrics.export import MetricsData
    from opentelemetry.sdk.resources import Resource

    from supervisor.telemetry.spans import Plan, Planned

DELTA: dict[type, AggregationTemporality] = {
    Counter: AggregationTemporality.DELTA,
    UpDownCounter: AggregationTemporality.CUMULATIVE,
    Histogram: AggregationTemporality.DELTA,
}
_LABELS = ("gen_ai.agent.name", "supervisor.cli", "gen_ai.request.model", "gen_ai.provider.name")


def collect(plan: Plan, resource: Resource) -> MetricsData | None:
    reader = InMemoryMetricReader(preferred_temporality=DELTA)
    provider = MeterProvider(resource=resource, metric_readers=[reader])
    meter = provider.get_meter("supervisor.telemetry")
    duration = meter.create_histogram(
        "supervisor.step.duration", unit="s", description="How long each step attempt took"
    )
    tokens = meter.create_histogram(
        "gen_ai.client.token.usage", unit="{token}", description="Tokens the proxy witnessed"
    )
    cost = meter.create_counter("supervisor.cost", unit="USD", description="What workers cost")
    gates = meter.create_counter("supervisor.gate.runs", description="Gate runs by result")
    retries = meter.create_counter("supervisor.retries", description="Steps tried again")
    waits = meter.create_histogram(
        "supervisor.rate_limit.wait", unit="s", description="Waits for a rate limit's reset"
    )
    for span in plan.spans:
        attrs = span.attributes
        seconds = max((span.end - span.start).total_seconds(), 0.0)
        if span.name.startswith("invoke_agent "):
            labels = _labels(attrs, span)
            duration.record(seconds, {**labels, "supervisor.step.kind": "agent"})
            for kind in ("input", "output"):
                count = attrs.get(f"gen_ai.usage.{kind}_tokens")
                if isinstance(count, int):
                    tokens.record(count, {**labels, "gen_ai.token.type": kind,
                                          "gen_ai.operation.name": "invoke_agent"})  # fmt: skip
            spent = attrs.get("supervisor.cost.usd")
            if isinstance(spent, (int, float)) and spent > 0:
                cost.add(spent, labels)
        elif span.name.startswith("gate "):
            status: dict[str, str | bool] = {
                "supervisor.gate.passed": bool(attrs.get("supervisor.gate.passed")),
                "supervisor.step.name": str(attrs.get("supervisor.step.name", "")),
            }
            gates.add(1, status)
            duration.record(seconds, {"supervisor.step.kind": "gate", **status})
        elif span.name.startswith("rate_limit_wait "):
            waits.record(seconds, {"supervisor.step.name": str(attrs.get("supervisor.step.name"))})
    count = plan.run.attributes.get("supervisor.retries")
    if isinstance(count, int) and count:
        retries.add(count)
    data = reader.get_metrics_data()
    provider.shutdown()
    return data


def _labels(attrs: dict[str, Any], span: Planned) -> dict[str, str]:
    found = {key: str(attrs[key]) for key in _LABELS if attrs.get(key) is not None}
    found["supervisor.step.status"] = "failed" if span.error else "succeeded"
    return found
