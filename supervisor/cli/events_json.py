"""`supervisor events <id> --json`: the event log as JSON lines, streamed.

A log of 100,000 events is written as it is read (supervisor.state.reader.StateReader.event_lines:
SQLite makes each line), never held whole; a shared PostgreSQL state, read through the store,
is encoded here. Imports neither typer nor rich: supervisor/cli/entry.py answers the command
without the full command line.
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path


def stream_events(repo: Path, workflow_id: int) -> None:
    """Each event a JSON line, its time as `status --json` writes one (plain.json_time)."""
    from supervisor.cli.plain import json_time, json_value
    from supervisor.lifecycle import task_state as access
    from supervisor.state.reader import StateReader

    with access.reading(repo) as store:
        store.workflow(workflow_id)  # an unknown id is an error, not an empty log
        if isinstance(store, StateReader):
            for chunk in store.event_lines(workflow_id):
                sys.stdout.write(chunk)
            return
        for e in store.events(workflow_id):
            record = {**e.__dict__, "timestamp": json_time(e.timestamp)}
            sys.stdout.write(json.dumps(record, default=json_value) + "\n")
