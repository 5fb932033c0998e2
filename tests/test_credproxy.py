"""The credential-adding proxy on the host, against real HTTP servers on loopback (no Docker).

What it promises: the upstream sees the real key and never the sandbox's; nothing in a request
(Host header, absolute URL, CONNECT) sends it anywhere but the one configured host; bodies of
several MB go through and SSE answers arrive as they are written; a host it cannot reach, or whose
certificate does not match, is named in the error.
"""

from __future__ import annotations

import hashlib
import http.client
import http.server
import json
import re
import shutil
import socket
import ssl
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import pytest

from supervisor.core.config import CliSettings
from supervisor.core.errors import SandboxError
from supervisor.guard import credentials
from supervisor.sandbox.credproxy import CredentialProxy, Injection, Upstream, new_placeholder

if TYPE_CHECKING:
    from collections.abc import Iterator

REAL = "sk-ant-real-key-0123456789"
ALIAS = "model-api.supervisor.internal"
PLACEHOLDER = new_placeholder()  # the run's own stand-in key


class RecordingApi:
    """A model API stand-in that records what reached it."""

    def __init__(self, tls: ssl.SSLContext | None = None) -> None:
        self.seen: list[tuple[str, str, dict[str, str]]] = []
        self.answer_headers: dict[str, str] = {}
        self.connections = 0
        self.first_event_read = threading.Event()
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:
                outer.connections += 1
                super().setup()

            def log_message(self, *args: object) -> None:
                return

            def do_POST(self) -> None:
                outer.seen.append(
                    (self.command, self.path, {k.lower(): v for k, v in self.headers.items()})
                )
                length = int(self.headers.get("content-length") or 0)
                digest = hashlib.sha256()
                remaining = length
                while remaining:
                    chunk = self.rfile.read(min(remaining, 1 << 20))
                    digest.update(chunk)
                    remaining -= len(chunk)
                if self.headers.get("x-test-sse"):
                    self.send_response(200)
                    self.send_header("content-type", "text/event-stream")
                    self.send_header("connection", "close")  # close-delimited, as the API
                    self.end_headers()
                    self.wfile.write(b"event: one\ndata: {}\n\n")
                    self.wfile.flush()
                    # The rest only once the client has read the first event: a buffering proxy
                    # would hold the first event back and this would time out.
                    outer.first_event_read.wait(10)
                    self.wfile.write(b"event: two\ndata: {}\n\n")
                    self.close_connection = True
                    return
                data = json.dumps({"length": length, "sha256": digest.hexdigest()}).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for name, value in outer.answer_headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        if tls is not None:
            self.server.socket = tls.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def api() -> Iterator[RecordingApi]:
    server = RecordingApi()
    yield server
    server.close()


def proxy_for(
    base_url: str, injection: Injection, record_dir: Path | None = None
) -> CredentialProxy:
    return CredentialProxy(
        Upstream.from_url(base_url),
        injection,
        ("127.0.0.1", 0),
        [ALIAS],
        placeholder=PLACEHOLDER,
        prefix=urlsplit(base_url).path,
        record_dir=record_dir,
    )


@pytest.fixture
def proxies() -> Iterator[list[CredentialProxy]]:
    opened: list[CredentialProxy] = []
    yield opened
    for proxy in opened:
        proxy.close()


def post(
    proxy: CredentialProxy,
    path: str,
    body: bytes = b"{}",
    headers: dict[str, str] | None = None,
    conn: http.client.HTTPConnection | None = None,
) -> tuple[int, bytes]:
    conn = conn or http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=20)
    sent = {"host": f"{ALIAS}:{proxy.port}", "x-api-key": PLACEHOLDER, **(headers or {})}
    conn.request("POST", path, body=body, headers=sent)
    response = conn.getresponse()
    return response.status, response.read()


