"""Worker and repository text is data wherever it is shown (supervisor/guard/textsafe.py): escape
sequences are made visible, never obeyed by the terminal, and rich markup in it is shown, never
parsed (`[/]` in a component id once crashed `status`, `events` and `resume`).

The attack through the real CLI and sandbox is in tests/test_attacks_text.py; these are the
escaping function, the console's backstop, and the reading commands on a state full of hostile
text."""

from __future__ import annotations

import io
from typing import TYPE_CHECKING

import pytest
from cli_support import supervisor
from rich.console import Console
from rich.table import Table
from rich.text import Text

from supervisor.cli.reporter import RichReporter
from supervisor.guard.textsafe import Guarded, guard, markup, visible
from supervisor.policy import notify
from supervisor.state.store import EventSpec, Store

if TYPE_CHECKING:
    from pathlib import Path

EVIL = "\x1b]0;pwned\x07\x1b[2J[/][link=http://x]click[/link]\x9b31m\u202eevil"
SHOWN = "\\x1b]0;pwned\\x07\\x1b[2J[/][link=http://x]click[/link]\\x9b31m\\u202eevil"


def test_escape_sequences_and_control_characters_are_shown_not_obeyed() -> None:
    assert visible(EVIL) == SHOWN
    assert visible("bell\x07 nul\x00 del\x7f cr\r") == "bell\\x07 nul\\x00 del\\x7f cr\\x0d"


def test_newlines_and_tabs_are_kept_where_the_layout_has_room_and_shown_where_not() -> None:
    assert visible("a\n\tb") == "a\n\tb"
    assert visible("a\n\tb", lines=False) == "a\\x0a\\x09b"
    assert visible(42) == "42"


def test_markup_is_shown_literally_inside_a_markup_string() -> None:
    out = io.StringIO()
    Console(file=out, color_system=None, width=200).print(f"[bold]{markup(EVIL)}[/bold]")
    assert out.getvalue().strip() == SHOWN


def test_a_guarded_console_lets_no_control_character_of_the_content_through() -> None:
    """The backstop for a call site that forgot to escape: a table cell, a plain print."""
    out = io.StringIO()
    console = guard(Console(file=out, color_system=None, width=200))
    table = Table()
    table.add_column("x")
    table.add_row(Text("cell\x1b[2J"))
    console.print(table)
    console.print("plain \x1b]0;pwned", markup=False)
    console.print(Guarded(Text("nested\x1b[31m")))
    printed = out.getvalue()
    assert "\x1b" not in printed
    assert "cell\\x1b[2J" in printed and "plain \\x1b]0;pwned" in printed
    assert "nested\\x1b[31m" in printed


def test_the_reporter_shows_a_worker_s_lines_and_a_step_detail_as_text() -> None:
    out = io.StringIO()
    reporter = RichReporter(Console(file=out, color_system=None, width=300))
    reporter.step(1, "implement/[/]", f"component {EVIL}")
    reporter.info(f"reviewer said: {EVIL}")
    reporter.output(f"{EVIL}\n")
    printed = out.getvalue()
    assert "\x1b" not in printed
    assert printed.count(SHOWN) == 3 and "implement/[/]" in printed


def test_a_notification_carries_worker_text_as_data() -> None:
    from datetime import UTC, datetime

    from supervisor.state.records import Workflow

    stamp = datetime.now(UTC)
    wf = Workflow(
        1, f"fix <!channel> {EVIL}", "awaiting_approval", "commit", "claude", "main",
        "a" * 40, "ai/1-x", {}, {}, None, stamp, stamp,
    )  # fmt: skip
    sent: list[dict[str, object]] = []
    notifier = notify.Notifier(webhook="http://127.0.0.1:9/x")
    notifier._post = sent.append  # type: ignore[method-assign]  # the body, not the network
    notifier.notify("approval", wf, f"<http://evil|click> {EVIL}")
    [body] = sent
    assert "\x1b" not in str(body) and "\x07" not in str(body)
    assert "&lt;!channel&gt;" in str(body["text"]) and "<!channel>" not in str(body["text"])
    assert "&lt;http://evil|click&gt;" in str(body["text"])
    assert body["detail"] == f"<http://evil|click> {SHOWN}"


@pytest.fixture
def hostile_state(tmp_path: Path) -> Path:
    """A repository whose state holds a workflow waiting for approval, every text of it
    written by a hostile worker: the task, a component id, the policy's reasons, a dependency
    file's comment, step and role names, event payloads, the error."""
    import subprocess

    root = tmp_path / "repo"
    root.mkdir()
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    (root / "README.md").write_text("x\n")
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "init"], check=True)
    sha = subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True)
    component = {"id": f"c[/]{EVIL}", "description": EVIL, "files": [EVIL], "depends_on": []}
    plan = {
        "status": "COMPLETE",
        "summary": EVIL,
        "phases": [{"id": "p1", "description": EVIL, "components": [component]}],
        "dependencies": [],
        "estimated_components": 1,
        "risks": [EVIL],
    }
    with Store(root / ".supervisor" / "state.db") as store:
        wf = store.create_workflow(
            description=f"task {EVIL}",
            cli="claude",
            base_branch="main",
            base_sha=sha.stdout.strip(),
            branch_for_id=lambda i: f"ai/{i}-t",
            definition={"steps": {"review": {"role": "reviewer"}}},
            first_step="review",
        )
        step = store.start_step(wf.id, f"implement/{EVIL}", 1, f"role{EVIL}", None)
        said = {"output": {"summary": EVIL, "issues": [{"description": EVIL}]}, "x": EVIL}
        store.finish_step(
            step, "succeeded", event=EventSpec("review", f"st[/]{EVIL}", f"r{EVIL}", EVIL, said)
        )
        risk = {
            "step": "review",
            "level": "high",
            "action": "require_approval",
            "reasons": [f"reviewer security concerns: reviewer: {EVIL}"],
        }
        request = {"producer": "review", "step": "commit", "diff": f"# [link=http://x]{EVIL}"}
        store.advance(
            wf.id,
            step="review",
            next_step="commit",
            context={
                "plan": plan,
                "components": {component["id"]: {"status": "merged"}},
                "approval_step": "review",
                "risk": risk,
                "dependency_request": request,
            },
            status="awaiting_approval",
            request_approval=True,
        )
    return root


@pytest.mark.parametrize("columns", [300, 80])
@pytest.mark.parametrize("command", [["status"], ["status", "1"], ["events", "1"]])
def test_the_reading_commands_show_hostile_text_literally_and_never_crash(
    hostile_state: Path, command: list[str], columns: int
) -> None:
    done = supervisor(*command, "--repo", str(hostile_state), columns=columns)
    assert done.returncode == 0, done.stderr
    assert "\x1b" not in done.stdout + done.stderr
    assert "\x07" not in done.stdout + done.stderr
    assert "\\x1b]0;pwned" in done.stdout.replace("\n", "").replace(" ", "")
