"""A recording relay for specs: it sits between a real CLI and the scripted model API and writes a
run's record the way the credential proxy does (the proxy contract: `exchanges.jsonl`, one raw
`NNNN.body` per exchange, an `activity` file whose mtime follows the bytes). The witness specs
read what the scripted API really streamed, never a hand-written fixture; once the proxy daemon
records runs itself, the worker-step specs use its record and this shim only the reader's."""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

KEPT = ("content-type", "content-encoding", "retry-after", "request-id", "x-request-id")


def _kept(name: str) -> bool:
    return name in KEPT or name.startswith(("anthropic-ratelimit-", "x-ratelimit-"))


class RecordingShim:
    """`with RecordingShim(upstream_url, record_dir) as shim:` ... `shim.url`."""

    def __init__(self, upstream: str, record_dir: Path, host: str = "127.0.0.1") -> None:
        self.upstream = urlsplit(upstream)
        self.record_dir = record_dir
        record_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        self._seq = 0
        self._lock = threading.Lock()
        self._last_touch = 0.0
        self._httpd = ThreadingHTTPServer((host, 0), _handler(self))
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.05,), daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def next_seq(self) -> int:
        with self._lock:
            seq, self._seq = self._seq, self._seq + 1
            return seq

    def touch(self) -> None:
        now = time.time()
        if now - self._last_touch < 1.0:
            return
        self._last_touch = now
        path = self.record_dir / "activity"
        path.touch(exist_ok=True)
        os.utime(path)

    def write_entry(self, entry: dict[str, Any]) -> None:
        with self._lock, (self.record_dir / "exchanges.jsonl").open("a") as f:
            f.write(json.dumps(entry) + "\n")
            f.flush()
            os.fsync(f.fileno())

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> RecordingShim:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _handler(shim: RecordingShim) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            return

        def do_HEAD(self) -> None:
            self._relay()

        def do_GET(self) -> None:
            self._relay()

        def do_POST(self) -> None:
            self._relay()

        def _relay(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            request = self.rfile.read(length) if length else b""
            shim.touch()
            seq = shim.next_seq()
            path, _, query = self.path.partition("?")
            entry: dict[str, Any] = {
                "seq": seq,
                "method": self.command,
                "path": path,
                "query": query,
                "started": time.time(),
                "request_bytes": len(request),
            }
            base = shim.upstream
            conn = http.client.HTTPConnection(base.hostname or "127.0.0.1", base.port, timeout=300)
            headers = {
                k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")
            }
            headers["accept-encoding"] = "identity"
            try:
                conn.request(self.command, self.path, body=request or None, headers=headers)
                response = conn.getresponse()
            except OSError as e:
                entry.update(status=None, complete=False, error=str(e), ended=time.time())
                shim.write_entry(entry)
                self.send_error(502)
                return
            body_name = f"{seq:04d}.body"
            entry.update(
                status=response.status,
                headers={k.lower(): v for k, v in response.getheaders() if _kept(k.lower())},
                body=body_name,
            )
            self.send_response(response.status)
            for name, value in response.getheaders():
                if name.lower() not in ("connection", "transfer-encoding"):
                    self.send_header(name, value)
            self.send_header("connection", "close")
            self.close_connection = True
            self.end_headers()
            size, complete = 0, False
            with (shim.record_dir / body_name).open("wb") as out:
                try:
                    while self.command != "HEAD":
                        chunk = response.read1(65536)
                        if not chunk:
                            break
                        out.write(chunk)
                        out.flush()
                        size += len(chunk)
                        shim.touch()
                        self.wfile.write(chunk)
                        self.wfile.flush()
                    complete = True
                except OSError as e:
                    entry["error"] = str(e)
            with contextlib.suppress(OSError):
                conn.close()
            entry.update(complete=complete, response_bytes=size, ended=time.time())
            shim.write_entry(entry)

    return Handler
