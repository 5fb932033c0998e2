"""Personal sign-in tokens for `supervisor web` (supervisor/state/web_tokens.py, its lifecycle and
its `web token` commands): a token is shown once, only its digest is stored, and a revoked,
unknown or malformed one signs nobody in.
"""

from __future__ import annotations

import hashlib
import re
import sqlite3
from typing import TYPE_CHECKING

import pytest
from typer.testing import CliRunner

from supervisor.cli.web_tokens import token_app
from supervisor.core.errors import StateError, UsageError
from supervisor.lifecycle import web_tokens as lifecycle
from supervisor.lifecycle.demo import make_demo_repo
from supervisor.state import web_tokens
from supervisor.state.store import Store

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with Store(tmp_path / "state.db") as opened:
        yield opened


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SUPERVISOR_USER_DIR", str(tmp_path / "user"))
    return make_demo_repo(tmp_path / "repo")


def test_a_new_token_signs_in_the_person_it_was_made_for(store: Store) -> None:
    token = web_tokens.create(store, "alice@example.com")
    assert token.startswith("svw_") and len(token) > 40
    assert web_tokens.who(store, token) == "alice@example.com"
    assert web_tokens.create(store, "alice@example.com") != token  # each one is new


def test_only_the_tokens_digest_is_stored(tmp_path: Path, store: Store) -> None:
    token = web_tokens.create(store, "alice@example.com")
    store.close()
    conn = sqlite3.connect(tmp_path / "state.db")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    stored = conn.execute("SELECT email, digest FROM web_tokens").fetchall()
    conn.close()
    assert stored == [("alice@example.com", hashlib.sha256(token.encode()).hexdigest())]
    secret = token.removeprefix("svw_").encode()
    for path in tmp_path.iterdir():  # the database and anything beside it (WAL, journal)
        if path.is_file():
            assert secret not in path.read_bytes(), path


def test_a_revoked_token_signs_nobody_in_and_stays_listed(store: Store) -> None:
    token = web_tokens.create(store, "alice@example.com")
    other = web_tokens.create(store, "bob@example.com")
    alice = web_tokens.listing(store)[0]
    web_tokens.revoke(store, alice.id)
    web_tokens.revoke(store, alice.id)  # again: still revoked, not an error
    assert web_tokens.who(store, token) is None
    assert web_tokens.who(store, other) == "bob@example.com"
    listed = {found.email: found for found in web_tokens.listing(store)}
    assert listed["alice@example.com"].revoked_at is not None
    assert listed["bob@example.com"].revoked_at is None


def test_revoking_a_token_that_does_not_exist_names_the_listing(store: Store) -> None:
    with pytest.raises(StateError, match="no web token 7") as refused:
        web_tokens.revoke(store, 7)
    assert "supervisor web token list" in refused.value.hint


@pytest.mark.parametrize(
    "token",
    ["", "svw_", "svw_unknown", "not-a-token", "svw_" + "a" * 10_000, "svw_\x00\n"],
)
def test_an_unknown_or_malformed_token_signs_nobody_in(store: Store, token: str) -> None:
    web_tokens.create(store, "alice@example.com")
    assert web_tokens.who(store, token) is None


def test_a_use_is_recorded_and_a_listing_never_holds_the_digest(store: Store) -> None:
    token = web_tokens.create(store, "alice@example.com")
    assert web_tokens.listing(store)[0].last_used_at is None
    web_tokens.who(store, token)
    (found,) = web_tokens.listing(store)
    assert found.last_used_at is not None and found.last_used_at >= found.created_at
    shown = repr(found) + str(vars(found))
    assert "digest" not in shown and web_tokens.digest(token) not in shown


@pytest.mark.parametrize(
    "email",
    ["", "   ", "alice", "a" * 250 + "@x.org", "alice@exa\nmple.com", "al\x1bice@x.org", "a b@c"],
    ids=["empty", "blank", "no-at", "too-long", "newline", "escape", "space"],
)
def test_a_token_is_only_made_for_an_email_address(store: Store, email: str) -> None:
    with pytest.raises(UsageError, match="not an email address") as refused:
        web_tokens.create(store, email)
    assert "--as" in refused.value.hint
    assert web_tokens.listing(store) == []


def test_the_lifecycle_works_on_the_repositorys_own_state(repo: Path) -> None:
    token = lifecycle.create_token(repo, " carol@example.com ")
    assert (repo / ".supervisor" / "state.db").is_file()
    assert lifecycle.identify(repo, token) == "carol@example.com"
    (made,) = lifecycle.tokens(repo)
    assert lifecycle.described(repo, token) == made
    lifecycle.revoke_token(repo, made.id)
    assert lifecycle.identify(repo, token) is None


def test_a_bad_email_is_refused_before_a_state_database_is_made(repo: Path) -> None:
    with pytest.raises(UsageError):
        lifecycle.create_token(repo, "nobody")
    assert not (repo / ".supervisor" / "state.db").exists()


def invoke(repo: Path, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(token_app, [*args, "--repo", str(repo)])
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.output


def test_the_commands_create_list_and_revoke_a_token(repo: Path) -> None:
    code, said = invoke(repo, "create", "--as", "dana@example.com")
    assert code == 0, said
    token = said.splitlines()[0]
    assert re.fullmatch(r"svw_[A-Za-z0-9_-]{40,}", token)
    assert "shown only this once" in said and "supervisor web token revoke 1" in said
    assert lifecycle.identify(repo, token) == "dana@example.com"

    code, said = invoke(repo, "list")  # a pipe: one token a line, tab-separated, no header
    assert code == 0
    (row,) = said.splitlines()
    assert row.split("\t")[:2] == ["1", "dana@example.com"]
    assert row.split("\t")[4] == "-"  # not revoked
    assert token not in said and web_tokens.digest(token) not in said

    assert invoke(repo, "revoke", "1") == (0, "Web token 1 is revoked.\n")
    assert lifecycle.identify(repo, token) is None
    _, said = invoke(repo, "list", "--json")
    assert '"revoked_at": "' in said and "digest" not in said


def test_the_commands_refuse_what_they_cannot_do(repo: Path) -> None:
    with pytest.raises(UsageError):
        invoke(repo, "create", "--as", "not-an-email")
    with pytest.raises(StateError, match="no web token 3"):
        invoke(repo, "revoke", "3")
    assert "No web tokens" in invoke(repo, "list")[1]


def test_tokens_work_alike_on_a_teams_shared_database(tmp_path: Path, state_url: str) -> None:
    """In team mode the tokens live in the shared PostgreSQL state, so that every host's
    dashboard signs in the same people."""
    with Store(tmp_path / "shared.db", url=state_url) as shared:
        token = web_tokens.create(shared, "erin@example.com")
        assert web_tokens.who(shared, token) == "erin@example.com"
        (made,) = web_tokens.listing(shared)
        assert made.last_used_at is not None and made.revoked_at is None
        web_tokens.revoke(shared, made.id)
        assert web_tokens.who(shared, token) is None
        assert web_tokens.find(shared, token) == web_tokens.listing(shared)[0]
