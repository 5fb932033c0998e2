"""`supervisor status` in its plain forms is answered without typer (supervisor/cli/entry.py), and
says exactly what the full command line says: same output, same errors, same exit codes. Any
other form goes to the full command line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from supervisor.cli import entry
from supervisor.cli.entry import StatusArgs, quick_status
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
    from supervisor.cli import app

    monkeypatch.setenv("COLUMNS", "120")
    monkeypatch.setenv("SUPERVISOR_USER_DIR", str(tmp_path / "user"))
    monkeypatch.setattr(sys, "argv", list(sys.argv))
    argv = [*args, "--repo", str(repo)]
    assert quick_status(argv) is not None
    quick = run(entry.main, argv, capsys)
    full = run(app.main, argv, capsys)
    assert quick == full
    assert quick[1] or quick[2]  # it did say something
    if args == ["status", "9"]:
        assert quick[0] != 0 and "9" in quick[2]
