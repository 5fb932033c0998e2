"""The credential proxy daemon: one per user, found by the next supervisor, outliving a killed one.

Real processes on loopback (no Docker): the daemon is started on demand by the first client,
found by the next at its socket, keeps a route and a stream in flight relaying after the client
that opened it was SIGKILLed, hands that route back to a resuming client by its placeholder, and
ends itself once it has had nothing to do for SUPERVISOR_PROXYD_IDLE seconds.
"""

from __future__ import annotations

import http.client
import json
import os
import secrets
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from test_credproxy import ALIAS, REAL, RecordingApi

from supervisor.sandbox.credproxy import Injection, new_placeholder
from supervisor.sandbox.proxy_client import ProxyClient, socket_path

if TYPE_CHECKING:
    from collections.abc import Iterator


@pytest.fixture
def api() -> Iterator[RecordingApi]:
    server = RecordingApi()
    yield server
    server.close()


@pytest.fixture(autouse=True)
def own_daemon(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A daemon of this spec's own (its user folder), ending a second after its last use."""
    monkeypatch.setenv("SUPERVISOR_USER_DIR", str(tmp_path / "u"))
    monkeypatch.setenv("SUPERVISOR_PROXYD_IDLE", "1")


def open_route(client: ProxyClient, api: RecordingApi, placeholder: str, **extra: object) -> int:
    answer = client.open_route(
        base_url=f"http://127.0.0.1:{api.port}",
        injection=Injection("x-api-key", REAL),
        placeholder=placeholder,
        vendor="anthropic",
        record_dir=None,
        gateway="127.0.0.1",
        bridge=None,
        **extra,  # type: ignore[arg-type]
    )
    return int(answer["port"])


def ask(port: int, placeholder: str, sse: bool = False) -> http.client.HTTPResponse:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
    headers = {"host": f"{ALIAS}:{port}", "x-api-key": placeholder}
    if sse:
        headers["x-test-sse"] = "1"
    conn.request("POST", "/v1/messages", body=b"{}", headers=headers)
    return conn.getresponse()


def gone(pid: int, within: float = 60) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.1)
    return False


def test_the_first_client_starts_the_daemon_and_the_next_finds_it() -> None:
    first = ProxyClient.connect()
    second = ProxyClient.connect()
    try:
        pid = first.status()["pid"]
        assert second.status()["pid"] == pid != os.getpid()
        path = socket_path()
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
        assert path.name.startswith("v1-")  # an older daemon's socket is never this one
        # Its own session: a signal to the supervisor's process group does not reach it.
        assert os.getsid(pid) != os.getsid(0)
    finally:
        first.close()
        second.close()
    assert gone(pid), "the daemon did not end when idle"


OPENER = """
import json, sys
from supervisor.sandbox.credproxy import Injection
from supervisor.sandbox.proxy_client import ProxyClient
client = ProxyClient.connect()
answer = client.open_route(base_url=sys.argv[1], injection=Injection("x-api-key", sys.argv[2]),
    placeholder=sys.argv[3], vendor="anthropic", record_dir=None, gateway="127.0.0.1",
    bridge=None)
print(json.dumps({"port": answer["port"], "pid": client.status()["pid"]}), flush=True)
sys.stdin.read()
"""


