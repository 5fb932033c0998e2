"""What the credential proxy writes per run: the exchanges it relayed, as the API sent them.

Why: everything a process inside the sandbox writes can be forged by the worker; the bytes the
model API sent back through the proxy cannot. So the proxy keeps, per run, in the run's
`record_dir` (see /work/wt/PROXY_CONTRACT.md, read by supervisor/workers/witness.py):

- `exchanges.jsonl`, one line per exchange, appended (flushed and fsync'd) when it ends: method,
  path, query, status, whether the whole answer was relayed, times, byte counts, the rate-limit
  headers the API sent, and the body file's name; a request the proxy refused carries `refused`.
- `NNNN.body`, the response body exactly as relayed (written as it streams, capped at 64 MiB).
- `activity`, made at the run's first request and bumped at most once a second while the model's
  answers flow back, so the sandbox can tell a CLI waiting on a slow but live stream from a hung
  one (a CLI re-sending a request nobody answers is hung too).
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from pathlib import Path
from typing import IO, Any

BODY_CAP = 64 << 20
KEPT_HEADERS = frozenset(
    {"content-type", "content-encoding", "retry-after", "request-id", "x-request-id"}
)
KEPT_PREFIXES = ("anthropic-ratelimit-", "x-ratelimit-")


def kept_headers(headers: list[tuple[bytes, bytes]]) -> dict[str, str]:
    kept: dict[str, str] = {}
    for raw_name, raw_value in headers:
        name = raw_name.decode("latin-1").lower()
        if name in KEPT_HEADERS or name.startswith(KEPT_PREFIXES):
            kept[name] = raw_value.decode("latin-1")
    return kept


class Recorder:
    """One run's record; shared by the run's connections (a CLI may call in parallel)."""

    def __init__(self, record_dir: Path) -> None:
        self.dir = record_dir
        self._lock = threading.Lock()
        self._seq = self._next_seq()
        self._touched = 0.0

    def _next_seq(self) -> int:
        """A route re-opened for an adopted run goes on after what the first one wrote."""
        try:
            with (self.dir / "exchanges.jsonl").open("rb") as f:
                return sum(1 for _ in f)
        except OSError:
            return 0

    def begin(self, method: str, target: str) -> Exchange:
        with self._lock:
            seq = self._seq
            self._seq += 1
        if seq == 0:
            self.touch(force=True)  # the run's model traffic began: its start-up is over
        return Exchange(self, seq, method, target)

    def touch(self, *, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._touched < 1.0:
            return
        self._touched = now
        path = self.dir / "activity"
        with contextlib.suppress(OSError):
            try:
                os.utime(path)
            except FileNotFoundError:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, 0o600)
                os.close(fd)

    def write(self, entry: dict[str, Any]) -> None:
        line = (json.dumps(entry, sort_keys=True) + "\n").encode()
        with self._lock:
            flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW
            with contextlib.suppress(OSError):
                fd = os.open(self.dir / "exchanges.jsonl", flags, 0o600)
                try:
                    os.write(fd, line)
                    os.fsync(fd)
                finally:
                    os.close(fd)


class Exchange:
    """One request and its answer, as relayed."""

    def __init__(self, recorder: Recorder, seq: int, method: str, target: str) -> None:
        self.recorder = recorder
        path, _, query = target.partition("?")
        self.entry: dict[str, Any] = {
            "seq": seq,
            "method": method,
            "path": path,
            "query": query,
            "status": None,
            "complete": False,
            "started": time.time(),
            "request_bytes": 0,
            "response_bytes": 0,
            "headers": {},
            "body": f"{seq:04d}.body",
        }
        self._body: IO[bytes] | None = None
        self._done = False

    def sent(self, size: int) -> None:
        """A request's bytes are not a sign of life: a CLI that sends the same request again and
        again, never answered, is hung all the same."""
        self.entry["request_bytes"] += size

    def answered(self, status: int, headers: list[tuple[bytes, bytes]]) -> None:
        self.entry["status"] = status
        self.entry["headers"] = kept_headers(headers)
        self._open_body()
        self.recorder.touch()

    def received(self, data: bytes) -> None:
        size = self.entry["response_bytes"]
        self.entry["response_bytes"] = size + len(data)
        if self._body is not None and size < BODY_CAP:
            room = BODY_CAP - size
            with contextlib.suppress(OSError):
                self._body.write(data[:room])
                self._body.flush()
            if len(data) > room:
                self.entry["truncated"] = True
        self.recorder.touch()

    def _open_body(self) -> None:
        if self._body is None:
            flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW
            with contextlib.suppress(OSError):
                fd = os.open(self.recorder.dir / self.entry["body"], flags, 0o600)
                self._body = os.fdopen(fd, "wb")

    def refused(self, status: int, reason: str, body: bytes) -> None:
        self.entry["refused"] = reason
        self.answered(status, [(b"content-type", b"application/json")])
        self.received(body)
        self.end(complete=True)

    def end(self, *, complete: bool, error: str | None = None) -> None:
        if self._done:
            return
        self._done = True
        if self._body is None:
            self._open_body()  # an exchange always names a body file, empty when none came
        if self._body is not None:
            with contextlib.suppress(OSError):
                self._body.close()
        self.entry["complete"] = complete
        self.entry["ended"] = time.time()
        if error is not None:
            self.entry["error"] = error
        self.recorder.write(self.entry)
