"""One run's key for that run alone, on the model paths alone; and what the proxy records.

Against the credential proxy on loopback with a real HTTP upstream (no Docker): a request
without the run's placeholder, or for any path but the vendor's model endpoints, or framed two
ways at once, is answered by the proxy itself and nothing reaches the upstream; every exchange
is recorded per run as the contract between the proxy and the witness says (exchanges.jsonl,
NNNN.body, activity).
"""

from __future__ import annotations

import json
import socket
from typing import TYPE_CHECKING

import pytest
from test_credproxy import ALIAS, PLACEHOLDER, REAL, RecordingApi, post, proxy_for

from supervisor.sandbox import model_paths
from supervisor.sandbox.credproxy import CredentialProxy, Injection, new_placeholder

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path


@pytest.fixture
def api() -> Iterator[RecordingApi]:
    server = RecordingApi()
    yield server
    server.close()


@pytest.fixture
def proxies() -> Iterator[list[CredentialProxy]]:
    opened: list[CredentialProxy] = []
    yield opened
    for proxy in opened:
        proxy.close()


def raw(proxy: CredentialProxy, head: str, body: bytes = b"") -> bytes:
    """Send bytes as written (no client library normalises the target) and read the answer."""
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=10) as sock:
        sock.sendall(head.replace("\n", "\r\n").encode() + b"\r\n" + body)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    return answer


ATTACKS = [
    ("GET", "/admin/keys"),
    ("DELETE", "/v1/files/x"),
    ("POST", "/v1/../../etc/passwd"),
    ("POST", "/v1/messages/../../admin"),
    ("POST", "//evil.example/x"),
    ("POST", "/v1//messages"),
    ("POST", "/v1/messages%2f.."),
    ("POST", "/v1/messages%2F..%2Fadmin"),
    ("POST", "/v1/%2e%2e/admin"),
    ("POST", "/v1\\..\\admin"),
    ("POST", "/v1/messages;x=1"),
    ("POST", "/v1/messages?redirect=http://evil.example"),
    ("POST", "/v1/files"),
    ("GET", "/v1/messages"),
    ("POST", "/v1/responses"),  # another vendor's endpoint on an Anthropic route
]


@pytest.mark.parametrize(("method", "target"), ATTACKS)
def test_only_the_vendors_model_endpoints_are_forwarded(
    api: RecordingApi, proxies: list[CredentialProxy], tmp_path: Path, method: str, target: str
) -> None:
    proxy = proxy_for(f"http://127.0.0.1:{api.port}", Injection("x-api-key", REAL), tmp_path)
    proxy.vendor = "anthropic"
    proxies.append(proxy)
    answer = raw(
        proxy,
        f"{method} {target} HTTP/1.1\nhost: {ALIAS}:{proxy.port}\nx-api-key: {PLACEHOLDER}\n"
        "content-length: 2\n",
        b"{}",
    )
    assert answer.split(b" ")[1] in (b"400", b"403"), answer[:200]
    assert api.seen == [] and api.connections == 0
    (entry,) = [json.loads(line) for line in (tmp_path / "exchanges.jsonl").open()]
    assert entry["refused"] and entry["status"] in (400, 403) and entry["complete"]


def test_a_request_framed_by_both_length_and_chunks_is_refused(
    api: RecordingApi, proxies: list[CredentialProxy]
) -> None:
    """Request smuggling: the proxy and the API could read where the body ends differently."""
    proxy = proxy_for(f"http://127.0.0.1:{api.port}", Injection("x-api-key", REAL))
    proxies.append(proxy)
    answer = raw(
        proxy,
        f"POST /v1/messages HTTP/1.1\nhost: {ALIAS}:{proxy.port}\nx-api-key: {PLACEHOLDER}\n"
        "content-length: 40\ntransfer-encoding: chunked\n",
        b"0\r\n\r\nPOST /admin/keys HTTP/1.1\r\nhost: x\r\n\r\n",
    )
    assert answer.startswith(b"HTTP/1.1 400"), answer[:200]
    assert api.seen == [] and api.connections == 0


@pytest.mark.parametrize(
    "auth",
    [
        {},
        {"x-api-key": new_placeholder()},  # another run's placeholder
        {"x-api-key": REAL},
        {"authorization": "Bearer sk-supervisor-placeholder"},
    ],
    ids=["none", "another-run", "the-key-itself", "old-shared-placeholder"],
)
def test_a_request_without_this_runs_placeholder_is_refused(
    api: RecordingApi, proxies: list[CredentialProxy], auth: dict[str, str]
) -> None:
    proxy = proxy_for(f"http://127.0.0.1:{api.port}", Injection("x-api-key", REAL))
    proxies.append(proxy)
    headers = "".join(f"{k}: {v}\n" for k, v in auth.items())
    answer = raw(
        proxy,
        f"POST /v1/messages HTTP/1.1\nhost: {ALIAS}:{proxy.port}\n{headers}content-length: 2\n",
        b"{}",
    )
    assert answer.startswith(b"HTTP/1.1 403"), answer[:200]
    assert b"this run's credential" in answer
    assert api.seen == [] and api.connections == 0


def test_a_closed_runs_placeholder_opens_nothing(
    api: RecordingApi, proxies: list[CredentialProxy]
) -> None:
    proxy = proxy_for(f"http://127.0.0.1:{api.port}", Injection("x-api-key", REAL))
    assert post(proxy, "/v1/messages")[0] == 200
    proxy.close()
    with pytest.raises(OSError):
        post(proxy, "/v1/messages")
    assert len(api.seen) == 1


