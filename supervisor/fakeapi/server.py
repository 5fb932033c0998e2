"""A scripted model API, for tests and `supervisor demo`.

It answers the real CLI binaries the way their vendor's API would, following a `Script`, and
records every request so that tests can assert what a prompt held. Each vendor's wire format lives
in its own module (`anthropic`, `openai`, `gemini`); this module only routes and records.
"""

from __future__ import annotations

import json
import re
import socket
import sys
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, cast
from urllib.parse import parse_qs, urlsplit

from supervisor.fakeapi import anthropic, gemini, openai
from supervisor.fakeapi.script import Choice, Script, ScriptPlayer

if TYPE_CHECKING:
    from supervisor.fakeapi.script import Turn

AFTER_LIMIT = 240.0
"""Seconds a turn waits for its `after` file: below the worker's idle limit (300 s)."""


class Vendor(Protocol):
    """What a vendor module provides; a module satisfies it by defining these functions."""

    def handles(self, path: str) -> bool: ...
    def request_text(self, body: dict[str, Any]) -> str: ...
    def opening(self, body: dict[str, Any]) -> str: ...
    def turn_index(self, body: dict[str, Any]) -> int: ...
    def answer(self, turn: Turn, body: dict[str, Any]) -> tuple[str, list[bytes]]: ...
    def error_body(self, status: int, message: str) -> dict[str, Any]: ...
    def refusal(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]] | None: ...


VENDORS: tuple[Vendor, ...] = (anthropic, openai, gemini)
# Credentials are recorded as present, never by value: a demo may run with a user's real key.
# The run id the supervisor writes into every worker prompt: it names the attempt in the log.
_RUN_ID = re.compile(r"RUN: ([\w.-]+)")
RETRY_INFO = "type.googleapis.com/google.rpc.RetryInfo"
SECRET_HEADERS = frozenset({"x-api-key", "authorization", "x-goog-api-key", "proxy-authorization"})

Kind = Literal[
    "scripted", "exhausted", "unmatched", "default", "side", "unknown", "probe", "refused"
]


@dataclass
class Recorded:
    """One request as received. `kind`: scripted / exhausted / unmatched / default (a model turn;
    default: the built-in analyzer verdict, supervisor/fakeapi/script.py), side (a
    CLI call outside the agent loop: count_tokens, a session-title request), unknown (a path
    nobody handles), probe (HEAD/GET, e.g. the CLI's connectivity check)."""

    method: str
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    conversation: int | None = None
    turn: int | None = None
    at: float = field(default_factory=time.time)
    kind: Kind = "scripted"
    answered: str = ""
    key_ok: bool | None = None
    """With `api_key` set on the server: whether this request carried exactly that key."""
    opening: str = ""
    """A model turn's opening prompt when it is its conversation's first turn (no answer of the
    model in it yet), in any vendor's format; else empty: what a spec counts prompts by."""


