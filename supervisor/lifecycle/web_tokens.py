"""`supervisor web token ...` and the dashboard's sign-in: personal tokens, for a repository's
state (in team mode the shared PostgreSQL database, so every host's dashboard knows them).

Opened like a decision (supervisor/lifecycle/task_state.py): the repository's root and its state,
no configuration, Docker or engine, so a sign-in check costs one query.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from supervisor.lifecycle.task_state import state_db
from supervisor.state import web_tokens

if TYPE_CHECKING:
    from pathlib import Path

    from supervisor.state.web_tokens import WebToken


def create_token(repo: Path, email: str) -> str:
    """A new token for `email`; the plaintext exists only in what this returns."""
    from supervisor.state.store import Store

    email = web_tokens.checked_email(email)  # refused before a database is created for it
    with Store(state_db(repo)) as store:
        return web_tokens.create(store, email)


def described(repo: Path, token: str) -> WebToken | None:
    """What `token` is (its id, whose), without counting a use: for telling its maker its id."""
    from supervisor.state.store import Store

    with Store(state_db(repo)) as store:
        return web_tokens.find(store, token)


def revoke_token(repo: Path, token_id: int) -> None:
    from supervisor.state.store import Store

    with Store(state_db(repo)) as store:
        web_tokens.revoke(store, token_id)


def tokens(repo: Path) -> list[WebToken]:
    from supervisor.state.store import Store

    with Store(state_db(repo)) as store:
        return web_tokens.listing(store)


def identify(repo: Path, token: str) -> str | None:
    """The email `token` signs in, or None. Not a secret comparison in Python: the lookup is by the
    token's digest, so how long it takes says nothing of the token's characters."""
    from supervisor.state.store import Store

    with Store(state_db(repo)) as store:
        return web_tokens.who(store, token)