def test_a_route_and_its_stream_outlive_the_supervisor_that_opened_it(
    api: RecordingApi,
) -> None:
    placeholder = new_placeholder()
    supervisor = subprocess.Popen(
        [sys.executable, "-c", OPENER, f"http://127.0.0.1:{api.port}", REAL, placeholder],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert supervisor.stdout is not None
    opened = json.loads(supervisor.stdout.readline())
    port, daemon = opened["port"], opened["pid"]
    stream = ask(port, placeholder, sse=True)  # a model answer in flight
    assert stream.readline() == b"event: one\n"

    supervisor.send_signal(signal.SIGKILL)
    supervisor.wait()

    api.first_event_read.set()
    assert stream.read() == b"data: {}\n\nevent: two\ndata: {}\n\n"  # the stream went on
    answer = ask(port, placeholder)  # and so does the route: the CLI's next request
    assert answer.status == 200 and answer.read()
    assert [h["x-api-key"] for _, _, h in api.seen] == [REAL, REAL]

    resumed = ProxyClient.connect()  # the resuming supervisor re-attaches the adopted run's
    try:
        assert resumed.status()["pid"] == daemon
        assert open_route(resumed, api, placeholder) == port
        resumed.close_route(placeholder)
        with pytest.raises(OSError):
            ask(port, placeholder)
    finally:
        resumed.close()
    assert gone(daemon), "the daemon did not end when idle"


def test_a_route_of_a_killed_supervisor_that_nobody_adopts_ends_after_its_grace(
    api: RecordingApi,
) -> None:
    client = ProxyClient.connect()
    pid = client.status()["pid"]
    placeholder = new_placeholder()
    port = int(
        client.request(
            {
                "op": "open",
                "base_url": f"http://127.0.0.1:{api.port}",
                "injection": {"header": "x-api-key", "value": REAL, "query_param": None},
                "placeholder": placeholder,
                "vendor": "anthropic",
                "gateway": "127.0.0.1",
                "grace": 0.5,
            }
        )["port"]
    )
    client.close()  # as a SIGKILL would: no close of its route
    assert gone(pid), "an orphaned route kept the daemon alive past its grace"
    with pytest.raises(OSError):
        ask(port, placeholder)


def test_a_resume_closes_its_tasks_orphaned_routes_but_those_it_adopts(
    api: RecordingApi,
) -> None:
    """A killed supervisor's routes stay for the containers it left; the next start, resume or
    abandon of that task closes the ones no container is adopted for, at once, and no other
    task's: their listeners (and firewall rules) are not left for the grace time."""
    dead = ProxyClient.connect()
    adopted, orphan, other = new_placeholder(), new_placeholder(), new_placeholder()
    # The daemon is the user's, shared with the specs running beside this one: a task label of
    # this spec's own, so that no other spec's routes count among its orphans.
    repo = f"repo{secrets.token_hex(4)}"
    ports = {
        adopted: open_route(dead, api, adopted, task=f"{repo}-wf1"),
        orphan: open_route(dead, api, orphan, task=f"{repo}-wf1"),
        other: open_route(dead, api, other, task=f"{repo}-wf2"),
    }
    dead.close()  # as a SIGKILL would: no close of its routes

    resuming = ProxyClient.running()
    assert resuming is not None
    try:
        # The daemon learns of the dead client when its control connection's end reaches it,
        # in a thread of its own: asked before that, it rightly sees no orphan yet.
        closed, deadline = 0, time.monotonic() + 10
        while not closed and time.monotonic() < deadline:
            closed = resuming.close_orphans(f"{repo}-wf1", keep={adopted})
            time.sleep(0 if closed else 0.05)
        assert closed == 1
        with pytest.raises(OSError):
            ask(ports[orphan], orphan)
        for kept in (adopted, other):
            assert ask(ports[kept], kept).status == 200
    finally:
        for placeholder in (adopted, other):
            resuming.close_route(placeholder)
        resuming.close()


def test_cleaning_up_starts_no_daemon() -> None:
    assert ProxyClient.running() is None


def test_a_bad_request_on_the_control_socket_is_answered_not_fatal(api: RecordingApi) -> None:
    client = ProxyClient.connect()
    try:
        with pytest.raises(Exception, match=r"bad request|unknown op"):
            client.request({"op": "nonsense"})
        with pytest.raises(Exception, match="unreachable"):
            client.open_route(
                base_url="http://127.0.0.1:1",
                injection=Injection(),
                placeholder=new_placeholder(),
                vendor=None,
                record_dir=None,
                gateway="127.0.0.1",
                bridge=None,
            )
        assert client.status()["routes"] == {}
    finally:
        client.close()
