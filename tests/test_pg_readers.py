"""The readers that poll the state while a task runs — the TUI's monitor and the rate-limit
notice — read a shared PostgreSQL state too, not only the repository's SQLite file (which, with
`state.url` set, does not exist). Real PostgreSQL (tests/pg_support.py); no Docker."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import pytest
from test_notify import Receiver, _workflow

from supervisor.policy.notify import Notifier, RateLimitWatch
from supervisor.state.store import EventSpec, Store
from supervisor.views.monitor import Monitor

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

pytestmark = pytest.mark.xdist_group("postgres")


@pytest.fixture
def shared(shared_state: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The path a repository's SQLite file would have; the state is in PostgreSQL instead."""
    monkeypatch.setenv("SUPERVISOR_USER_DIR", str(tmp_path / "user"))
    (tmp_path / "user").mkdir()
    return tmp_path / "repo" / ".supervisor" / "state.db"


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.server.shutdown()


def test_the_tui_lists_and_details_workflows_of_a_shared_state(shared: Path) -> None:
    first, second = _workflow(shared), _workflow(shared, "awaiting_approval")
    with Store(shared) as store:
        store.add_event(first.id, EventSpec("worker", input_tokens=100, output_tokens=20))
        store.add_event(first.id, EventSpec("worker", input_tokens=5, cost_usd=0.25))
    monitor = Monitor(shared)
    rows = {row.workflow.id: row for row in monitor.rows()}
    assert set(rows) == {first.id, second.id}
    assert (rows[first.id].tokens, rows[first.id].cost) == (125, 0.25)
    assert rows[second.id].workflow.status == "awaiting_approval"
    with Store(shared) as store:  # a later refresh sees what was added since
        store.add_event(first.id, EventSpec("worker", output_tokens=10))
    assert {row.workflow.id: row.tokens for row in monitor.rows()}[first.id] == 135
    detail = monitor.detail(first.id, events=2)
    assert detail is not None and [e.output_tokens for e in detail.events] == [None, 10]
    assert not shared.exists()  # nothing was written beside the repository


def test_the_rate_limit_notice_reads_a_shared_state(
    shared: Path, tmp_path: Path, receiver: Receiver
) -> None:
    (tmp_path / "user" / "config.yaml").write_text(f"notifications:\n  webhook: {receiver.url}\n")
    wf = _workflow(shared)
    with RateLimitWatch(Notifier.from_config(None), shared, wf.id, every_s=0.05):
        with Store(shared) as store:
            store.update_workflow(
                wf.id,
                status="rate_limited",
                current_step="implement",
                context={"waiting_until": time.time() + 60},
            )
        deadline = time.time() + 10
        while not receiver.bodies and time.time() < deadline:
            time.sleep(0.05)
    assert [b["event"] for b in receiver.bodies] == ["rate_limited"]
