"""`supervisor status` in its plain forms, and a plain submission to Temporal (`start-task
DESCRIPTION --yes --backend temporal ...`, supervisor/cli/submission.py), are answered without
typer (supervisor/cli/entry.py), and say exactly what the full command line says: same output,
same errors, same exit codes. Any other form goes to the full command line. (A submission that
succeeds: tests/test_temporal_submit.py, on a real server.)"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from supervisor.cli import entry
from supervisor.cli.entry import StatusArgs, quick_status
from supervisor.cli.submission import SubmitArgs, parse
from supervisor.state.store import EventSpec, Store

if TYPE_CHECKING:
    from collections.abc import Callable


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["status"], StatusArgs(None, Path(), False)),
        (["status", "7"], StatusArgs(7, Path(), False)),
        (["status", "--repo", "/r", "7", "--json"], StatusArgs(7, Path("/r"), True)),
        (["status", "--repo=/r"], StatusArgs(None, Path("/r"), False)),
    ],
)
def test_the_plain_forms_of_status_are_parsed_here(argv: list[str], expected: StatusArgs) -> None:
    assert quick_status(argv) == expected


@pytest.mark.parametrize(
    "argv",
    [
        ["status", "--help"],
        ["status", "1", "--watch"],
        ["status", "-w"],
        ["status", "1", "2"],
        ["status", "x"],
        ["status", "-1"],
        ["status", "--repo"],
        ["status", "--repo", "--json"],
        ["status", "--json", "--json"],
        ["status", "١"],  # an Arabic-Indic digit: int() takes it, typer's parser may not
        ["events", "1"],
        [],
    ],
)
def test_anything_else_goes_to_the_full_command_line(argv: list[str]) -> None:
    assert quick_status(argv) is None


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("entry") / "repo"
    root.mkdir()
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    (root / "README.md").write_text("x\n")
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "init"], check=True)
    with Store(root / ".supervisor" / "state.db") as store:
        for status in ("awaiting_approval", "failed"):
            wf = store.create_workflow(
                description="add [bold]x[/bold]",  # markup in a task is printed as text
                cli="claude",
                base_branch="main",
                base_sha="a" * 40,
                branch_for_id=lambda i: f"ai/{i}-t",
                definition={},
                first_step="plan",
            )
            step = store.start_step(wf.id, "plan", 1, "planner", None)
            store.finish_step(step, "succeeded", event=EventSpec("plan", input_tokens=3))
            store.advance(
                wf.id,
                step="plan",
                next_step="implement",
                context={},
                status=status,
                request_approval=status == "awaiting_approval",
            )
    return root


def run(main: Callable[[], None], argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple:
    sys.argv = ["supervisor", *argv]
    try:
        main()
        code: object = 0
    except SystemExit as e:
        code = e.code or 0
    out = capsys.readouterr()
    return code, out.out, out.err


def both_answers(
    argv: list[str],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> tuple[tuple, tuple]:
    """The quick path's answer and the full command line's, in the same terminal width and
    user directory."""
    from supervisor.cli import app

    monkeypatch.setenv("COLUMNS", "120")
    monkeypatch.setenv("SUPERVISOR_USER_DIR", str(tmp_path / "user"))
    monkeypatch.setattr(sys, "argv", list(sys.argv))
    return run(entry.main, argv, capsys), run(app.main, argv, capsys)


@pytest.mark.parametrize(
    "args",
    [["status", "1"], ["status", "2", "--json"], ["status"], ["status", "--json"], ["status", "9"]],
    ids=["detail", "detail-json", "list", "list-json", "unknown-id"],
)
def test_the_quick_answer_is_the_full_command_lines_answer(
    repo: Path,
    args: list[str],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    argv = [*args, "--repo", str(repo)]
    assert quick_status(argv) is not None
    quick, full = both_answers(argv, capsys, monkeypatch, tmp_path)
    assert quick == full
    assert quick[1] or quick[2]  # it did say something
    if args == ["status", "9"]:
        assert quick[0] != 0 and "9" in quick[2]


def test_status_of_one_workflow_to_a_pipe_is_plain_lines_with_control_characters_shown(
    tmp_path: Path,
) -> None:
    """A script reading `status <id>` gets `label  value` lines, the plan's tree and the steps,
    with no table borders; a worker's escape sequence in the task arrives as `\\x1b`."""
    root = tmp_path / "repo"
    root.mkdir()
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    (root / "README.md").write_text("x\n")
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "init"], check=True)
    plan = {
        "status": "COMPLETE",
        "phases": [
            {"id": "p1", "components": [{"id": "core", "description": "c", "files": ["core.py"]}]}
        ],
    }
    with Store(root / ".supervisor" / "state.db") as store:
        wf = store.create_workflow(
            description="fix \x1b]0;owned\x07 the title",
            cli="claude",
            base_branch="main",
            base_sha="b" * 40,
            branch_for_id=lambda i: f"ai/{i}-t",
            definition={},
            first_step="plan",
        )
        step = store.start_step(wf.id, "plan", 1, "planner", None)
        store.finish_step(step, "succeeded", event=EventSpec("plan", input_tokens=3))
        store.update_workflow(
            wf.id,
            status="running",
            current_step="implement",
            context={"plan": plan, "components": {"core": {"status": "pending"}}},
        )
        store.set_status(wf.id, "failed", error="gate\x1b[2J failed")
    shown = subprocess.run(
        [sys.executable, "-m", "supervisor", "status", str(wf.id), "--repo", str(root)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    lines = shown.splitlines()
    assert lines[:3] == [
        "workflow      1",
        "task          fix \\x1b]0;owned\\x07 the title",
        "status        failed",
    ]
    assert "error         gate\\x1b[2J failed" in lines
    assert "\x1b" not in shown and "│" not in shown and "┃" not in shown
    assert "  phase p1 pending" in lines and "    core pending  core.py" in lines
    header = lines.index("Steps") + 1
    assert lines[header].split() == ["#", "step", "attempt", "role", "status", "started", "took"]
    assert lines[header + 1].split()[:5] == ["1", "plan", "1", "planner", "succeeded"]


def test_the_streamed_event_log_holds_each_event_as_the_store_reads_it(tmp_path: Path) -> None:
    """`events <id> --json`, made by SQLite: the same objects as the store's events, in order;
    ASCII only (a payload's ESC, bidirectional override or emoji escaped as JSON does), and a
    timestamp as `status --json` writes one (json_time: ISO 8601 in UTC, `+00:00`; without
    microseconds at a whole second)."""
    import json
    from datetime import datetime

    from sqlalchemy import insert

    from supervisor.cli.plain import json_time
    from supervisor.state import schema

    whole = datetime(2026, 1, 2, 3, 4, 5)

    root = tmp_path / "repo"
    root.mkdir()
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    (root / "README.md").write_text("x\n")
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "init"], check=True)
    with Store(root / ".supervisor" / "state.db") as store:
        wf = store.create_workflow(
            description="t",
            cli="claude",
            base_branch="main",
            base_sha="c" * 40,
            branch_for_id=lambda i: f"ai/{i}-t",
            definition={},
            first_step="plan",
        )
        step = store.start_step(wf.id, "plan", 1, "planner", None)
        odd = {"text": 'caf\u00e9 \x1b[2J \u202e \U0001f600 "q" \\', "n": [1, 2.5, None]}
        cost = EventSpec("plan", role="planner", payload=odd, input_tokens=3, cost_usd=0.0125)
        store.finish_step(step, "succeeded", event=cost)
        with store.engine.begin() as conn:  # an event at a whole second
            conn.execute(
                insert(schema.events),
                [{"workflow_id": wf.id, "type": "note", "payload": {}, "timestamp": whole}],
            )
        expected = [
            {**e.__dict__, "timestamp": json_time(e.timestamp)} for e in store.events(wf.id)
        ]
    assert expected[-1]["timestamp"] == "2026-01-02T03:04:05+00:00"
    shown = subprocess.run(
        [sys.executable, "-m", "supervisor", "events", str(wf.id), "--json", "--repo", str(root)],
        capture_output=True,
        check=True,
    ).stdout
    assert shown.isascii()
    assert [json.loads(line) for line in shown.splitlines()] == expected
    assert any(e["payload"] == odd for e in expected)
    unknown = subprocess.run(
        [sys.executable, "-m", "supervisor", "events", "9", "--json", "--repo", str(root)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert unknown.returncode != 0 and "No workflow with id 9" in unknown.stderr


def test_status_and_events_json_write_every_time_alike_in_iso_8601_utc(repo: Path) -> None:
    """One way for every time a script reads: `2026-01-02T03:04:05.123456+00:00`, an offset
    always (the state keeps UTC), the same function for `status --json` (list and detail) and
    `events --json`; they wrote `2026-01-02 03:04:05.123456` and `2026-01-02T03:04:05`."""
    import json
    from datetime import UTC, datetime

    from cli_support import supervisor

    from supervisor.cli.plain import json_time

    iso = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{6})?\+00:00")
    listed = json.loads(supervisor("status", "--json", cwd=repo).stdout)[0]
    shown = json.loads(supervisor("status", "1", "--json", cwd=repo).stdout)
    events = supervisor("events", "1", "--json", cwd=repo).stdout.splitlines()
    times = [listed["created_at"], listed["updated_at"], shown["created_at"]]
    times += [shown["steps"][0]["started_at"], shown["steps"][0]["finished_at"]]
    times += [json.loads(line)["timestamp"] for line in events]
    assert [t for t in times if not iso.fullmatch(t)] == []
    with Store(repo / ".supervisor" / "state.db") as store:
        wf, first = store.workflow(1), store.events(1)[0]
    assert listed["created_at"] == shown["created_at"] == json_time(wf.created_at)
    assert json.loads(events[0])["timestamp"] == json_time(first.timestamp)
    assert datetime.fromisoformat(json_time(wf.created_at)) == wf.created_at.replace(tzinfo=UTC)


SUBMIT = ["start-task", "Add x", "--yes", "--backend", "temporal"]


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (SUBMIT, SubmitArgs("Add x", Path(), None, [], False, None, "auto")),
        (
            ["start-task", "-y", "--backend=temporal", "--repo", "/r", "Add x", "--no-gate",
             "--role", "implement=a", "--role=review=b", "--allow-protected", "Makefile",
             "--cli", "codex", "--depth", "simple"],
            SubmitArgs("Add x", Path("/r"), "codex", ["implement=a", "review=b"], True,
                       ["Makefile"], "simple"),
        ),
    ],
    ids=["plain", "every-option"],
)  # fmt: skip
def test_a_plain_submission_is_parsed_here(argv: list[str], expected: SubmitArgs) -> None:
    assert parse(argv) == expected


