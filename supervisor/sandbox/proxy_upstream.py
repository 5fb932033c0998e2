"""The credential proxy's own side of each exchange: its connection to the one configured model API
host.

Apart from credproxy.py, which reads what the sandbox sends (what is refused, which credentials
are dropped and which added), because this side trusts nothing the sandbox said: the host, port
and scheme come from the configured base URL alone, TLS verifies the certificate chain and the
host name (with the user's extra CA bundle, behind an intercepting proxy), and a kept-alive
connection the API closed meanwhile is replaced before a request is half-sent on it.
"""

from __future__ import annotations

import contextlib
import os
import select
import socket
import ssl
from dataclasses import dataclass
from urllib.parse import urlsplit

import h11

from supervisor.core.errors import SandboxError

CONNECT_TIMEOUT = 15.0
IDLE_TIMEOUT = 900.0  # a model may think for minutes before the first byte of a long answer
MAX_HEADERS = 256 * 1024


@dataclass(frozen=True)
class Upstream:
    scheme: str
    host: str
    port: int
    ca_bundle: str | None = None
    """SUPERVISOR_EXTRA_CA_BUNDLE as the supervisor that opened the route saw it: the daemon
    serving it may have been started by another one."""

    @classmethod
    def from_url(cls, base_url: str, ca_bundle: str | None = None) -> Upstream:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise SandboxError(
                f"Model API URL '{base_url}' is not an http(s) URL.",
                "Set `base_url` for the CLI in your config to a full http(s) URL.",
            )
        default = 443 if parts.scheme == "https" else 80
        return cls(parts.scheme, parts.hostname, parts.port or default, ca_bundle)

    @property
    def host_header(self) -> bytes:
        default = 443 if self.scheme == "https" else 80
        host = f"[{self.host}]" if ":" in self.host else self.host
        return (host if self.port == default else f"{host}:{self.port}").encode()

    def connect(self, timeout: float = CONNECT_TIMEOUT) -> socket.socket:
        """A fresh connection; TLS verifies the certificate chain and the host name."""
        try:
            sock = socket.create_connection((self.host, self.port), timeout=timeout)
        except OSError as e:
            raise SandboxError(
                f"The model API host {self.host}:{self.port} is unreachable: {e.strerror or e}.",
                "Check `base_url` for this CLI in your config, and that this machine can reach "
                "that host (DNS, firewall, proxy).",
            ) from e
        no_delay(sock)
        if self.scheme == "https":
            try:
                context = tls_context(self.ca_bundle)
                sock = context.wrap_socket(sock, server_hostname=self.host)
            except (OSError, ssl.SSLError) as e:
                sock.close()
                raise SandboxError(
                    f"TLS to the model API host {self.host}:{self.port} failed: {e}.",
                    "Behind a TLS-intercepting proxy set SUPERVISOR_EXTRA_CA_BUNDLE (or "
                    "SSL_CERT_FILE) to its CA bundle; otherwise check `base_url`.",
                ) from e
        sock.settimeout(IDLE_TIMEOUT)
        return sock


def tls_context(extra: str | None = None) -> ssl.SSLContext:
    """The system trust store (OpenSSL honours SSL_CERT_FILE / SSL_CERT_DIR) plus `extra` or
    SUPERVISOR_EXTRA_CA_BUNDLE; hostname checking on, HTTP/1.1 only."""
    context = ssl.create_default_context()
    extra = extra or os.environ.get("SUPERVISOR_EXTRA_CA_BUNDLE")
    if extra:
        context.load_verify_locations(cafile=extra)
    context.set_alpn_protocols(["http/1.1"])
    return context


class UpstreamConnection:
    """One kept-alive HTTP/1.1 connection to the API host, with its h11 state."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.conn = h11.Connection(h11.CLIENT, max_incomplete_event_size=MAX_HEADERS)

    def send(self, event: h11.Event) -> None:
        data = self.conn.send(event)
        if data:
            self.sock.sendall(data)

    def alive(self) -> bool:
        """A kept-alive connection the server closed meanwhile reads as ready (EOF); a request on
        it would fail half-sent, so such a connection is replaced before use."""
        if self.conn.our_state is not h11.IDLE:
            return False
        try:
            readable, _, _ = select.select([self.sock], [], [], 0)
        except (OSError, ValueError):
            return False
        return not readable

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()


def no_delay(sock: socket.socket) -> None:
    """Headers and each SSE event go out as written: Nagle's algorithm would hold a small write
    back until the previous one is acknowledged, and delayed ACKs make that up to 40 ms."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
