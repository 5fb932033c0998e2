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
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol, cast
from urllib.parse import parse_qs, urlsplit

from supervisor.fakeapi import anthropic, gemini, openai
from supervisor.fakeapi.script import Choice, Script, ScriptPlayer

if TYPE_CHECKING:
    from supervisor.fakeapi.script import HttpError, Turn

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


@dataclass(frozen=True)
class _Fixed:
    """A reply the script has no say in: a side call's answer, a refusal, the fake's own 4xx."""

    status: int
    payload: dict[str, Any]


@dataclass(frozen=True)
class _Scripted:
    """A reply that is a turn (the script's or a vendor's side turn), in the vendor's format."""

    vendor: Vendor
    turn: Turn


def _post_reply(
    server: ScriptedModelServer, target: str, raw_headers: Any, body: dict[str, Any]
) -> tuple[Recorded, _Fixed | _Scripted]:
    """How a POST is recorded and answered, decided together so that the record says what the
    answer was; the record is kept before the answer is written, which may wait (`after`)."""
    path = target.split("?", 1)[0]
    headers = _headers(raw_headers)
    if server.api_key is not None and not _key_ok(server.api_key, target, raw_headers):
        claimed = next((v for v in VENDORS if v.handles(path)), anthropic)
        return (
            Recorded("POST", target, headers, body, kind="unknown", key_ok=False),
            _Fixed(401, claimed.error_body(401, "invalid x-api-key")),
        )
    fixed = _fixed_reply(path, body)
    if fixed is not None:
        kind, reply = fixed
        return Recorded("POST", target, headers, body, kind=kind, answered=str(reply.status)), reply
    vendor = next(v for v in VENDORS if v.handles(path))  # _fixed_reply answers a path nobody does
    side_turn = getattr(vendor, "side_turn", None)
    turn = side_turn(body) if side_turn else None
    if turn is not None:
        return (
            Recorded("POST", target, headers, body, kind="side", answered=_summary(turn)),
            _Scripted(vendor, turn),
        )
    choice: Choice = server.player.choose(
        vendor.opening(body), vendor.request_text(body), vendor.turn_index(body)
    )
    recorded = Recorded(
        "POST",
        target,
        headers,
        body,
        choice.conversation,
        choice.index,
        kind=choice.outcome,
        answered=_summary(choice.turn),
        opening=vendor.opening(body) if vendor.turn_index(body) == 0 else "",
    )
    return recorded, _Scripted(vendor, choice.turn)


def _fixed_reply(path: str, body: dict[str, Any]) -> tuple[Kind, _Fixed] | None:
    """The replies no script can change, as the real API gives them: a side call (token counts,
    a session title) whichever vendor answers it, a path no vendor serves, a refused request."""
    for vendor in VENDORS:
        side = getattr(vendor, "side_answer", None)
        found = side(path, body) if side else None
        if found is not None:
            return "side", _Fixed(*found)
    served = next((v for v in VENDORS if v.handles(path)), None)
    if served is None:
        return "unknown", _Fixed(404, anthropic.error_body(404, f"unknown path {path}"))
    refused = served.refusal(body)
    return None if refused is None else ("refused", _Fixed(*refused))


def _key_ok(key: str, target: str, headers: Any) -> bool:
    """Each vendor's CLI offers its key its own way (a header, a bearer token, `?key=`); any of
    them will do, as the fake serves every vendor on one port."""
    query = parse_qs(urlsplit(target).query)
    offered = [
        headers.get("x-api-key"),
        headers.get("x-goog-api-key"),
        (headers.get("authorization") or "").removeprefix("Bearer "),
        *query.get("key", []),
    ]
    return key in offered


def _error_reply(vendor: Vendor, error: HttpError) -> tuple[int, dict[str, Any], dict[str, str]]:
    """A scripted HTTP error as the vendor sends it: its body, and the retry hints a CLI reads
    (a `retry-after` header, Google's RetryInfo detail) so that its own backoff is exercised."""
    extra: dict[str, str] = {}
    if error.retry_after is not None:
        extra["retry-after"] = str(max(0, round(error.retry_after)))
    extra.update(error.headers)
    payload = vendor.error_body(error.status, error.message)
    if error.retry_delay is not None:
        retry = {"@type": RETRY_INFO, "retryDelay": error.retry_delay}
        payload.setdefault("error", {}).setdefault("details", []).append(retry)
    return error.status, payload, extra


class _Handler(BaseHTTPRequestHandler):
    """Writes what `_post_reply` decides. http.server makes a handler per request from a class,
    so the server it records into rides on the subclass `_handler_for` makes."""

    protocol_version = "HTTP/1.1"
    owner: ClassVar[ScriptedModelServer]

    def log_message(self, format: str, *args: Any) -> None:
        return  # quiet: the server records and logs instead

    def do_HEAD(self) -> None:
        self.owner.record(Recorded("HEAD", self.path, _headers(self.headers), {}, kind="probe"))
        self._empty(404)

    def do_GET(self) -> None:
        self.owner.record(
            Recorded("GET", self.path, _headers(self.headers), {}, kind="probe", answered="404")
        )
        self._json(404, anthropic.error_body(404, "not found"))

    def do_POST(self) -> None:
        body = self._body()
        recorded, reply = _post_reply(self.owner, self.path, self.headers, body)
        self.owner.record(recorded)
        if isinstance(reply, _Fixed):
            self._json(reply.status, reply.payload)
        else:
            self._answer(reply.vendor, reply.turn, body)

    def _body(self) -> dict[str, Any]:
        """A body that is not a JSON object is still recorded (a spec asserts on what came)."""
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {}
        return body if isinstance(body, dict) else {"_body": body}

    def _answer(self, vendor: Vendor, turn: Turn, body: dict[str, Any]) -> None:
        if turn.after is not None:
            released = Path(turn.after)
            until = time.monotonic() + AFTER_LIMIT
            while not released.exists() and time.monotonic() < until:
                time.sleep(0.1)
        if turn.delay:
            time.sleep(turn.delay)
        if turn.error is not None:
            self._json(*_error_reply(vendor, turn.error))
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


def _handler_for(server: ScriptedModelServer) -> type[BaseHTTPRequestHandler]:
    class Handler(_Handler):
        owner = server

    return Handler
