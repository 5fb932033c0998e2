"""An OTLP/HTTP receiver on 127.0.0.1 for the telemetry specs: it keeps every export request
decoded with the official protobuf messages (opentelemetry-proto), as a collector would."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

KINDS: dict[str, tuple[Any, Any]] = {
    "/v1/traces": (ExportTraceServiceRequest, ExportTraceServiceResponse),
    "/v1/metrics": (ExportMetricsServiceRequest, ExportMetricsServiceResponse),
}


class Receiver:
    """`with Receiver() as r:` ... `r.url`, then `r.spans()`, `r.metrics()`."""

    def __init__(self) -> None:
        self.received: dict[str, list[Any]] = {path: [] for path in KINDS}
        received = self.received

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                kind = KINDS.get(self.path)
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                if kind is None:
                    self.send_response(404)
                    self.end_headers()
                    return
                request = kind[0]()
                request.ParseFromString(body)
                received[self.path].append((dict(self.headers), request))
                answer = kind[1]().SerializeToString()
                self.send_response(200)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> Receiver:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def spans(self) -> list[Any]:
        return [
            span
            for _, request in self.received["/v1/traces"]
            for resource in request.resource_spans
            for scope in resource.scope_spans
            for span in scope.spans
        ]

    def resources(self) -> list[dict[str, Any]]:
        return [
            attributes(resource.resource.attributes)
            for _, request in self.received["/v1/traces"]
            for resource in request.resource_spans
        ]

    def metrics(self) -> dict[str, Any]:
        return {
            metric.name: metric
            for _, request in self.received["/v1/metrics"]
            for resource in request.resource_metrics
            for scope in resource.scope_metrics
            for metric in scope.metrics
        }

    def headers(self) -> list[dict[str, str]]:
        return [headers for path in KINDS for headers, _ in self.received[path]]


def attributes(pairs: Any) -> dict[str, Any]:
    """OTLP's key-value list as a dict of plain values."""
    found: dict[str, Any] = {}
    for pair in pairs:
        value = pair.value
        found[pair.key] = (
            getattr(value, value.WhichOneof("value")) if value.WhichOneof("value") else None
        )
    return found
