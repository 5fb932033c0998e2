"""Telling a person that a task waits for them, failed or finished.

A task can run for an hour in a terminal nobody watches; what a person needs to hear is the moment
it stops needing the machine and starts needing them. `tasks.py` calls `notify` around the engine
run (the engine decides, it does not talk to people). Each channel is best effort: a webhook that
is down or a missing `notify-send` never fails the task, it is reported once and the task goes on.

The webhook URL decides where data about the task goes, so like the other settings that route data
off the machine it is honoured only from the user's own config (SUPERVISOR_USER_DIR or
~/.supervisor), never from a project's `.supervisor/config.yaml`, which whoever wrote the
repository controls.

The task's description and the detail quote worker and repository text. It reaches each channel as
data: control characters made visible (supervisor/guard/textsafe.py), and `&`, `<`, `>` escaped
where
the channel reads them as markup (a desktop notification's body, a Slack-style `text`, where
`<!channel>` pings everyone and `<http://x|here>` is a link).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from supervisor.guard.textsafe import visible

if TYPE_CHECKING:
    from supervisor.core.config import Settings
    from supervisor.state.records import Workflow

EVENTS = ("approval", "budget", "rate_limited", "failed", "completed")
TIMEOUT_S = 5.0

_SAID = {
    "approval": "waits for your approval",
    "budget": "paused at its budget (approve --extend raises it)",
    "rate_limited": "is rate limited and waits",
    "failed": "failed",
    "completed": "completed",
}


@dataclass
class Notifier:
    """The channels one run notifies on, read from config at task start."""

    webhook: str | None = None
    events: list[str] = field(default_factory=lambda: list(EVENTS))
    desktop: bool = False
    problems: list[str] = field(default_factory=list)

    @classmethod
    def from_config(cls, repo: Path | None, loaded: Settings | None = None) -> Notifier:
        """The merged `notifications` settings (`loaded`: already read, as a run has them), with
        the webhook taken from the user layer only."""
        from supervisor.core.config import config_layers, load_settings, user_dir

        settings = (loaded or load_settings(repo)).notifications
        user_file = str(user_dir() / "config.yaml")
        webhook = None
        for name, layer in config_layers(repo):
            if name == user_file:
                webhook = (layer.get("notifications") or {}).get("webhook")
        return cls(webhook=webhook, events=list(settings.events), desktop=settings.desktop)

    def wants(self, event: str) -> bool:
        return event in self.events and (self.webhook is not None or self.desktop)

    def notify(self, event: str, wf: Workflow, detail: str = "") -> None:
        """Send `event` about `wf` on every configured channel; failures are collected, not
        raised."""
        if not self.wants(event):
            return
        detail = visible(detail)
        text = f"supervisor: workflow {wf.id} ({visible(wf.description[:80])}) {_SAID[event]}"
        if detail:
            text += f": {detail[:300]}"
        if self.webhook:
            self._post(payload(event, wf, as_markup_text(text), detail))
        if self.desktop:
            self._desktop(as_markup_text(text))

    def _post(self, body: dict[str, Any]) -> None:
        assert self.webhook is not None
        if not self.webhook.startswith(("http://", "https://")):
            self.problems.append(f"webhook {self.webhook!r}: not an http(s) URL")
            return
        request = urllib.request.Request(
            self.webhook,
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
                response.read()
        except (OSError, ValueError) as e:
            self.problems.append(f"webhook {self.webhook}: {e}")

    def _desktop(self, text: str) -> None:
        binary = shutil.which("notify-send")
        if binary is None:
            return
        try:
            subprocess.run(
                [binary, "supervisor", text], timeout=TIMEOUT_S, check=False, capture_output=True
            )
        except (OSError, subprocess.TimeoutExpired) as e:
            self.problems.append(f"notify-send: {e}")


def as_markup_text(text: str) -> str:
    """For a receiver that reads `&`, `<` and `>` as markup (notify-send bodies, Slack): the
    three characters as entities, which both read back as the characters themselves."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def payload(event: str, wf: Workflow, text: str, detail: str) -> dict[str, Any]:
    """JSON for a webhook: `text` for Slack-style receivers, the fields for everything else."""
    return {
        "text": text,
        "event": event,
        "workflow": {
            "id": wf.id,
            "task": visible(wf.description),
            "status": wf.status,
            "step": wf.current_step,
            "branch": wf.task_branch,
        },
        "detail": detail,
    }


class RateLimitWatch:
    """A rate limit is waited out inside the engine's run, so the run does not return when one
    starts: a thread reads the state database (read-only) and notifies when the workflow enters
    `rate_limited`, once per wait."""

    def __init__(self, notifier: Notifier, db: Path, wf_id: int, every_s: float = 1.0) -> None:
        import threading

        self.notifier, self.db, self.wf_id, self.every_s = notifier, db, wf_id, every_s
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._watch, name="rate-limit-watch", daemon=True)

    def __enter__(self) -> RateLimitWatch:
        if self.notifier.wants("rate_limited"):
            self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        if self.thread.is_alive():
            self.thread.join(timeout=5)

    def _watch(self) -> None:
        from supervisor.state.location import state_url
        from supervisor.state.reader import open_reader

        was_waiting = False
        while not self.stop.wait(self.every_s):
            if not state_url() and not self.db.is_file():
                continue
            with open_reader(self.db) as reader:  # the store, for a shared PostgreSQL state
                wf = reader.workflow(self.wf_id)
            waiting = wf.status == "rate_limited"
            if waiting and not was_waiting:
                until = wf.context.get("waiting_until")
                detail = ""
                if until:
                    from datetime import datetime

                    detail = f"retries at {datetime.fromtimestamp(float(until)):%H:%M:%S}"
                self.notifier.notify("rate_limited", wf, detail)
            was_waiting = waiting
