"""`supervisor web` as a person starts it: the first line on stdout is the address to open with
its one-time token; beyond loopback it serves only over TLS (a real certificate made by openssl
here, a real TLS handshake) or when told `--insecure-http`, and says so in one line otherwise."""

from __future__ import annotations

import http.client
import re
import shutil
import signal
import ssl
import subprocess
import sys
from typing import TYPE_CHECKING

import pytest
from test_tui import make_repo

if TYPE_CHECKING:
    from pathlib import Path


def _web(repo: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "supervisor", "web", "--repo", str(repo), "--no-open", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _cookie(conn: http.client.HTTPConnection, token: str) -> str:
    """Signs in with the printed token; the session cookie it sets."""
    conn.request("GET", f"/?token={token}")
    answer = conn.getresponse()
    assert answer.status == 303
    return answer.getheader("set-cookie", "")


def _stopped(web: subprocess.Popen[str]) -> None:
    web.send_signal(signal.SIGTERM)
    web.communicate(timeout=30)


def test_the_first_line_is_the_address_with_a_token_that_signs_in(tmp_path: Path) -> None:
    repo, _ = make_repo(tmp_path / "repo")
    web = _web(repo, "--port", "0")
    try:
        assert web.stdout is not None
        url = web.stdout.readline().strip()
        found = re.fullmatch(r"http://127\.0\.0\.1:(\d+)/\?token=([\w-]+)", url)
        assert found, url
        conn = http.client.HTTPConnection("127.0.0.1", int(found[1]), timeout=30)
        assert "HttpOnly" in _cookie(conn, found[2])
    finally:
        _stopped(web)


def test_beyond_loopback_without_tls_it_refuses_in_one_line(tmp_path: Path) -> None:
    repo, _ = make_repo(tmp_path / "repo")
    done = subprocess.run(
        [sys.executable, "-m", "supervisor", "web", "--repo", str(repo), "--host", "192.0.2.7"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stdout == ""
    assert "clear text" in done.stderr
    assert "--tls-cert" in done.stderr and "--insecure-http" in done.stderr
    assert "Traceback" not in done.stderr


def test_over_tls_it_serves_https_and_the_cookie_is_secure(tmp_path: Path) -> None:
    if shutil.which("openssl") is None:
        pytest.skip("openssl not installed")
    repo, _ = make_repo(tmp_path / "repo")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=127.0.0.2", "-addext", "subjectAltName=IP:127.0.0.2",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    web = _web(repo, "--host", "127.0.0.2", "--port", "0", "--tls-cert", str(cert),
               "--tls-key", str(key))  # fmt: skip
    try:
        assert web.stdout is not None
        url = web.stdout.readline().strip()
        found = re.fullmatch(r"https://127\.0\.0\.2:(\d+)/\?token=([\w-]+)", url)
        assert found, url
        trusted = ssl.create_default_context(cafile=str(cert))
        conn = http.client.HTTPSConnection("127.0.0.2", int(found[1]), context=trusted, timeout=30)
        assert "Secure" in _cookie(conn, found[2])
    finally:
        _stopped(web)
