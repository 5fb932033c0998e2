"""`supervisor web`: checks where it may listen, prints the address to open, serves.

Loopback only unless `--host` names another address, and then only over TLS or with an explicit
`--insecure-http`: a dashboard that approves changes must not be reachable in clear text by
accident. The first line on stdout is the URL with a one-time login token, as Jupyter prints
its own; nothing else is printed there, so a script can read it.
"""

from __future__ import annotations

import ipaddress
import socket
import sys
import webbrowser
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from supervisor.core.errors import SupervisorError, UsageError

if TYPE_CHECKING:
    from collections.abc import Callable

    from supervisor.web.dashboard import Dashboard


class WebOptionError(UsageError):
    """`supervisor web` was asked to listen where it must not, or how it cannot."""


@dataclass(frozen=True)
class Options:
    repo: Path
    host: str = "127.0.0.1"
    port: int = 8765
    open_browser: bool = True
    tls_cert: Path | None = None
    tls_key: Path | None = None
    insecure_http: bool = False


def loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check(options: Options) -> None:
    """Refuse an address or TLS setting that would serve the dashboard unsafely."""
    host = options.host
    if host in ("0.0.0.0", "::", ""):
        raise WebOptionError(
            f"--host {host or '(empty)'} would answer on every address, under any name.",
            "Give the one name or address people will open (it is also the only `Host` the "
            "dashboard answers to), e.g. --host myhost.example.com.",
        )
    if (options.tls_cert is None) != (options.tls_key is None):
        raise WebOptionError(
            "TLS needs both a certificate and its key.",
            "Give --tls-cert FILE and --tls-key FILE together.",
        )
    for given in (options.tls_cert, options.tls_key):
        if given is not None and not given.is_file():
            raise WebOptionError(f"No such file: {given}.", "Name the PEM file itself.")
    if not loopback(host) and options.tls_cert is None and not options.insecure_http:
        raise WebOptionError(
            f"--host {host} serves beyond this machine, and without TLS the session cookie and "
            "every approval would cross the network in clear text.",
            "Give --tls-cert and --tls-key, or (on a network you trust) --insecure-http.",
        )
    if not 0 <= options.port <= 65535:
        raise WebOptionError(f"No such port: {options.port}.", "Give a port from 1 to 65535.")


def listening(options: Options) -> socket.socket:
    """The bound socket: bound before the address is printed, so that it is true (port 0 picks
    a free one)."""
    family = socket.AF_INET6 if ":" in options.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((options.host, options.port))
    except OSError as e:
        sock.close()
        raise WebOptionError(
            f"Cannot listen on {options.host}:{options.port}: {e.strerror}.",
            "Choose another --port (0 picks a free one), or stop what holds that one.",
        ) from e
    sock.listen(128)
    return sock


def dashboard_for(options: Options, port: int) -> Dashboard:
    from supervisor.lifecycle.task_state import git_email
    from supervisor.state.location import state_url
    from supervisor.web.board import Board
    from supervisor.web.dashboard import Dashboard
    from supervisor.web.guard import Bound
    from supervisor.web.sessions import Sessions

    bound = Bound(options.host, port, options.tls_cert is not None)
    repo = options.repo.resolve()
    if state_url():
        from supervisor.lifecycle.web_tokens import identify

        sessions = Sessions(owner=git_email(repo), personal=lambda token: identify(repo, token))
        return Dashboard(bound, sessions, Board(fixed=[repo]), team=True)
    return Dashboard(bound, Sessions(), Board(extra=[repo] if _has_state(repo) else []))


def _has_state(repo: Path) -> bool:
    from supervisor.lifecycle.task_state import state_db

    try:
        return state_db(repo).is_file()
    except SupervisorError:  # not a repository: the board shows the registry's
        return False


def serve(options: Options, say: Callable[[str], None] | None = None) -> None:
    import uvicorn

    from supervisor.web.app import create_app

    check(options)
    sock = listening(options)
    dashboard = dashboard_for(options, sock.getsockname()[1])
    url = f"{dashboard.bound.origin}/?token={dashboard.sessions.login_token}"
    (say or _first_line)(url)
    if options.open_browser:
        webbrowser.open(url)
    config = uvicorn.Config(
        create_app(dashboard),
        log_level="warning",
        access_log=False,  # the first request's address carries the login token
        timeout_graceful_shutdown=2,
        ssl_certfile=str(options.tls_cert) if options.tls_cert else None,
        ssl_keyfile=str(options.tls_key) if options.tls_key else None,
        server_header=False,
    )
    uvicorn.Server(config).run(sockets=[sock])


def _first_line(url: str) -> None:
    sys.stdout.write(url + "\n")
    sys.stdout.flush()