def test_the_clis_connectivity_probe_is_answered_here(
    api: RecordingApi, proxies: list[CredentialProxy], tmp_path: Path
) -> None:
    """claude sends `HEAD /` before its first request; 404 is all it needs."""
    proxy = proxy_for(f"http://127.0.0.1:{api.port}", Injection("x-api-key", REAL), tmp_path)
    proxies.append(proxy)
    answer = raw(proxy, f"HEAD / HTTP/1.1\nhost: {ALIAS}:{proxy.port}\n")
    assert answer.startswith(b"HTTP/1.1 404"), answer[:200]
    assert api.connections == 0
    assert not (tmp_path / "exchanges.jsonl").exists()


@pytest.mark.parametrize(
    ("vendor", "prefix", "method", "target"),
    [
        ("anthropic", "", "POST", "/v1/messages?beta=true"),
        ("anthropic", "", "POST", "/v1/messages/count_tokens?beta=true"),
        ("anthropic", "/api/anthropic", "POST", "/api/anthropic/v1/messages"),
        ("openai", "/v1", "POST", "/v1/responses"),
        ("openai", "/v1", "POST", "/v1/chat/completions"),
        ("openai", "/v1", "GET", "/v1/models"),
        ("gemini", "", "POST", "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse"),
        ("gemini", "", "POST", "/v1beta/models/gemini-2.5-flash:generateContent"),
        ("gemini", "", "POST", "/v1beta/models/gemini-2.5-pro:countTokens?key=x"),
    ],
)
def test_the_model_endpoints_the_real_clis_call_pass(
    vendor: str, prefix: str, method: str, target: str
) -> None:
    assert model_paths.check(method, target, prefix, vendor) == model_paths.FORWARD


def test_a_path_outside_the_base_urls_prefix_is_refused() -> None:
    verdict = model_paths.check("POST", "/v1/messages", "/api/anthropic", "anthropic")
    assert verdict.status == 403


def test_each_exchange_is_recorded_with_its_body_and_rate_limit_headers(
    api: RecordingApi, proxies: list[CredentialProxy], tmp_path: Path
) -> None:
    api.answer_headers = {
        "retry-after": "30",
        "anthropic-ratelimit-requests-reset": "2026-11-25T21:00:00Z",
        "x-ratelimit-reset-tokens": "6m0s",
        "set-cookie": "session=secret",
    }
    proxy = proxy_for(f"http://127.0.0.1:{api.port}", Injection("x-api-key", REAL), tmp_path)
    proxies.append(proxy)
    status, body = post(proxy, "/v1/messages?beta=true", body=b"x" * 100)
    assert status == 200
    post(proxy, "/v1/messages", body=b"y")
    proxy.close()  # the run ends: its record is whole
    entries = [json.loads(line) for line in (tmp_path / "exchanges.jsonl").open()]
    assert [e["seq"] for e in entries] == [0, 1]
    first = entries[0]
    assert first["method"] == "POST" and first["path"] == "/v1/messages"
    assert first["query"] == "beta=true" and first["status"] == 200 and first["complete"]
    assert first["request_bytes"] == 100 and first["response_bytes"] == len(body)
    assert first["headers"]["retry-after"] == "30"
    assert first["headers"]["anthropic-ratelimit-requests-reset"] == "2026-11-25T21:00:00Z"
    assert first["headers"]["x-ratelimit-reset-tokens"] == "6m0s"
    assert "set-cookie" not in first["headers"]
    assert first["ended"] >= first["started"]
    assert (tmp_path / first["body"]).read_bytes() == body
    assert first["body"] == "0000.body"
    assert (tmp_path / "activity").exists()
    assert api.seen[0][2]["accept-encoding"] == "identity"  # the record holds plain bytes


def test_a_streamed_answer_is_recorded_as_it_flows(
    api: RecordingApi, proxies: list[CredentialProxy], tmp_path: Path
) -> None:
    import http.client

    proxy = proxy_for(f"http://127.0.0.1:{api.port}", Injection("x-api-key", REAL), tmp_path)
    proxies.append(proxy)
    conn = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=20)
    headers = {"host": f"{ALIAS}:{proxy.port}", "x-api-key": PLACEHOLDER, "x-test-sse": "1"}
    conn.request("POST", "/v1/messages", body=b"{}", headers=headers)
    response = conn.getresponse()
    assert response.readline() + response.readline() + response.readline()
    # The first event is on disk before the answer ends.
    assert (tmp_path / "0000.body").read_bytes() == b"event: one\ndata: {}\n\n"
    assert not (tmp_path / "exchanges.jsonl").exists()
    api.first_event_read.set()
    response.read()
    conn.close()
    proxy.close()
    (entry,) = [json.loads(line) for line in (tmp_path / "exchanges.jsonl").open()]
    assert entry["complete"] and entry["headers"]["content-type"] == "text/event-stream"
    assert (
        tmp_path / "0000.body"
    ).read_bytes() == b"event: one\ndata: {}\n\nevent: two\ndata: {}\n\n"


def test_an_upstream_that_never_answers_is_recorded_with_the_reason(
    proxies: list[CredentialProxy], tmp_path: Path
) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed_port = probe.getsockname()[1]
    proxy = proxy_for(f"http://127.0.0.1:{closed_port}", Injection("x-api-key", REAL), tmp_path)
    proxies.append(proxy)
    assert post(proxy, "/v1/messages")[0] == 502
    (entry,) = [json.loads(line) for line in (tmp_path / "exchanges.jsonl").open()]
    assert entry["status"] is None and not entry["complete"]
    assert "unreachable" in entry["error"]
