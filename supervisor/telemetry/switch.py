"""The one call the lifecycle makes when a run of the engine ends: export it, if asked.

Why apart from the exporter: this module imports no OpenTelemetry, so with telemetry off (the
default) a run pays for reading a few environment variables (supervisor/telemetry/choice.py) and
nothing else, and the commands that never export (`status`, `events`) do not even import it.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from supervisor.telemetry.choice import chosen

if TYPE_CHECKING:
    from supervisor.core.settings import TelemetrySettings
    from supervisor.state.store import Store

log = logging.getLogger(__name__)


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
