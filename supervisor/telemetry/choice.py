"""Whether telemetry is on, and what to export where: the `OTEL_*` variables and the user's
`telemetry:` block, merged.

The standard variables switch export on as they do for any OpenTelemetry program; the user's own
`telemetry:` block does too (a repository's is dropped before it is read,
supervisor/core/trust_records.py). The variables win over the block, as they would over a
program's code. No OpenTelemetry here: deciding that telemetry is off costs nothing.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Mapping

    from supervisor.core.settings import TelemetrySettings

EXPORTERS = ("otlp", "console", "none")
PROTOCOLS = ("http/protobuf",)
_ENDPOINTS = (
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
)


@dataclass(frozen=True)
class Chosen:
    """What to export and where: the settings and the variables, merged."""

    traces: str
    metrics: str
    endpoint: str | None = None
    """The block's base URL; None: the exporter reads the `OTEL_EXPORTER_OTLP_*` variables."""
    headers: dict[str, str] = field(default_factory=dict)
    protocol: str = "http/protobuf"
    service_name: str = "supervisor"
    resource_attributes: dict[str, str] = field(default_factory=dict)
    capture_content: bool = False
    timeout_s: float = 3.0


def chosen(
    settings: TelemetrySettings | None, env: Mapping[str, str] | None = None
) -> Chosen | None:
    """The export asked for, or None when telemetry is off (the default)."""
    env = os.environ if env is None else env
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    block = settings if settings is not None and settings.enabled else None
    endpoint_env = any(env.get(name) for name in _ENDPOINTS)
    traces = _exporter(
        env.get("OTEL_TRACES_EXPORTER"), block.traces if block else _sent(env, "TRACES")
    )
    metrics = _exporter(
        env.get("OTEL_METRICS_EXPORTER"), block.metrics if block else _sent(env, "METRICS")
    )
    if traces == metrics == "none":
        return None
    protocol = env.get("OTEL_EXPORTER_OTLP_PROTOCOL", "").strip() or "http/protobuf"
    if block is None:
        return Chosen(traces, metrics, protocol=protocol)
    return Chosen(
        traces,
        metrics,
        endpoint=None if endpoint_env else block.endpoint,
        headers=dict(block.headers),
        protocol=protocol,
        service_name=block.service_name,
        resource_attributes=dict(block.resource_attributes),
        capture_content=block.capture_content,
        timeout_s=block.timeout_seconds,
    )


def _sent(env: Mapping[str, str], signal: str) -> str:
    """`otlp` when an endpoint variable names where this signal goes, else `none`."""
    named = env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or env.get(
        f"OTEL_EXPORTER_OTLP_{signal}_ENDPOINT"
    )
    return "otlp" if named else "none"


def _exporter(named: str | None, otherwise: str) -> str:
    """The first exporter a variable names (`otlp,console` takes `otlp`), else `otherwise`."""
    first = (named or "").split(",")[0].strip().lower()
    return first if first in EXPORTERS else otherwise
