"""Starting a task's workflow through the Temporal server's own service, not the SDK's client.

A submission asks the server one thing, to start a workflow, and its helper process
(supervisor/temporal/link.py) spent half of its CPU importing the SDK's high-level client (its
workflow, activity, Nexus and converter modules) for that call: on a machine whose two cores are
shared, a submission waits for all of its processes' CPU (benchmarks/scaleout.py
--submission-only). The SDK's `ServiceClient` and the API's messages are what that client sends
through; `start_request` builds the request it builds for these arguments, the input encoded as
its default converter encodes it (JSON, "json/plain"), so a worker's SDK reads the same
`TaskInput` (tests/test_temporal_submit.py compares it with the SDK's own encoding;
tests/test_temporal_e2e.py runs a worker on a submitted task).
"""

from __future__ import annotations

import dataclasses
import json
import os
import socket
import uuid
from typing import TYPE_CHECKING, Any

from supervisor.core.errors import RunnerUnavailableError

if TYPE_CHECKING:
    from collections.abc import Awaitable

WORKFLOW_NAME = "supervisor-task"
"""The workflow's registered name: supervisor/temporal/workflow.py's, written again here because
that module imports the SDK's workflow package (tests/test_temporal_submit.py: they agree)."""
WORKFLOW_TASK_TIMEOUT_S = 5  # how long a worker may hold a decision (see start_request)


async def reach(address: str, namespace: str, connecting: Awaitable[Any],
                timeout: float | None = None) -> Any:  # fmt: skip
    """The connection `connecting` makes; any failure said as the server out of reach."""
    import asyncio

    try:
        return await (asyncio.wait_for(connecting, timeout) if timeout else connecting)
    except Exception as e:  # the SDK raises RuntimeError for every connection failure
        raise RunnerUnavailableError(
            f"Cannot reach the Temporal server at {address} (namespace {namespace}): "
            f"{e or type(e).__name__}",
            "Start it (`temporal server start-dev`, or bash scripts/setup-scaleout.sh --trial) or "
            "set temporal.address in your config; `--backend embedded` runs the task here.",
        ) from e


async def connect_service(address: str, namespace: str, timeout: float | None = None) -> Any:
    """The server's service client (`ServiceClient`), connected: what `Client.connect` makes
    before it wraps it."""
    from temporalio.service import ConnectConfig, ServiceClient

    return await reach(
        address, namespace, ServiceClient.connect(ConnectConfig(target_host=address)), timeout
    )


def start_request(namespace: str, wid: str, task: Any, queue: str, replace: bool) -> Any:
    """`StartWorkflowExecutionRequest` as `Client.start_workflow(WORKFLOW_NAME, task, id=wid,
    task_queue=queue, id_reuse_policy=ALLOW_DUPLICATE, id_conflict_policy=TERMINATE_EXISTING if
    replace else FAIL)` sends it. `task`: `TaskInput`, or its fields (left-out ones default)."""
    from temporalio.api.common.v1 import Payload
    from temporalio.api.enums.v1 import WorkflowIdConflictPolicy, WorkflowIdReusePolicy
    from temporalio.api.workflowservice.v1 import StartWorkflowExecutionRequest

    fields = task if isinstance(task, dict) else dataclasses.asdict(task)
    request = StartWorkflowExecutionRequest(
        namespace=namespace,
        workflow_id=wid,
        identity=f"{os.getpid()}@{socket.gethostname()}",  # the SDK client's default
        request_id=str(uuid.uuid4()),
        workflow_id_reuse_policy=WorkflowIdReusePolicy.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
        workflow_id_conflict_policy=(
            WorkflowIdConflictPolicy.WORKFLOW_ID_CONFLICT_POLICY_TERMINATE_EXISTING
            if replace
            else WorkflowIdConflictPolicy.WORKFLOW_ID_CONFLICT_POLICY_FAIL
        ),
    )
    request.workflow_type.name = WORKFLOW_NAME
    request.task_queue.name = queue
    # A worker paused (SIGSTOP) or cut off keeps its long polls open at the server, which hands
    # them the workflow's next decisions: each waits out this timeout before another worker
    # gets it (the default 10 s, twice in a row in issue 58's spec). The workflow's code is
    # cheap and its history short (workflow.py HISTORY_LIMIT): 5 s is ample.
    request.workflow_task_timeout.FromSeconds(WORKFLOW_TASK_TIMEOUT_S)
    data = json.dumps(fields, separators=(",", ":"), sort_keys=True)  # as the SDK's converter
    request.input.payloads.append(Payload(metadata={"encoding": b"json/plain"}, data=data.encode()))
    return request
