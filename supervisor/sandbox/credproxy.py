"""The credential-adding reverse proxy between worker containers and the one model API.

Why: an API key in a worker container's environment is readable by every command the worker runs
(`env`, `/proc/self/environ`), by `docker inspect`, and can be exfiltrated through the model itself
(a tool result carrying it goes into the next request). So the CLI in the sandbox is given a
placeholder key and a plain-HTTP base URL on the sandbox network's gateway; this proxy, on the
host, parses each HTTP/1.1 request (h11, a sans-IO parser), drops whatever credentials the sandbox
sent, adds the real one, and forwards the request over its *own* connection (TLS with certificate
and host-name verification for https base URLs) to the one configured API host. Nothing the
sandbox sends decides the destination: an absolute-form target, CONNECT or a Host header naming
anything but the proxy itself is refused, and the upstream Host is always the configured one.

This also settles the server-name question of a raw TCP relay (issue 9): the old relay forwarded
bytes to the API's IP address without looking at the TLS ClientHello, so other sites served from
the same front end were reachable; here the sandbox never speaks TLS to anything, the proxy opens
TLS itself with SNI and certificate checks for the configured host only.

Streaming: request and response bodies are forwarded chunk by chunk as h11 yields them (SSE
answers arrive unbuffered; multi-MB request bodies never sit in memory whole); connections are
kept alive on both sides when both peers allow it.

One listener per run (issue 24): it forwards only its vendor's model endpoints (model_paths.py),
and only requests that carry the run's own placeholder credential, a fresh random
`sk-supervisor-<32 hex>` that is worth nothing anywhere else. A worker of another task that finds
this listener's port on the shared network has no placeholder of it: 403, nothing forwarded. In
login-file mode nothing is injected (the CLI's own login passes through), so no placeholder is
checked: the run is identified by its listener port alone, and a request there can spend only the
credentials it brought itself. Each run's exchanges are recorded in its `record_dir`
(proxy_record.py), and the connection to the API host is proxy_upstream.py's. The listeners live
in the proxy daemon (proxyd.py), not the supervisor.
"""

from __future__ import annotations

import contextlib
import hmac
import json
import socket
import threading
import time
from http import HTTPStatus
from pathlib import Path
from typing import TYPE_CHECKING, cast
from urllib.parse import parse_qsl, urlencode

import h11

from supervisor.core.errors import SandboxError
from supervisor.guard.placeholders import PLACEHOLDER_PREFIX as PLACEHOLDER_PREFIX
from supervisor.guard.placeholders import Injection as Injection
from supervisor.guard.placeholders import new_placeholder as new_placeholder
from supervisor.sandbox import model_paths, model_relay
from supervisor.sandbox.proxy_record import Exchange, Recorder
from supervisor.sandbox.proxy_upstream import (
    IDLE_TIMEOUT,
    MAX_HEADERS,
    UpstreamConnection,
    no_delay,
)
from supervisor.sandbox.proxy_upstream import Upstream as Upstream

if TYPE_CHECKING:
    from collections.abc import Iterable

AUTH_HEADERS = frozenset(
    {b"authorization", b"x-api-key", b"x-goog-api-key", b"proxy-authorization"}
)
HOP_BY_HOP = frozenset(
    {b"connection", b"keep-alive", b"proxy-connection", b"te", b"trailer", b"upgrade", b"expect"}
)
CHUNK = 65536