def test_the_api_gets_the_real_key_and_never_the_sandboxs(
    api: RecordingApi, proxies: list[CredentialProxy]
) -> None:
    proxy = proxy_for(f"http://127.0.0.1:{api.port}", Injection("x-api-key", REAL))
    proxies.append(proxy)
    status, _ = post(
        proxy,
        "/v1/messages?beta=true",
        headers={
            "x-api-key": PLACEHOLDER,
            "authorization": "Bearer stolen",
            "anthropic-version": "1",
        },
    )
    assert status == 200
    _, path, headers = api.seen[-1]
    assert path == "/v1/messages?beta=true"
    assert headers["x-api-key"] == REAL
    assert "authorization" not in headers
    assert headers["host"] == f"127.0.0.1:{api.port}"  # the configured host, not the alias
    assert headers["anthropic-version"] == "1"


def test_each_vendors_key_goes_where_its_api_reads_it(
    api: RecordingApi, proxies: list[CredentialProxy]
) -> None:
    base = f"http://127.0.0.1:{api.port}"
    bearer = proxy_for(base, credentials.injection_for("codex", "OPENAI_API_KEY", REAL))
    token = proxy_for(base, credentials.injection_for("claude", "ANTHROPIC_AUTH_TOKEN", REAL))
    gemini = proxy_for(base, credentials.injection_for("gemini", "GEMINI_API_KEY", REAL))
    proxies.extend([bearer, token, gemini])

    post(bearer, "/v1/responses", headers={"authorization": f"Bearer {PLACEHOLDER}"})
    assert api.seen[-1][2]["authorization"] == f"Bearer {REAL}"
    post(token, "/v1/messages", headers={"authorization": f"Bearer {PLACEHOLDER}"})
    assert api.seen[-1][2]["authorization"] == f"Bearer {REAL}"
    assert "x-api-key" not in api.seen[-1][2]
    post(gemini, "/v1beta/models/m:generateContent", headers={"x-goog-api-key": PLACEHOLDER})
    assert api.seen[-1][2]["x-goog-api-key"] == REAL
    post(gemini, f"/v1beta/models/m:streamGenerateContent?alt=sse&key={PLACEHOLDER}")
    _, path, headers = api.seen[-1]
    assert path == f"/v1beta/models/m:streamGenerateContent?alt=sse&key={REAL}"
    assert "x-goog-api-key" not in headers


def test_login_file_mode_passes_the_clis_own_auth_through(
    api: RecordingApi, proxies: list[CredentialProxy]
) -> None:
    proxy = proxy_for(f"http://127.0.0.1:{api.port}", Injection())
    proxies.append(proxy)
    post(proxy, "/v1/messages", headers={"authorization": "Bearer oauth-token-from-login"})
    assert api.seen[-1][2]["authorization"] == "Bearer oauth-token-from-login"


def test_a_key_in_the_environment_reaches_the_sandbox_as_a_placeholder_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", REAL)
    found = credentials.collect(
        "claude",
        CliSettings(base_url="https://api.anthropic.com", credential_env=["ANTHROPIC_API_KEY"]),
    )
    assert found.env == {"ANTHROPIC_API_KEY": found.placeholder}
    assert re.fullmatch(r"sk-supervisor-[0-9a-f]{32}", found.placeholder)
    again = credentials.collect(
        "claude",
        CliSettings(base_url="https://api.anthropic.com", credential_env=["ANTHROPIC_API_KEY"]),
    )
    assert again.placeholder != found.placeholder  # each run its own
    assert found.injection.value == REAL and found.mode == "proxy-injected key"
    assert REAL not in repr(found.injection)


@pytest.mark.parametrize(
    ("target", "host"),
    [
        ("/v1/messages", "evil.example.com"),
        ("/v1/messages", "127.0.0.1"),
        ("http://evil.example.com/v1/messages", ALIAS),
        ("https://evil.example.com/v1/messages", "evil.example.com"),
        ("evil.example.com:443", "evil.example.com:443"),
    ],
)
def test_a_forged_host_or_absolute_url_is_refused_and_nothing_is_forwarded(
    api: RecordingApi, proxies: list[CredentialProxy], target: str, host: str
) -> None:
    proxy = proxy_for(f"http://127.0.0.1:{api.port}", Injection("x-api-key", REAL))
    proxies.append(proxy)
    method = "CONNECT" if not target.startswith(("/", "http")) else "POST"
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=10) as sock:
        sock.sendall(
            f"{method} {target} HTTP/1.1\r\nhost: {host}\r\nx-api-key: {PLACEHOLDER}\r\n"
            "content-length: 2\r\n\r\n{}".encode()
        )
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 403"), answer[:200]
    assert b"one configured host" in answer
    assert api.seen == [] and api.connections == 0