@pytest.mark.parametrize(
    "argv",
    [
        ["start-task", "Add x", "--backend", "temporal"],  # confirms first: typer's prompt
        ["start-task", "Add x", "--yes"],  # the backend from the settings
        ["start-task", "Add x", "--yes", "--backend", "embedded"],
        [*SUBMIT, "--help"],
        [*SUBMIT, "Another"],
        [*SUBMIT, "--repo"],
        [*SUBMIT, "--repo", "--no-gate"],
        [*SUBMIT, "--repo", "a", "--repo", "b"],
        [*SUBMIT, "--repo="],
        [*SUBMIT, "--"],
        [*SUBMIT, "-x"],
        ["start-task", "--yes", "--backend", "temporal"],
        ["status"],
    ],
)
def test_any_other_start_task_goes_to_the_full_command_line(argv: list[str]) -> None:
    assert parse(argv) is None


@pytest.mark.parametrize(
    "extra",
    [["--depth", "deep"], ["--role", "implement"], ["--repo", "{nowhere}"]],
    ids=["depth", "role", "not-a-repository"],
)
def test_a_refused_plain_submission_says_what_the_full_command_line_says(
    extra: list[str],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    argv = [*SUBMIT, *(a.format(nowhere=tmp_path) for a in extra)]
    assert parse(argv) is not None
    quick, full = both_answers(argv, capsys, monkeypatch, tmp_path)
    assert quick == full
    assert quick[0] != 0 and "error:" in quick[2]