class ScriptedModelServer:
    """`with ScriptedModelServer(script) as server:` ... `server.url`, `server.requests`.

    Serves from a background thread so a test can run the CLI as a subprocess in the foreground.
    `requests` holds every POST (model turns, side calls, unknown paths), `unmatched` those a
    script could not answer, `exhausted` the turns past a conversation's end, `probes` the
    HEAD/GET requests, `refused` those the real API would refuse (an output schema outside the
    vendor's dialect, answered with the vendor's own 400); each property returns a snapshot, safe
    to read while the CLI still calls.
    """

    def __init__(
        self,
        script: Script,
        host: str = "127.0.0.1",
        port: int = 0,
        verbose: bool = False,
        api_key: str | None = None,
    ) -> None:
        self.player = ScriptPlayer(script)
        self.verbose = verbose
        # Like the real APIs: with a key set, a request without it is a 401 (any key otherwise).
        self.api_key = api_key
        self._requests: list[Recorded] = []
        self._probes: list[Recorded] = []
        self._lock = threading.Lock()
        self._closed = False
        self._httpd = _Server((host, port), _handler_for(self))
        # A short poll: `close()` waits up to one interval, and tests close a server per test.
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, args=(0.05,), name="fakeapi", daemon=True
        )
        self._thread.start()

    @property
    def url(self) -> str:
        host, port = cast("tuple[str, int]", self._httpd.server_address[:2])
        if ":" in str(host):
            host = f"[{host}]"
        return f"http://{host}:{port}"

    @property
    def requests(self) -> list[Recorded]:
        with self._lock:
            return list(self._requests)

    @property
    def unmatched(self) -> list[Recorded]:
        with self._lock:
            return [r for r in self._requests if r.kind in ("unmatched", "unknown")]

    @property
    def exhausted(self) -> list[Recorded]:
        with self._lock:
            return [r for r in self._requests if r.kind == "exhausted"]

    @property
    def refused(self) -> list[Recorded]:
        with self._lock:
            return [r for r in self._requests if r.kind == "refused"]

    @property
    def probes(self) -> list[Recorded]:
        with self._lock:
            return list(self._probes)

    def record(self, item: Recorded) -> None:
        if self.api_key is not None and item.method == "POST" and item.key_ok is None:
            item.key_ok = True  # a POST without the key was refused (and recorded) before this
        with self._lock:
            (self._probes if item.kind == "probe" else self._requests).append(item)
        # Surprises are always worth a line; the routine traffic only when asked for.
        if self.verbose or item.kind in ("unmatched", "exhausted", "unknown", "refused"):
            model = item.body.get("model", "")
            run = _RUN_ID.search(json.dumps(item.body))
            sys.stderr.write(
                f"[fakeapi] {time.strftime('%H:%M:%S')} {item.method} {item.path} {item.kind}"
                f"{f' model={model}' if model else ''}{f' run={run[1]}' if run else ''}"
                f" conversation={item.conversation} turn={item.turn} -> {item.answered}\n"
            )
            sys.stderr.flush()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> ScriptedModelServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler]) -> None:
        # ThreadingHTTPServer is IPv4-only by default; an IPv6 gateway address must bind too.
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        super().__init__(address, handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A CLI killed mid-answer (tests do that on purpose, during a `delay`) is not an error.
        if isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError, TimeoutError)):
            return
        super().handle_error(request, client_address)


def _summary(turn: Turn) -> str:
    if turn.error is not None:
        return f"HTTP {turn.error.status}"
    if turn.tool_use is not None:
        return f"tool_use {turn.tool_use.name}"
    text = (turn.text or "").splitlines()[0] if turn.text else ""
    return f"text {text[:60]!r}"


def _headers(raw: Any) -> dict[str, str]:
    out = {}
    for name, value in raw.items():
        key = name.lower()
        out[key] = "[redacted]" if key in SECRET_HEADERS else value
    return out