class CredentialProxy:
    """Listens on `bind` for one run; every request it accepts goes to `upstream` with
    `injection` applied. `bind` is an address on the workers' network, or the path of a Unix
    socket that a networkless container reaches through its relay (sandbox/model_relay.py),
    whose port is then the one the Host header names.

    `names`: the host names the sandbox may use in the Host header (the alias it was given);
    anything else is refused, so a request cannot pretend to be for another site. `placeholder`:
    the run's own credential, required on every request when a key is injected. `prefix`: the
    base URL's path; `vendor`: whose model endpoints pass (model_paths.py; None: any vendor's).
    """

    def __init__(
        self,
        upstream: Upstream,
        injection: Injection,
        bind: tuple[str, int] | Path,
        names: Iterable[str],
        *,
        placeholder: str,
        vendor: str | None = None,
        prefix: str = "",
        record_dir: Path | None = None,
    ) -> None:
        self.upstream = upstream
        self.injection = injection
        self.names = {n.lower() for n in names}
        self.placeholder = placeholder
        self.vendor = vendor
        self.prefix = prefix
        self.recorder = Recorder(record_dir) if record_dir is not None else None
        self.last_activity = time.monotonic()
        if isinstance(bind, Path):
            self._server = model_relay.unix_listener(bind)
            self.port: int = model_relay.RELAY_PORT
        else:
            self._server = _tcp_listener(bind)
            self.port = int(self._server.getsockname()[1])
        self._open: set[socket.socket] = set()
        self._serving: set[threading.Thread] = set()
        self._lock = threading.Lock()
        self._accepting = threading.Thread(target=self._accept, daemon=True, name="credproxy")
        self._accepting.start()

    @property
    def connections(self) -> int:
        with self._lock:
            return len(self._open)

    def record_to(self, record_dir: Path | None) -> None:
        """A re-attached run may name its record folder again (the same one, or a new one)."""
        if record_dir is not None and (self.recorder is None or self.recorder.dir != record_dir):
            self.recorder = Recorder(record_dir)

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            serving = threading.Thread(target=self._serve, args=(client,), daemon=True)
            with self._lock:
                self._open.add(client)
                self._serving.add(serving)
            self.last_activity = time.monotonic()
            serving.start()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._server.shutdown(socket.SHUT_RDWR)
        self._accepting.join(timeout=5)
        self._server.close()
        with self._lock:
            for client in self._open:
                with contextlib.suppress(OSError):
                    client.shutdown(socket.SHUT_RDWR)
            serving = list(self._serving)
        # The record is whole once close returns: the run's reader comes right after.
        deadline = time.monotonic() + 5
        for thread in serving:
            thread.join(timeout=max(0.0, deadline - time.monotonic()))

    def _serve(self, client: socket.socket) -> None:
        client.settimeout(IDLE_TIMEOUT)
        no_delay(client)
        down = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEADERS)
        up: UpstreamConnection | None = None
        try:
            while True:
                request = _next(down, client)
                if not isinstance(request, h11.Request):
                    return
                self.last_activity = time.monotonic()
                refusal = self._refusal(request)
                if refusal is not None:
                    status, reason, probe = refusal
                    _drain(down, client)
                    body = _reply(down, client, status, reason)
                    if self.recorder is not None and not probe:
                        target = request.target.decode("latin-1")
                        method = request.method.decode("latin-1")
                        self.recorder.begin(method, target).refused(status, reason, body)
                    return
                exchange: Exchange | None = None
                if self.recorder is not None:
                    exchange = self.recorder.begin(
                        request.method.decode("latin-1"), request.target.decode("latin-1")
                    )
                if down.they_are_waiting_for_100_continue:
                    client.sendall(
                        down.send(h11.InformationalResponse(status_code=100, headers=[]))
                    )
                if up is None or not up.alive():
                    if up is not None:
                        up.close()
                    try:
                        up = UpstreamConnection(self.upstream.connect())
                    except SandboxError as e:
                        up = None
                        if exchange is not None:
                            exchange.end(complete=False, error=e.message)
                        _drain(down, client)
                        _reply(down, client, 502, f"{e.message} {e.hint}")
                        return
                ok = False
                try:
                    ok = self._forward(request, down, client, up, exchange)
                finally:
                    if exchange is not None:
                        exchange.end(complete=ok, error=None if ok else "broken off")
                if not ok:
                    return
                if down.our_state is h11.DONE and down.their_state is h11.DONE:
                    down.start_next_cycle()
                else:
                    return
                if up.conn.our_state is h11.DONE and up.conn.their_state is h11.DONE:
                    up.conn.start_next_cycle()
                else:
                    up.close()
                    up = None
        except (OSError, h11.ProtocolError):
            return
        finally:
            if up is not None:
                up.close()
            with self._lock:
                self._open.discard(client)
                self._serving.discard(threading.current_thread())
            self.last_activity = time.monotonic()
            with contextlib.suppress(OSError):
                client.shutdown(socket.SHUT_RDWR)
            client.close()

    def _refusal(self, request: h11.Request) -> tuple[int, str, bool] | None:
        """Why a request is answered here and not forwarded (status, reason, is a probe)."""
        target = request.target
        if request.method == b"CONNECT" or not target.startswith(b"/"):
            return (
                403,
                (
                    "The supervisor's model API proxy forwards to its one configured host only; "
                    f"request target {target[:200].decode('latin-1')!r} refused."
                ),
                False,
            )
        hosts = [v for k, v in request.headers if k == b"host"]
        host = hosts[0].decode("latin-1").lower() if len(hosts) == 1 else ""
        name, _, port = host.rpartition(":") if not host.endswith("]") else (host, "", "")
        if not name:
            name, port = host, ""
        if name not in self.names or (port and port != str(self.port)):
            return (
                403,
                (
                    f"Host {host!r} is not this proxy; the supervisor's model API proxy forwards "
                    "to its one configured host only."
                ),
                False,
            )
        framing = [k for k, _ in request.headers if k in (b"content-length", b"transfer-encoding")]
        if len(framing) > 1:
            return (
                400,
                "A request may carry one Content-Length or Transfer-Encoding, not both.",
                False,
            )
        verdict = model_paths.check(
            request.method.decode("latin-1"), target.decode("latin-1"), self.prefix, self.vendor
        )
        if verdict.status is not None:
            return (
                verdict.status,
                f"Refused by the supervisor's proxy: {verdict.reason}.",
                verdict.probe,
            )
        if self.injection.header is not None and not self._carries_placeholder(request):
            return (
                403,
                (
                    "Refused by the supervisor's proxy: the request does not carry this run's "
                    "credential."
                ),
                False,
            )
        return None

    def _carries_placeholder(self, request: h11.Request) -> bool:
        """Whether any of the places a CLI puts its key holds this run's placeholder."""
        offered: list[bytes] = []
        for name, value in request.headers:
            if name in AUTH_HEADERS:
                offered.append(value.removeprefix(b"Bearer ").removeprefix(b"bearer ").strip())
        query = request.target.partition(b"?")[2].decode("latin-1")
        offered += [v.encode("latin-1") for k, v in parse_qsl(query) if k == "key"]
        mine = self.placeholder.encode()
        return any(hmac.compare_digest(value, mine) for value in offered)

    def _forward(
        self,
        request: h11.Request,
        down: h11.Connection,
        client: socket.socket,
        up: UpstreamConnection,
        exchange: Exchange | None = None,
    ) -> bool:
        """One exchange; False when a side broke off (the connection then closes)."""
        target, headers = self._rewrite(request)
        up.send(h11.Request(method=request.method, target=target, headers=headers))
        while True:
            event = _next(down, client)
            if isinstance(event, h11.Data):
                up.send(h11.Data(data=event.data))
                if exchange is not None:
                    exchange.sent(len(event.data))
            elif isinstance(event, h11.EndOfMessage):
                up.send(h11.EndOfMessage())
                break
            else:
                return False
        while True:
            event = _next(up.conn, up.sock)
            self.last_activity = time.monotonic()
            if isinstance(event, h11.InformationalResponse):
                continue  # a 100 Continue is for us; the sandbox got its own
            if isinstance(event, h11.Response):
                kept = [(k, v) for k, v in event.headers if k not in HOP_BY_HOP]
                kept = [(k, v) for k, v in kept if k != b"transfer-encoding"]
                if exchange is not None:
                    exchange.answered(event.status_code, list(event.headers))
                client.sendall(
                    down.send(
                        h11.Response(
                            status_code=event.status_code, headers=kept, reason=event.reason
                        )
                    )
                )
            elif isinstance(event, h11.Data):
                if exchange is not None:
                    exchange.received(event.data)
                client.sendall(down.send(h11.Data(data=event.data)))
            elif isinstance(event, h11.EndOfMessage):
                # The API's answer is whole: so is the record, before the last bytes go down. A
                # CLI that has read its answer may exit before them, and a Unix socket whose
                # reader is gone refuses a write at once (EPIPE) where TCP took it; the exchange
                # was then recorded as broken off, and the witness found no final answer.
                if exchange is not None:
                    exchange.end(complete=True)
                client.sendall(down.send(h11.EndOfMessage()))
                return True
            else:
                return False

    def _rewrite(self, request: h11.Request) -> tuple[bytes, list[tuple[bytes, bytes]]]:
        """The sandbox's credentials out, the real one in, the Host the configured one; answers
        uncompressed, so the record holds the bytes the CLI read."""
        injection = self.injection
        path, _, query = request.target.partition(b"?")
        target = request.target
        in_query = False
        if injection.header is not None:
            pairs = parse_qsl(query.decode("latin-1"), keep_blank_values=True)
            param = injection.query_param
            in_query = param is not None and any(k == param for k, _ in pairs)
            secret_names = {"key", "api_key", "access_token"}
            kept = [(k, v) for k, v in pairs if k not in secret_names]
            if in_query and param is not None:
                kept.append((param, injection.value))
            if len(kept) != len(pairs) or in_query:
                target = path + (b"?" + urlencode(kept).encode("latin-1") if kept else b"")
        headers: list[tuple[bytes, bytes]] = []
        for name, value in request.headers:
            if name in HOP_BY_HOP or name in (b"host", b"accept-encoding"):
                continue
            if injection.header is not None and name in AUTH_HEADERS:
                continue
            headers.append((name, value))
        headers.insert(0, (b"host", self.upstream.host_header))
        headers.append((b"accept-encoding", b"identity"))
        if injection.header is not None and not in_query:
            header = injection.header.lower()
            secret = f"Bearer {injection.value}" if header == "authorization" else injection.value
            headers.append((header.encode(), secret.encode("latin-1")))
        return target, headers


