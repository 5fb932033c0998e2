"""What every request must show before the dashboard reads or changes anything.

A dashboard on localhost is reachable by every page the person's browser opens: a hostile page
can post a form to it (CSRF) or point a name of its own at 127.0.0.1 and read the answers (DNS
rebinding). So a request is answered only when its `Host` is the address the server was bound to
(a rebound name is not), and a request that changes something also needs an `Origin` that is
this server and the session's CSRF token. The session cookie is HttpOnly and SameSite=Strict, and
every answer carries a Content-Security-Policy that runs no script but the server's own files.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from starlette.datastructures import Headers
from starlette.responses import PlainTextResponse

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
"""No inline script or style, nothing from elsewhere: text a worker wrote that slipped past the
escaping still could not run."""
HEADERS = (
    (b"content-security-policy", POLICY.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"same-origin"),
    (b"cache-control", b"no-store"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cross-origin-resource-policy", b"same-origin"),
)
"""`Referrer-Policy: same-origin`, not `no-referrer`: under `no-referrer` Chromium sends
`Origin: null` with the page's own form posts, which the Origin check must refuse (the browser
spec found it); a link to elsewhere still carries no referrer."""
SAFE_METHODS = frozenset({"GET", "HEAD"})


@dataclass(frozen=True)
class Bound:
    """Where the server listens, as a browser names it."""

    host: str
    port: int
    tls: bool

    @property
    def origin(self) -> str:
        return f"{'https' if self.tls else 'http'}://{self.authority}"

    @property
    def authority(self) -> str:
        name = f"[{self.host}]" if ":" in self.host else self.host
        return f"{name}:{self.port}"

    def hosts(self) -> frozenset[str]:
        """The `Host` values accepted: the bound address, and `localhost` for a loopback one (a
        name the machine itself resolves, which no page can rebind)."""
        names = {self.authority}
        if self.host in ("127.0.0.1", "::1"):
            names.add(f"localhost:{self.port}")
        return frozenset(names)

    def origins(self) -> frozenset[str]:
        scheme = "https" if self.tls else "http"
        return frozenset(f"{scheme}://{name}" for name in self.hosts())


class Guard:
    """ASGI middleware: refuses a foreign `Host`, and a state-changing request from another
    origin or with none; adds the security headers to every answer."""

    def __init__(self, app: ASGIApp, bound: Bound) -> None:
        self.app, self.bound = app, bound

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        refusal = self.refusal(scope["method"], headers.get("host"), headers.get("origin"))
        if refusal is not None:
            await PlainTextResponse(refusal, status_code=403, headers=dict(_str(HEADERS)))(
                scope, receive, send
            )
            return

        async def secured(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [
                    *(h for h in message.get("headers", []) if h[0] not in _NAMES),
                    *HEADERS,
                ]
            await send(message)

        await self.app(scope, receive, secured)

    def refusal(self, method: str, host: str | None, origin: str | None) -> str | None:
        """Why a request is refused before it is read; None: it may go on."""
        if (host or "").lower() not in self.bound.hosts():
            return (
                f"Refused: this dashboard answers only as {self.bound.authority} (the request "
                "named another host, as a page rebinding a name of its own would)."
            )
        if method not in SAFE_METHODS and (origin or "").lower() not in self.bound.origins():
            return (
                "Refused: a change must come from the dashboard's own page (this request's "
                "Origin was another site's, or missing)."
            )
        return None


_NAMES = frozenset(name for name, _ in HEADERS)


def _str(headers: tuple[tuple[bytes, bytes], ...]) -> list[tuple[str, str]]:
    return [(k.decode(), v.decode()) for k, v in headers]
