"""Whether telemetry is on, and the one call the lifecycle makes when a run of the engine ends.

Why apart from the exporter: this module imports no OpenTelemetry, so with telemetry off (the
default) a run pays for reading a few environment variables and nothing else, and the commands
that never export (`status`, `events`) do not even import it. The standard `OTEL_*` variables
switch export on as they do for any OpenTelemetry program; the user's own `telemetry:` block does
too (a repository's is dropped before it is read, supervisor/core/trust_records.py). The
variables win over the block, as they would over a program's code.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Mapping

    from supervisor.core.settings import TelemetrySettings
    from supervisor.state.store import Store

log = logging.getLogger(__name__)

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
    fallback = "otlp" if endpoint_env or block is not None else "none"
    traces = _exporter(env.get("OTEL_TRACES_EXPORTER"), block.traces if block else fallback)
    metrics = _exporter(env.get("OTEL_METRICS_EXPORTER"), block.metrics if block else fallback)
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


def _exporter(named: str | None, otherwise: str) -> str:
    """The first exporter a variable names (`otlp,console` takes `otlp`), else `otherwise`."""
    first = (named or "").split(",")[0].strip().lower()
    return first if first in EXPORTERS else otherwise


def after_run(
    store: Store, wf_id: int, settings: TelemetrySettings | None, *, unless_running: bool = False
) -> None:
    """Export what the run of task `wf_id` that just ended did, when telemetry is on. Never
    raises and never waits past the configured timeout: a collector that is down or refuses
    costs the task a note in its events (supervisor/telemetry/export.py), not its run.
    `unless_running`: a Temporal worker's one step is a run's end only when the task stopped
    (completed, failed, waiting for a person); until then its steps go with the next export."""
    asked = chosen(settings)
    if asked is None:
        return
    try:
        if unless_running and store.workflow(wf_id).status == "running":
            return
        from supervisor.telemetry import export

        export.export_run(store, wf_id, asked)
    except Exception as e:  # telemetry must never fail a task
        log.warning("telemetry export of workflow %s failed: %s", wf_id, e)
