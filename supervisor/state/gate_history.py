"""How a gate went before, for the guess of what follows it (workflow/lookahead.py `fail_odds`):
a gate's runs of the same name at the same attempt, in any task of this repository's state.
The attempt matters: a first test run after an implementation fails far more often than the run
after its fix-up."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlalchemy import select

from supervisor.state import schema as t

if TYPE_CHECKING:
    from supervisor.state.store import Store

ENDED = ("succeeded", "failed")


def failed(store: Store, name: str, attempt: int, limit: int) -> list[bool]:
    """The latest `limit` ended runs of gate `name` at `attempt`, newest first: True for each
    that failed."""
    steps = t.steps.c
    query = (
        select(steps.status)
        .where(
            steps.name == name,
            steps.attempt == attempt,
            steps.role.is_(None),
            steps.status.in_(ENDED),
        )
        .order_by(steps.id.desc())
        .limit(limit)
    )
    with store.engine.connect() as conn:
        return [status == "failed" for (status,) in conn.execute(query)]
