"""A scripted model API on loopback, for tests and `supervisor demo`.

It answers the real CLI binaries the way their vendor's API would, following a `Script`, and
records every request so that tests can assert what a prompt held.
"""

from __future__ import annotations

import hashlib
import json
import sys
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from supervisor.fakeapi import anthropic, gemini, openai
from supervisor.fakeapi.script import Conversation, Script, Turn

VENDORS = (anthropic, openai, gemini)
EXHAUSTED = Turn(text="(script exhausted)")
UNMATCHED = Turn(text="(no scripted conversation matched)")


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    conversation: int | None = None
    turn: int | None = None
    at: float = field(default_factory=time.time)


class ScriptPlayer:
    """Chooses the turn that answers a request; thread-safe."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self._used: set[int] = set()
        self._by_opening: dict[str, int] = {}
        self._lock = threading.Lock()

    def answer(self, opening: str, full_text: str, turn_index: int) -> tuple[int | None, Turn]:
        key = hashlib.sha256(opening.encode()).hexdigest()
        with self._lock:
            if turn_index == 0 and key in self._by_opening:
                # The same opening again: the CLI re-sent its first request (its own retry, or
                # a side call over the same history). It belongs to the same conversation.
                chosen = self._by_opening[key]
            elif turn_index == 0:
                chosen = self._choose(full_text)
                if chosen is None:
                    return None, UNMATCHED
                self._by_opening[key] = chosen
            else:
                chosen = self._by_opening.get(key)
                if chosen is None:
                    return None, UNMATCHED
        turns = self.script.conversations[chosen].turns
        return chosen, turns[turn_index] if turn_index < len(turns) else EXHAUSTED

    def _choose(self, text: str) -> int | None:
        for index, conversation in enumerate(self.script.conversations):
            if index in self._used and not conversation.repeat:
                continue
            if _matches(conversation, text):
                self._used.add(index)
                return index
        return None


def _matches(conversation: Conversation, text: str) -> bool:
    return conversation.when is None or conversation.when in text


class ScriptedModelServer:
    """`with ScriptedModelServer(script) as server:` ... `server.url`, `server.requests`."""

    def __init__(
        self, script: Script, host: str = "127.0.0.1", port: int = 0, verbose: bool = False
    ) -> None:
        self.player = ScriptPlayer(script)
        self.requests: list[Recorded] = []
        self.unmatched: list[Recorded] = []
        self.verbose = verbose
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer((host, port), _handler_for(self))
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def record(self, item: Recorded) -> None:
        with self._lock:
            self.requests.append(item)
            if item.conversation is None and item.method == "POST":
                self.unmatched.append(item)
        if self.verbose:
            sys.stderr.write(
                f"[fakeapi] {item.method} {item.path} conversation={item.conversation} "
                f"turn={item.turn}\n"
            )

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> ScriptedModelServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _handler_for(server: ScriptedModelServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:  # quiet: the server records instead
            return

        def do_HEAD(self) -> None:
            self._empty(404)

        def do_GET(self) -> None:
            server.record(Recorded("GET", self.path, dict(self.headers), {}))
            self._json(404, anthropic.error_body(404, "not found"))

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length) if length else b"{}"
            try:
                body = json.loads(raw or b"{}")
            except ValueError:
                body = {}
            path = self.path.split("?", 1)[0]
            headers = dict(self.headers)
            if path.endswith("/v1/messages/count_tokens"):
                server.record(Recorded("POST", self.path, headers, body, -1, 0))
                self._json(200, {"input_tokens": max(1, len(raw) // 4)})
                return
            vendor = next((v for v in VENDORS if v.handles(path)), None)
            if vendor is None:
                server.record(Recorded("POST", self.path, headers, body))
                self._json(404, anthropic.error_body(404, f"unknown path {path}"))
                return
            index = vendor.turn_index(body)
            chosen, turn = server.player.answer(
                vendor.opening(body), vendor.request_text(body), index
            )
            server.record(Recorded("POST", self.path, headers, body, chosen, index))
            if turn.delay:
                time.sleep(turn.delay)
            if turn.error is not None:
                extra = {}
                if turn.error.retry_after is not None:
                    extra["retry-after"] = str(int(turn.error.retry_after))
                self._json(
                    turn.error.status,
                    vendor.error_body(turn.error.status, turn.error.message),
                    extra,
                )
                return
            content_type, chunks = vendor.answer(turn, body)
            if content_type == "text/event-stream":
                self._sse(chunks)
            else:
                self._json(200, json.loads(b"".join(chunks)))

        def _empty(self, status: int) -> None:
            self.send_response(status)
            self.send_header("content-length", "0")
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

        def _sse(self, events: list[bytes]) -> None:
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("cache-control", "no-cache")
            self.send_header("request-id", "req_scripted")
            self.send_header("connection", "close")
            self.end_headers()
            for event in events:
                self.wfile.write(event)
                self.wfile.flush()
            self.close_connection = True

    return Handler
