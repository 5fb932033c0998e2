"""`supervisor web token ...`: make, list and revoke the personal tokens people sign in to the
dashboard with (supervisor/lifecycle/web_tokens.py). Mounted by the `web` command."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from supervisor.cli.common import JsonOption, RepoOption, console

if TYPE_CHECKING:
    from datetime import datetime

    from supervisor.state.web_tokens import WebToken
    from supervisor.views.listing import Listing

token_app = typer.Typer(
    help="Personal sign-in tokens for the dashboard: create one per person, list, revoke.\n\n"
    "Only a digest of each token is stored; the token itself is shown once, when it is made.",
    no_args_is_help=True,
)


@token_app.command("create")
def token_create(
    email: Annotated[
        str,
        typer.Option(
            "--as", metavar="EMAIL", help="Whose token it is: shown as who approved or rejected."
        ),
    ],
    repo: RepoOption = Path(),
) -> None:
    """Make a token for one person and print it, once."""
    from supervisor.lifecycle.web_tokens import create_token, described

    token = create_token(repo, email)
    made = described(repo, token)
    console.print(token, highlight=False, markup=False, soft_wrap=True)
    which = f"web token {made.id}, for {made.email}," if made else "token"
    revoke = f"supervisor web token revoke {made.id if made else 'ID'}"
    console.print(
        f"This {which} is shown only this once: hand it over now. Revoke it with `{revoke}`.",
        highlight=False,
        markup=False,
        soft_wrap=True,  # a command cut over two lines cannot be pasted
    )


@token_app.command("list")
def token_list(repo: RepoOption = Path(), as_json: JsonOption = False) -> None:
    """Every token: whose, when made, last used and revoked (never the token itself)."""
    from supervisor.cli.output import show
    from supervisor.lifecycle.web_tokens import tokens

    found = tokens(repo)
    if as_json:
        from supervisor.cli.plain import json_out

        json_out([asdict(token) for token in found])
        return
    if not found:
        console.print(
            "No web tokens. Make one with `supervisor web token create --as EMAIL`.",
            highlight=False,
            markup=False,
        )
        return
    show(console, _listing(found))


@token_app.command("revoke")
def token_revoke(
    token_id: Annotated[int, typer.Argument(metavar="ID", help="The token's id (`list`).")],
    repo: RepoOption = Path(),
) -> None:
    """Stop a token signing anyone in; it stays listed, as revoked."""
    from supervisor.lifecycle.web_tokens import revoke_token

    revoke_token(repo, token_id)
    console.print(f"Web token {token_id} is revoked.", highlight=False, markup=False)


def _listing(found: list[WebToken]) -> Listing:
    from supervisor.views.listing import Column, Listing

    listing = Listing(
        "Web tokens",
        [
            Column("id", "short"),
            Column("email"),
            Column("created", "short"),
            Column("last used", "short"),
            Column("revoked", "short"),
        ],
    )
    for token in found:
        listing.add(
            str(token.id),
            token.email,
            _when(token.created_at),
            _when(token.last_used_at),
            _when(token.revoked_at),
        )
    return listing


def _when(moment: datetime | None) -> str:
    return "-" if moment is None else moment.strftime("%Y-%m-%d %H:%M:%S")
