"""A submission's connection to the Temporal server, held by a helper process of its own.

Importing Temporal's client (its generated protobuf modules) costs a quarter of a second of CPU,
and connecting waits for the server. In one interpreter both took turns with everything else a
submission does (the settings, the state database, the checks), under one interpreter lock; in a
helper process they run on another core meanwhile, so the submitting command waits for neither
(benchmarks/scaleout.py --submission-only). The submitting process itself never imports
temporalio (tests/test_temporal_submit.py).

The helper (supervisor/temporal/helper.py) does only what a submission asks of the server:
connect, start workflows. One JSON line per request on its stdin, one answer per line on its
stdout; it ends when its stdin closes (the submitting process ended, however). An error comes
back as its message and hint and is raised here as the same `RunnerUnavailableError`, so a
submission fails as it did in process.
"""

from __future__ import annotations

import contextlib
import json
import select
import subprocess
import sys
import tempfile
import weakref
from pathlib import Path
from typing import IO, Any

from supervisor.core.errors import RunnerUnavailableError

# The helper imports this package from where this process did (never from the working directory:
# `-P`; a repository's checkout may hold a `supervisor` directory of its own).
_PACKAGE_ROOT = str(Path(__file__).resolve().parent.parent.parent)
_SERVE = (
    "import gc, sys; gc.set_threshold(20_000); sys.path.insert(0, sys.argv[1]); "
    "from supervisor.temporal.helper import serve; serve()"
)  # the collector's threshold: as the command's own (supervisor/cli/entry.py)
# An answer the helper owes: its import and a connection on a loaded machine take seconds; its
# connection itself gives up after 15 s (supervisor/temporal/client.py).
ANSWER_TIMEOUT = 120.0
_HINT = "Check the server (`temporal operator cluster health`), then submit again."


class Link:
    """The helper process, started at once (its import begins while the caller goes on)."""

    def __init__(self) -> None:
        self._errors = tempfile.TemporaryFile()  # noqa: SIM115  # closed by `_end`
        self._proc = subprocess.Popen(
            [sys.executable, "-P", "-c", _SERVE, _PACKAGE_ROOT],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._errors,
            text=True, bufsize=1,
        )  # fmt: skip
        self._server: tuple[str, str] | None = None  # where it was last asked to connect
        # Ended with this object or the process, whichever comes first: never left running.
        self._end = weakref.finalize(self, _end, self._proc, self._errors)

    def connect(self, address: str, namespace: str) -> None:
        """Asks for the connection, once per server (asked early, it is made while the caller
        checks the task); `answer()` says whether it was made."""
        if self._server != (address, namespace):
            self._server = (address, namespace)
            self._send({"op": "connect", "address": address, "namespace": namespace})

    def start(self, workflow_id: str, task: dict[str, Any], queue: str) -> None:
        """Starts the task's workflow (fails if it exists); `task`: `TaskInput`'s fields."""
        self._send({"op": "start", "workflow_id": workflow_id, "task": task, "queue": queue})
        self.answer()

    def answer(self) -> None:
        """Waits for the oldest request's answer; its error, raised here."""
        assert self._proc.stdin is not None and self._proc.stdout is not None
        ready, _, _ = select.select([self._proc.stdout], [], [], ANSWER_TIMEOUT)
        line = self._proc.stdout.readline() if ready else ""
        if not line:
            why = (
                f"ended before answering: {self._stderr_tail()}"
                if ready
                else f"did not answer within {ANSWER_TIMEOUT:.0f} s"
            )
            raise RunnerUnavailableError(
                f"Temporal's client (a helper process of this command) {why}.", _HINT
            )
        said = json.loads(line)
        if "error" in said:
            raise RunnerUnavailableError(str(said["error"]), str(said.get("hint") or _HINT))

    def close(self) -> None:
        self._end()

    def _send(self, request: dict[str, Any]) -> None:
        assert self._proc.stdin is not None
        with contextlib.suppress(OSError):  # it ended: `answer()` says why
            self._proc.stdin.write(json.dumps(request) + "\n")
            self._proc.stdin.flush()

    def _stderr_tail(self) -> str:
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._proc.wait(timeout=10)
        self._errors.seek(0)
        lines = self._errors.read().decode(errors="replace").strip().splitlines()
        return lines[-1] if lines else f"exit code {self._proc.returncode}"


def _end(proc: subprocess.Popen[str], errors: IO[bytes]) -> None:
    """Closes its stdin; then ends it if it has not ended of itself: it was asked nothing more
    (a command that failed before its submission need not wait for Temporal's import)."""
    for stream in (proc.stdin, proc.stdout):
        if stream is not None:
            with contextlib.suppress(OSError):
                stream.close()
    if proc.poll() is None:
        proc.terminate()
    proc.wait()
    errors.close()
