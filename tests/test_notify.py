"""Notifications: a person hears when a task waits for them, failed or completed.

A real HTTP receiver on 127.0.0.1 takes the webhook's POSTs; the state is a real SQLite database.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import TYPE_CHECKING, Any

import pytest

from supervisor.policy.notify import Notifier, RateLimitWatch
from supervisor.state.store import Store

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path


class Receiver:
    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        received = self.bodies

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers["Content-Length"])
                received.append(json.loads(self.rfile.read(length)))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = HTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.server.shutdown()


@pytest.fixture
def user_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    d = tmp_path / "user"
    d.mkdir()
    monkeypatch.setenv("SUPERVISOR_USER_DIR", str(d))
    return d


def _workflow(db: Path, status: str = "running") -> Any:
    with Store(db) as store:
        wf = store.create_workflow(
            description="add login",
            cli="claude",
            base_branch="main",
            base_sha="a" * 40,
            branch_for_id=lambda i: f"ai/{i}-add-login",
            definition={},
            first_step="implement",
        )
        if status != "running":
            store.set_status(wf.id, status)
        return store.workflow(wf.id)


def test_a_waiting_task_posts_a_slack_compatible_json_payload(
    tmp_path: Path, user_dir: Path, receiver: Receiver
) -> None:
    (user_dir / "config.yaml").write_text(f"notifications:\n  webhook: {receiver.url}\n")
    wf = _workflow(tmp_path / "state.db", "awaiting_approval")
    notifier = Notifier.from_config(None)
    notifier.notify("approval", wf, "Workflow 1 waits for approval of step 'implement'.")
    assert notifier.problems == []
    [body] = receiver.bodies
    assert body["event"] == "approval"
    assert body["text"].startswith(f"supervisor: workflow {wf.id} (add login) waits for your")
    assert body["workflow"]["branch"] == wf.task_branch
    assert body["workflow"]["status"] == "awaiting_approval"


def test_only_the_configured_events_are_sent(
    tmp_path: Path, user_dir: Path, receiver: Receiver
) -> None:
    (user_dir / "config.yaml").write_text(
        f"notifications:\n  webhook: {receiver.url}\n  events: [failed]\n"
    )
    wf = _workflow(tmp_path / "state.db")
    notifier = Notifier.from_config(None)
    notifier.notify("completed", wf)
    notifier.notify("failed", wf, "gate 'tests' failed")
    assert [b["event"] for b in receiver.bodies] == ["failed"]
    assert "gate 'tests' failed" in receiver.bodies[0]["text"]


def test_a_webhook_in_the_project_config_is_not_honoured(
    tmp_path: Path, user_dir: Path, receiver: Receiver
) -> None:
    """The repository's author must not learn about the user's tasks by naming a URL."""
    repo = tmp_path / "repo"
    (repo / ".supervisor").mkdir(parents=True)
    (repo / ".supervisor" / "config.yaml").write_text(
        f"notifications:\n  webhook: {receiver.url}\n"
    )
    wf = _workflow(tmp_path / "state.db")
    notifier = Notifier.from_config(repo)
    assert notifier.webhook is None
    notifier.notify("completed", wf)
    assert receiver.bodies == []


def test_an_unreachable_webhook_is_reported_and_does_not_fail_the_task(
    tmp_path: Path, user_dir: Path
) -> None:
    (user_dir / "config.yaml").write_text("notifications:\n  webhook: http://127.0.0.1:9/x\n")
    notifier = Notifier.from_config(None)
    notifier.notify("completed", _workflow(tmp_path / "state.db"))
    assert len(notifier.problems) == 1
    assert "127.0.0.1:9" in notifier.problems[0]


def test_a_non_http_webhook_is_refused(tmp_path: Path, user_dir: Path) -> None:
    (user_dir / "config.yaml").write_text("notifications:\n  webhook: file:///etc/passwd\n")
    notifier = Notifier.from_config(None)
    notifier.notify("completed", _workflow(tmp_path / "state.db"))
    assert notifier.problems == ["webhook 'file:///etc/passwd': not an http(s) URL"]


def test_entering_a_rate_limit_wait_is_notified_once(
    tmp_path: Path, user_dir: Path, receiver: Receiver
) -> None:
    (user_dir / "config.yaml").write_text(f"notifications:\n  webhook: {receiver.url}\n")
    db = tmp_path / "state.db"
    wf = _workflow(db)
    with RateLimitWatch(Notifier.from_config(None), db, wf.id, every_s=0.05):
        with Store(db) as store:
            store.update_workflow(
                wf.id,
                status="rate_limited",
                current_step="implement",
                context={"waiting_until": time.time() + 60},
            )
        deadline = time.time() + 5
        while not receiver.bodies and time.time() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)  # several more polls while still waiting: no second notice
    assert [b["event"] for b in receiver.bodies] == ["rate_limited"]
    assert "retries at" in receiver.bodies[0]["text"]