def test_a_body_of_several_megabytes_arrives_whole(
    api: RecordingApi, proxies: list[CredentialProxy]
) -> None:
    proxy = proxy_for(f"http://127.0.0.1:{api.port}", Injection("x-api-key", REAL))
    proxies.append(proxy)
    body = (b"0123456789abcdef" * 65536) * 8  # 8 MiB
    status, answer = post(proxy, "/v1/messages", body=body)
    assert status == 200
    assert json.loads(answer) == {"length": len(body), "sha256": hashlib.sha256(body).hexdigest()}


def test_a_client_that_waits_for_100_continue_gets_it_and_then_its_answer(
    api: RecordingApi, proxies: list[CredentialProxy]
) -> None:
    """curl sends `Expect: 100-continue` before a large body and holds the body back until the
    proxy answers `100 Continue` (or a second passes)."""
    proxy = proxy_for(f"http://127.0.0.1:{api.port}", Injection("x-api-key", REAL))
    proxies.append(proxy)
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=10) as sock:
        sock.sendall(
            f"POST /v1/messages HTTP/1.1\r\nhost: {ALIAS}:{proxy.port}\r\n"
            f"x-api-key: {PLACEHOLDER}\r\nexpect: 100-continue\r\ncontent-length: 2\r\n"
            "connection: close\r\n\r\n".encode()
        )
        interim = sock.recv(65536)
        assert interim.startswith(b"HTTP/1.1 100 "), interim[:200]
        sock.sendall(b"{}")
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 200"), answer[:200]
    assert api.seen[-1][2]["x-api-key"] == REAL


def test_requests_on_one_connection_are_kept_alive(
    api: RecordingApi, proxies: list[CredentialProxy]
) -> None:
    proxy = proxy_for(f"http://127.0.0.1:{api.port}", Injection("x-api-key", REAL))
    proxies.append(proxy)
    conn = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=20)
    for i in range(5):
        assert post(proxy, "/v1/messages", body=b"x" * i, conn=conn)[0] == 200
    assert len(api.seen) == 5 and api.connections == 1


def test_a_streamed_answer_passes_through_unbuffered(
    api: RecordingApi, proxies: list[CredentialProxy]
) -> None:
    proxy = proxy_for(f"http://127.0.0.1:{api.port}", Injection("x-api-key", REAL))
    proxies.append(proxy)
    conn = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=20)
    sse = {"host": f"{ALIAS}:{proxy.port}", "x-api-key": PLACEHOLDER, "x-test-sse": "1"}
    conn.request("POST", "/v1/messages", body=b"{}", headers=sse)
    response = conn.getresponse()
    assert response.status == 200
    started = time.monotonic()
    first = response.readline() + response.readline() + response.readline()
    assert first == b"event: one\ndata: {}\n\n"
    assert time.monotonic() - started < 5
    api.first_event_read.set()
    assert response.read() == b"event: two\ndata: {}\n\n"


