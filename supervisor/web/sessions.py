"""Who is signed in: a one-time login token printed by `supervisor web`, personal tokens in
team mode, and the sessions they open.

The printed token works once, as the URL a person opens: it becomes a session cookie, and a
link copied from the terminal's scrollback later (or leaked into a browser's history) signs
nobody in. A session is held by the server only (a restart signs everyone out) and carries its
own CSRF token, which every form repeats.
"""

from __future__ import annotations

import hmac
import secrets
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable

COOKIE = "supervisor_session"
LIFETIME = 12 * 3600.0
"""Seconds a session lasts: a working day, then the person signs in again."""


@dataclass(frozen=True)
class Session:
    id: str
    who: str | None
    """The person's identity for approvals; None: the repository's git user, as on the command
    line (the local dashboard's one person)."""
    csrf: str
    started: float


@dataclass
class Sessions:
    """The login token and the open sessions of one server."""

    owner: str | None = None
    """Whom the printed token signs in (None: git's user, per repository)."""
    personal: Callable[[str], str | None] | None = None
    """Team mode: the email a personal token belongs to (supervisor.lifecycle.web_tokens)."""
    login_token: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    _open: dict[str, Session] = field(default_factory=dict)
    _used: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def sign_in(self, token: str) -> Session | None:
        """A new session for a valid token; None for anything else (a used login token too)."""
        token = token.strip()
        if not token or len(token) > 200:
            return None
        with self._lock:
            if not self._used and hmac.compare_digest(token, self.login_token):
                self._used = True
                return self._opened(self.owner)
        if self.personal is not None and token.startswith("svw_"):
            who = self.personal(token)
            if who:
                with self._lock:
                    return self._opened(who)
        return None

    def _opened(self, who: str | None) -> Session:
        session = Session(secrets.token_urlsafe(32), who, secrets.token_urlsafe(32), time.time())
        self._open[session.id] = session
        return session

    def of(self, cookie: str | None) -> Session | None:
        """The session a cookie names, while it lasts."""
        if not cookie:
            return None
        with self._lock:
            session = self._open.get(cookie)
            if session is not None and time.time() - session.started > LIFETIME:
                del self._open[cookie]
                return None
            return session

    def sign_out(self, cookie: str | None) -> None:
        with self._lock:
            self._open.pop(cookie or "", None)


def csrf_matches(session: Session, given: str | None) -> bool:
    return bool(given) and hmac.compare_digest(session.csrf, str(given))
