"""What the proxy daemon (supervisor/sandbox/proxyd.py) costs a supervisor: starting it, finding
it, and opening and closing one run's route over its control socket.

    .venv/bin/python benchmarks/proxy_attach.py [--routes 50]

Cold: the first supervisor on a host starts the daemon (a Python process) and waits for its
socket. Warm: every later supervisor connects to it. Per run: one route opened (a listener on
loopback, the upstream checked reachable) and closed. Runs with a user folder of its own, so the
user's daemon is left alone; the daemon it starts ends itself a second after the last client.
"""

from __future__ import annotations

import argparse
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
from supervisor.sandbox.credproxy import Injection, new_placeholder  # noqa: E402
from supervisor.sandbox.proxy_client import ProxyClient  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--routes", type=int, default=50)
    args = parser.parse_args()
    folder = tempfile.mkdtemp(prefix="proxyd-bench-")
    os.environ["SUPERVISOR_USER_DIR"] = folder
    os.environ["SUPERVISOR_PROXYD_IDLE"] = "1"
    script = load_script({"conversations": [{"repeat": True, "turns": [{"text": "hi"}]}]})
    with ScriptedModelServer(script) as server:
        started = time.perf_counter()
        first = ProxyClient.connect()
        cold = time.perf_counter() - started
        warm: list[float] = []
        for _ in range(20):
            started = time.perf_counter()
            ProxyClient.connect().close()
            warm.append(time.perf_counter() - started)
        opened: list[float] = []
        closed: list[float] = []
        for _ in range(args.routes):
            placeholder = new_placeholder()
            started = time.perf_counter()
            first.open_route(
                base_url=server.url,
                injection=Injection("x-api-key", "k"),
                placeholder=placeholder,
                vendor="anthropic",
                record_dir=None,
                gateway="127.0.0.1",
                bridge=None,
            )
            opened.append(time.perf_counter() - started)
            started = time.perf_counter()
            first.close_route(placeholder)
            closed.append(time.perf_counter() - started)
        first.close()
    table = Table(title="proxy daemon costs (loopback, no firewall)")
    table.add_column("")
    table.add_column("median", justify="right")
    table.add_column("max", justify="right")
    table.add_row("start the daemon (cold, once per host)", f"{cold * 1000:.1f} ms", "")
    for label, samples in (
        ("find it (warm connect + hello)", warm),
        (f"open a run's route ({args.routes}x)", opened),
        (f"close a run's route ({args.routes}x)", closed),
    ):
        table.add_row(
            label, f"{statistics.median(samples) * 1000:.2f} ms", f"{max(samples) * 1000:.2f} ms"
        )
    Console(width=120).print(table)


if __name__ == "__main__":
    main()
