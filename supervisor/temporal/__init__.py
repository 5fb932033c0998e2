"""The Temporal runner: the same engine, run one step per activity by `supervisor worker`
processes, with approvals as signals and rate-limit waits as durable timers (issue 15).

- workflow.py: the Temporal workflow (deterministic; imports nothing but temporalio);
- activities.py: the activity that runs one engine step on this host's Docker engine;
- client.py: submitting a task, signalling a decision;
- link.py: a submission's connection, held by a helper process while the command checks the task;
- worker.py: the `supervisor worker` loop.
"""
