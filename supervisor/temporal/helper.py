"""The helper process of a submission's link (supervisor/temporal/link.py): the Temporal
server's service client (supervisor/temporal/service.py), imported at once, connecting and
starting workflows as the submitting process asks, one JSON line per request on stdin, one
answer per line on stdout, until its input ends."""

from __future__ import annotations

import json
import os
import sys

# At once, while the submitting process checks the task: the service and the request's messages
import temporalio.api.workflowservice.v1
import temporalio.service  # noqa: F401

from supervisor.core.errors import SupervisorError
from supervisor.temporal.client import Server, Session, start_workflow


def serve() -> None:
    """Each request line on stdin answered by one line on stdout."""
    session: Session | None = None
    for line in sys.stdin:
        request = json.loads(line)
        try:
            if request["op"] == "connect":
                if session is not None:
                    session.close()
                session = Session(Server(request["address"], request["namespace"]))
                session.client()
            else:
                assert session is not None, "a start before a connection"
                start_workflow(
                    session.settings,
                    request["workflow_id"],
                    request["task"],
                    request["queue"],
                    replace=False,
                    session=session,
                )
            answer: dict[str, str | bool] = {"ok": True}
        except SupervisorError as e:
            answer = {"error": e.message, "hint": e.hint}
        print(json.dumps(answer), flush=True)
    # Its input ended: the submitting command is done with it. Tearing down the interpreter and
    # the SDK's runtime would take a tenth of a second more.
    os._exit(0)
