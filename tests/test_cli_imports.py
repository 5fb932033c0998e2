"""The commands a person runs to look or decide import only what they use.

`status`, `events`, `approve` and `reject` run to completion in a fresh interpreter, on a real
repository and state database, and then the modules it loaded are checked: none of Docker,
networkx, tiktoken, Jinja2, Textual (only `supervisor tui` needs it), the engine, the workers,
the sandbox or OpenTelemetry (only a run exports); `status` not even typer
(supervisor/cli/entry.py); and for the read-only commands not SQLAlchemy (they read with
sqlite3) nor pydantic (which typer >= 0.29 imports for every argument; see requirements.txt).
What it costs in seconds is measured in benchmarks/cli_speed.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import TYPE_CHECKING

import pytest

from supervisor.state.store import EventSpec, Store

if TYPE_CHECKING:
    from pathlib import Path

NEVER = ("docker", "networkx", "tiktoken", "jinja2", "textual", "supervisor.workflow.engine")
NEVER += ("github", "gitlab", "supervisor.forge")  # the forge's clients: --pr, --from-issue only
# OpenTelemetry and the telemetry wing: only a run of the engine exports (supervisor/telemetry/)
NEVER_PREFIXES = (
    "supervisor.workers",
    "supervisor.sandbox",
    "supervisor.workflow",
    "supervisor.telemetry",
    "opentelemetry",
)
NOT_FOR_READING = ("sqlalchemy", "pydantic", "yaml")

RUN = """
import json, sys
out, args = sys.argv[1], sys.argv[2:]
sys.argv = ["supervisor", *args]
from supervisor.cli.entry import main
try:
    main()
except SystemExit as e:
    code = e.code
else:
    code = 0
with open(out, "w") as handle:
    json.dump({"code": code, "modules": sorted(sys.modules)}, handle)
"""


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A repository whose state holds a planned workflow (so `status` draws the work tree) and
    two workflows waiting for approval."""
    root = tmp_path_factory.mktemp("cli") / "repo"
    root.mkdir()
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    (root / "README.md").write_text("x\n")
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "init"], check=True)
    plan = {
        "status": "COMPLETE",
        "summary": "",
        "phases": [
            {
                "id": "p1",
                "description": "d",
                "components": [
                    {"id": "a", "description": "a", "files": ["a.py"], "depends_on": []},
                    {"id": "b", "description": "b", "files": ["b.py"], "depends_on": ["a"]},
                ],
            }
        ],
        "dependencies": [],
        "estimated_components": 2,
        "risks": [],
    }
    with Store(root / ".supervisor" / "state.db") as store:
        for _ in range(3):
            wf = store.create_workflow(
                description="t",
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
                context={"plan": plan, "components": {"a": {"status": "merged"}}},
                status="awaiting_approval",
                request_approval=True,
            )
    return root


def modules_after(repo: Path, tmp_path: Path, *args: str) -> set[str]:
    out = tmp_path / "modules.json"
    done = subprocess.run(
        [sys.executable, "-c", RUN, str(out), *args, "--repo", str(repo)],
        env={**os.environ, "SUPERVISOR_USER_DIR": str(tmp_path / "user"), "COLUMNS": "120"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    result = json.loads(out.read_text())
    assert result["code"] in (0, None), done.stderr
    return set(result["modules"])


def loaded(modules: set[str], names: tuple[str, ...]) -> list[str]:
    return sorted(m for m in modules if m.split(".")[0] in names or m in names)


@pytest.mark.parametrize(
    "args",
    [["status", "1"], ["status"], ["events", "1"], ["events", "1", "--json"]],
    ids=["status-id", "status-list", "events", "events-json"],
)
def test_reading_commands_load_neither_the_worker_stack_nor_sqlalchemy(
    repo: Path, tmp_path: Path, args: list[str]
) -> None:
    modules = modules_after(repo, tmp_path, *args)
    assert "supervisor.state.reader" in modules  # it did read the database
    assert loaded(modules, NEVER) == []
    assert sorted(m for m in modules if m.startswith(NEVER_PREFIXES)) == []
    assert loaded(modules, NOT_FOR_READING) == []


@pytest.mark.parametrize("args", [["status", "1"], ["status", "--json"]], ids=["id", "list-json"])
def test_status_is_answered_without_the_command_line_framework(
    repo: Path, tmp_path: Path, args: list[str]
) -> None:
    modules = modules_after(repo, tmp_path, *args)
    assert "supervisor.cli.status_view" in modules
    assert loaded(modules, ("typer", "click", "supervisor.cli.app")) == []


@pytest.mark.parametrize("args", [["approve", "2"], ["reject", "3", "--reason", "no"]])
def test_deciding_commands_load_no_worker_stack(
    repo: Path, tmp_path: Path, args: list[str]
) -> None:
    modules = modules_after(repo, tmp_path, *args)
    with Store(repo / ".supervisor" / "state.db") as store:
        assert store.latest_approval(int(args[1])).status != "pending"  # type: ignore[union-attr]
    assert loaded(modules, NEVER) == []
    assert sorted(m for m in modules if m.startswith(NEVER_PREFIXES)) == []


@pytest.mark.parametrize("args", [["status", "1"], ["events", "1", "--json"]], ids=["id", "events"])
def test_a_piped_status_or_event_stream_loads_neither_rich_nor_git_runner(
    repo: Path, tmp_path: Path, args: list[str]
) -> None:
    """To a pipe (as here) they print plain lines, and the state database beside `.git` is
    found without git's runner (the approval's summary may still run git: workflow 1 waits for
    one)."""
    modules = modules_after(repo, tmp_path, *args)
    assert "supervisor.state.reader" in modules
    assert loaded(modules, ("rich", "supervisor.workspace.host_git")) == []
