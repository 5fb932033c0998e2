"""Latency the credential-adding proxy adds per request, against a direct connection.

    .venv/bin/python benchmarks/proxy_latency.py [--requests 200]

Sends N streamed (SSE) Messages requests to the scripted model API directly and N through the
proxy (sandbox/credproxy.py, on loopback, adding the key), interleaved so both see the same machine
load, each on a new connection as a CLI's first request does. Prints median and p99 of the time to
the first byte and to the end of the stream for both, and the difference: the cost of keeping the
key on the host.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from supervisor.fakeapi import ScriptedModelServer, load_script  # noqa: E402
from supervisor.sandbox.credproxy import (  # noqa: E402
    CredentialProxy,
    Injection,
    Upstream,
    new_placeholder,
)

KEY = "sk-ant-bench-real-key"
PLACEHOLDER = new_placeholder()
ALIAS = "model-api.supervisor.internal"
ANSWER = "The quick brown fox jumps over the lazy dog. " * 40  # ~1.8 kB, ~45 SSE deltas
BODY = json.dumps(
    {
        "model": "claude-sonnet-4-5",
        "stream": True,
        "max_tokens": 1024,
        "tools": [{"name": "Bash", "input_schema": {"type": "object"}}],
        "messages": [{"role": "user", "content": "benchmark " + "context " * 2000}],
    }
).encode()


def one(port: int, host: str) -> tuple[float, float]:
    """Seconds to the first body byte and to the end of the stream."""
    started = time.perf_counter()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    headers = {"host": host, "x-api-key": PLACEHOLDER if host.startswith(ALIAS) else KEY}
    headers["content-type"] = "application/json"
    conn.request("POST", "/v1/messages?beta=true", body=BODY, headers=headers)
    response = conn.getresponse()
    first = response.read(1)
    ttfb = time.perf_counter() - started
    rest = response.read()
    total = time.perf_counter() - started
    conn.close()
    if response.status != 200 or not first or b"message_stop" not in rest:
        raise SystemExit(f"bad answer {response.status}: {(first + rest)[:300]!r}")
    return ttfb, total


def p99(samples: list[float]) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=200)
    args = parser.parse_args()
    script = load_script({"conversations": [{"repeat": True, "turns": [{"text": ANSWER}]}]})
    record = tempfile.TemporaryDirectory()  # each exchange recorded, as for a real run
    with record, ScriptedModelServer(script, api_key=KEY) as server:
        api_port = int(server.url.rsplit(":", 1)[1])
        proxy = CredentialProxy(
            Upstream.from_url(server.url),
            Injection("x-api-key", KEY),
            ("127.0.0.1", 0),
            [ALIAS],
            placeholder=PLACEHOLDER,
            vendor="anthropic",
            record_dir=Path(record.name) if not os.environ.get("NO_RECORD") else None,
        )
        try:
            for _ in range(10):  # warm-up: imports, first connections
                one(api_port, f"127.0.0.1:{api_port}")
                one(proxy.port, f"{ALIAS}:{proxy.port}")
            direct: list[tuple[float, float]] = []
            proxied: list[tuple[float, float]] = []
            for _ in range(args.requests):
                direct.append(one(api_port, f"127.0.0.1:{api_port}"))
                proxied.append(one(proxy.port, f"{ALIAS}:{proxy.port}"))
        finally:
            proxy.close()
        assert all(r.key_ok for r in server.requests)
    table = Table(title=f"{args.requests} streamed requests each, new connection per request")
    for column in ("", "direct", "through the proxy", "added"):
        table.add_column(column, justify="right" if column else "left")
    for label, index in (("time to first byte", 0), ("time to end of stream", 1)):
        d = [s[index] for s in direct]
        p = [s[index] for s in proxied]
        for stat, fn in (("median", statistics.median), ("p99", p99)):
            a, b = fn(d) * 1000, fn(p) * 1000
            table.add_row(f"{label}, {stat}", f"{a:.2f} ms", f"{b:.2f} ms", f"{b - a:+.2f} ms")
    Console(width=120).print(table)


if __name__ == "__main__":
    main()