def test_an_answer_the_api_finished_is_recorded_whole_when_the_cli_hangs_up_before_its_end(
    tmp_path: Path,
) -> None:
    """A CLI exits once it has read its answer's last event, before the end of the message
    reaches it; on a run's Unix socket (a networkless worker's route) the proxy's last write
    then fails at once. The record, which the witness reads the answer from, must still hold a
    finished exchange: found on the real sandbox as `the API gave no final answer`."""
    hung_up = threading.Event()
    with socket.socket() as upstream:
        upstream.bind(("127.0.0.1", 0))
        upstream.listen(1)

        def answer() -> None:
            conn, _ = upstream.accept()
            with conn:
                request = b""
                while not request.endswith(b"\r\n\r\n{}"):  # all of it: unread bytes at the
                    request += conn.recv(65536)  # close would reset the connection instead
                conn.sendall(
                    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                    b"connection: close\r\n\r\nevent: done\ndata: {}\n\n"
                )
                hung_up.wait(10)  # the message ends (close-delimited) after the CLI is gone

        threading.Thread(target=answer, daemon=True).start()
        folder = Path(tempfile.mkdtemp(prefix="sv-"))
        record = tmp_path / "record"
        record.mkdir()
        proxy = CredentialProxy(
            Upstream.from_url(f"http://127.0.0.1:{upstream.getsockname()[1]}"),
            Injection("x-api-key", REAL),
            folder / "api",
            [ALIAS],
            placeholder=PLACEHOLDER,
            record_dir=record,
        )
        try:
            with socket.socket(socket.AF_UNIX) as cli:
                cli.connect(str(folder / "api"))
                cli.sendall(
                    f"POST /v1/messages HTTP/1.1\r\nhost: {ALIAS}\r\n"
                    f"x-api-key: {PLACEHOLDER}\r\ncontent-length: 2\r\n\r\n{{}}".encode()
                )
                read = b""
                while b"event: done" not in read:
                    read += cli.recv(65536)
            hung_up.set()
        finally:
            proxy.close()  # the record is whole once it returns
            shutil.rmtree(folder, ignore_errors=True)
    [entry] = [json.loads(line) for line in (record / "exchanges.jsonl").read_text().splitlines()]
    assert entry["status"] == 200 and entry["complete"] is True, entry
    assert (record / entry["body"]).read_bytes() == b"event: done\ndata: {}\n\n"


def test_an_unreachable_api_host_is_named(proxies: list[CredentialProxy]) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed_port = probe.getsockname()[1]
    with pytest.raises(SandboxError, match=f"127.0.0.1:{closed_port} is unreachable") as info:
        Upstream.from_url(f"http://127.0.0.1:{closed_port}/v1").connect()
    assert "base_url" in info.value.hint
    with pytest.raises(SandboxError, match=r"no-such-host\.invalid"):
        Upstream.from_url("https://no-such-host.invalid").connect(timeout=5)
    proxy = proxy_for(f"http://127.0.0.1:{closed_port}", Injection("x-api-key", REAL))
    proxies.append(proxy)
    status, answer = post(proxy, "/v1/messages")
    assert status == 502
    assert f"127.0.0.1:{closed_port} is unreachable" in json.loads(answer)["error"]["message"]


@pytest.fixture
def tls_api(tmp_path: Path) -> Iterator[tuple[RecordingApi, Path]]:
    """An https API with a certificate for `localhost`, signed by a CA of the test's own."""
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-keyout", str(key), "-out", str(cert), "-subj", "/CN=localhost",
         "-addext", "subjectAltName=DNS:localhost"],
        check=True, capture_output=True,
    )  # fmt: skip
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server = RecordingApi(tls=context)
    yield server, cert
    server.close()


def test_https_upstreams_are_verified_with_the_extra_ca_bundle(
    tls_api: tuple[RecordingApi, Path],
    proxies: list[CredentialProxy],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    api, cert = tls_api
    untrusted = proxy_for(f"https://localhost:{api.port}", Injection("x-api-key", REAL))
    proxies.append(untrusted)
    status, answer = post(untrusted, "/v1/messages")
    assert status == 502 and b"SUPERVISOR_EXTRA_CA_BUNDLE" in answer
    assert api.seen == []  # no key went to a server whose certificate was not checked

    monkeypatch.setenv("SUPERVISOR_EXTRA_CA_BUNDLE", str(cert))
    trusted = proxy_for(f"https://localhost:{api.port}", Injection("x-api-key", REAL))
    proxies.append(trusted)
    assert post(trusted, "/v1/messages")[0] == 200
    assert api.seen[-1][2]["x-api-key"] == REAL

    # The same server under a name its certificate does not carry: refused.
    wrong_name = proxy_for(f"https://127.0.0.1:{api.port}", Injection("x-api-key", REAL))
    proxies.append(wrong_name)
    status, answer = post(wrong_name, "/v1/messages")
    assert status == 502 and b"127.0.0.1" in answer
    assert len(api.seen) == 1