def _tcp_listener(bind: tuple[str, int]) -> socket.socket:
    family = socket.AF_INET6 if ":" in bind[0] else socket.AF_INET
    server = socket.socket(family, socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        server.bind(bind)
    except OSError as e:
        server.close()
        raise SandboxError(
            f"Cannot listen on {bind[0]}:{bind[1]}: {e.strerror}.",
            "Check that the Docker network exists and its bridge is up.",
        ) from e
    server.listen(128)
    return server


def _next(conn: h11.Connection, sock: socket.socket) -> h11.Event | type[h11.PAUSED]:
    while True:
        event = conn.next_event()
        if event is not h11.NEED_DATA:
            return cast("h11.Event | type[h11.PAUSED]", event)
        conn.receive_data(sock.recv(CHUNK))


def _drain(conn: h11.Connection, sock: socket.socket, limit: int = 64 << 20) -> None:
    """Read a refused request's body before answering: closing with unread data would reset
    the connection, and the client would see that instead of the reason."""
    if conn.they_are_waiting_for_100_continue:
        return  # the body was never sent
    seen = 0
    with contextlib.suppress(OSError, h11.ProtocolError):
        while seen < limit:
            event = _next(conn, sock)
            if not isinstance(event, h11.Data):
                return
            seen += len(event.data)


def _reply(conn: h11.Connection, sock: socket.socket, status: int, message: str) -> bytes:
    """An error answer in the shape all three vendors' SDKs read (`error.message`); its body."""
    body = json.dumps(
        {"type": "error", "error": {"type": "proxy_error", "code": status, "message": message}}
    ).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"connection", b"close"),
    ]
    with contextlib.suppress(OSError, h11.LocalProtocolError):
        reason = HTTPStatus(status).phrase.encode()
        sock.sendall(conn.send(h11.Response(status_code=status, headers=headers, reason=reason)))
        sock.sendall(conn.send(h11.Data(data=body)))
        sock.sendall(conn.send(h11.EndOfMessage()))
    return body
