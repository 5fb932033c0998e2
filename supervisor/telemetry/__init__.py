"""Each run of a task as OpenTelemetry traces and metrics, built from what the state recorded.

Off by default and imported only when on (`switch.after_run` is the one call the lifecycle makes):
the spans are made after the run from the steps, events, invocations and approvals the state
holds, the proxy's record of every model request among them, so nothing is threaded through the
engine and a run that is resumed, on this host or another, continues the same trace.
"""
