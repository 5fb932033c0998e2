"""Personal sign-in tokens for `supervisor web` in team mode, kept in the state database.

A team shares one PostgreSQL state, so who may sign in to its dashboard is team state too: a
token is made for one person (an email), shown to them once, and only its sha256 digest is
stored. A copy of the database, a backup or a `SELECT *` then signs nobody in; a token is found
by its digest alone (one unique index), and it stops working when it is revoked, not deleted, so
the listing still says who had one and when it was last used. The tokens are 256 random bits,
so a plain (unsalted, fast) hash is enough: there is nothing to guess.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlalchemy import insert, select, update

from supervisor.core.errors import StateError, UsageError
from supervisor.state import schema as t
from supervisor.state.records import now

if TYPE_CHECKING:
    from datetime import datetime

    from supervisor.state.store import Store

PREFIX = "svw_"
"""Names what a token is where it turns up (a shell history, a secret scanner's rule)."""
MAX_EMAIL = 254
MAX_TOKEN = 200
"""Longer than any token `create` makes: a longer one is refused before it is hashed."""


@dataclass(frozen=True)
class WebToken:
    """A token as a listing shows it: who and when, never its digest."""

    id: int
    email: str
    created_at: datetime
    revoked_at: datetime | None
    last_used_at: datetime | None


def digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def checked_email(email: str) -> str:
    """`email` stripped, or the reason it cannot name a person: it is shown in the dashboard and
    in the listing, so no control characters (they would rewrite a terminal's line)."""
    email = email.strip()
    if (
        not email
        or "@" not in email
        or len(email) > MAX_EMAIL
        or any(ord(c) < 32 or ord(c) == 127 or c.isspace() for c in email)
    ):
        raise UsageError(
            f"{email[:80]!r} is not an email address a token can be made for.",
            "Give the person's email, e.g. --as alice@example.com (at most 254 characters, "
            "no spaces or control characters).",
        )
    return email


def create(store: Store, email: str) -> str:
    """A new token for `email`: returned once, stored only as its digest."""
    email = checked_email(email)
    token = PREFIX + secrets.token_urlsafe(32)
    with store.engine.begin() as conn:
        conn.execute(
            insert(t.web_tokens).values(email=email, digest=digest(token), created_at=now())
        )
    return token


def who(store: Store, token: str) -> str | None:
    """The email of the person `token` signs in, or None (unknown, revoked, not a token at all);
    a use is recorded as its `last_used_at`."""
    if not token.startswith(PREFIX) or len(token) > MAX_TOKEN:
        return None
    tokens = t.web_tokens
    with store.engine.begin() as conn:
        row = conn.execute(
            select(tokens.c.id, tokens.c.email).where(
                tokens.c.digest == digest(token), tokens.c.revoked_at.is_(None)
            )
        ).first()
        if row is None:
            return None
        conn.execute(update(tokens).where(tokens.c.id == row.id).values(last_used_at=now()))
    return str(row.email)


def find(store: Store, token: str) -> WebToken | None:
    """The token `token` is, revoked or not, without counting it as a use: what `create`
    made, so that its maker can be told its id."""
    if not token.startswith(PREFIX) or len(token) > MAX_TOKEN:
        return None
    with store.engine.connect() as conn:
        row = conn.execute(select(*_SHOWN).where(t.web_tokens.c.digest == digest(token))).first()
    return None if row is None else WebToken(*row)


def revoke(store: Store, token_id: int) -> None:
    """Token `token_id` signs nobody in from now on; revoking a revoked one changes nothing."""
    tokens = t.web_tokens
    with store.engine.begin() as conn:
        found = conn.execute(select(tokens.c.id).where(tokens.c.id == token_id)).first()
        if found is None:
            raise StateError(
                f"There is no web token {token_id}.",
                "Run `supervisor web token list` to see the tokens and their ids.",
            )
        conn.execute(
            update(tokens)
            .where(tokens.c.id == token_id, tokens.c.revoked_at.is_(None))
            .values(revoked_at=now())
        )


def listing(store: Store) -> list[WebToken]:
    """Every token, revoked ones too, oldest first."""
    with store.engine.connect() as conn:
        rows = conn.execute(select(*_SHOWN).order_by(t.web_tokens.c.id)).all()
    return [WebToken(*row) for row in rows]


_SHOWN = [
    t.web_tokens.c.id,
    t.web_tokens.c.email,
    t.web_tokens.c.created_at,
    t.web_tokens.c.revoked_at,
    t.web_tokens.c.last_used_at,
]
"""A `WebToken`'s columns, in its fields' order: everything but the digest."""