def _handler_for(server: ScriptedModelServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            return  # quiet: the server records and logs instead

        def do_HEAD(self) -> None:
            server.record(Recorded("HEAD", self.path, _headers(self.headers), {}, kind="probe"))
            self._empty(404)

        def do_GET(self) -> None:
            server.record(
                Recorded("GET", self.path, _headers(self.headers), {}, kind="probe", answered="404")
            )
            self._json(404, anthropic.error_body(404, "not found"))

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                body = json.loads(raw or b"{}")
            except ValueError:
                body = {}
            if not isinstance(body, dict):
                body = {"_body": body}
            path = self.path.split("?", 1)[0]
            headers = _headers(self.headers)
            if server.api_key is not None and not self._key_ok(server.api_key):
                claimed = next((v for v in VENDORS if v.handles(path)), anthropic)
                server.record(
                    Recorded("POST", self.path, headers, body, kind="unknown", key_ok=False)
                )
                self._json(401, claimed.error_body(401, "invalid x-api-key"))
                return

            vendor: Vendor | None
            for vendor in VENDORS:
                side = getattr(vendor, "side_answer", None)
                found = side(path, body) if side else None
                if found is not None:
                    status, payload = found
                    server.record(
                        Recorded(
                            "POST", self.path, headers, body, kind="side", answered=str(status)
                        )
                    )
                    self._json(status, payload)
                    return
            vendor = next((v for v in VENDORS if v.handles(path)), None)
            if vendor is None:
                server.record(
                    Recorded("POST", self.path, headers, body, kind="unknown", answered="404")
                )
                self._json(404, anthropic.error_body(404, f"unknown path {path}"))
                return

            refused = vendor.refusal(body)
            if refused is not None:
                status, payload = refused
                server.record(
                    Recorded("POST", self.path, headers, body, kind="refused", answered=str(status))
                )
                self._json(status, payload)
                return

            side_turn = getattr(vendor, "side_turn", None)
            turn = side_turn(body) if side_turn else None
            if turn is not None:
                server.record(
                    Recorded("POST", self.path, headers, body, kind="side", answered=_summary(turn))
                )
                self._answer(vendor, turn, body)
                return

            choice: Choice = server.player.choose(
                vendor.opening(body), vendor.request_text(body), vendor.turn_index(body)
            )
            server.record(
                Recorded(
                    "POST",
                    self.path,
                    headers,
                    body,
                    choice.conversation,
                    choice.index,
                    kind=choice.outcome,
                    answered=_summary(choice.turn),
                    opening=vendor.opening(body) if vendor.turn_index(body) == 0 else "",
                )
            )
            self._answer(vendor, choice.turn, body)

        def _key_ok(self, key: str) -> bool:
            query = parse_qs(urlsplit(self.path).query)
            offered = [
                self.headers.get("x-api-key"),
                self.headers.get("x-goog-api-key"),
                (self.headers.get("authorization") or "").removeprefix("Bearer "),
                *query.get("key", []),
            ]
            return key in offered

        def _answer(self, vendor: Vendor, turn: Turn, body: dict[str, Any]) -> None:
            if turn.after is not None:
                released = Path(turn.after)
                until = time.monotonic() + AFTER_LIMIT
                while not released.exists() and time.monotonic() < until:
                    time.sleep(0.1)
            if turn.delay:
                time.sleep(turn.delay)
            if turn.error is not None:
                extra = {}
                if turn.error.retry_after is not None:
                    extra["retry-after"] = str(max(0, round(turn.error.retry_after)))
                extra.update(turn.error.headers)
                body_out = vendor.error_body(turn.error.status, turn.error.message)
                if turn.error.retry_delay is not None:
                    retry = {"@type": RETRY_INFO, "retryDelay": turn.error.retry_delay}
                    body_out.setdefault("error", {}).setdefault("details", []).append(retry)
                self._json(turn.error.status, body_out, extra)
                return
            content_type, chunks = vendor.answer(turn, body)
            if content_type == "text/event-stream":
                self._sse(chunks, turn.pace)
            else:
                self._json(200, json.loads(b"".join(chunks)))

        def _empty(self, status: int) -> None:
            self.send_response(status)
            self.send_header("content-length", "0")
            self.send_header("connection", "close")
            self.close_connection = True
            self.end_headers()

        def _json(
            self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None
        ) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.send_header("request-id", "req_scripted")
            # One request per connection: no keep-alive races between a CLI's pool and the relay.
            self.send_header("connection", "close")
            self.close_connection = True
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)

        def _sse(self, events: list[bytes], pace: float = 0.0) -> None:
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("cache-control", "no-cache")
            self.send_header("request-id", "req_scripted")
            # No content-length: the stream ends when the connection closes, as with the real API.
            self.send_header("connection", "close")
            self.close_connection = True
            self.end_headers()
            for event in events:
                if pace:
                    time.sleep(pace)
                self.wfile.write(event)
                self.wfile.flush()

    return Handler
