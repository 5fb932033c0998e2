"""Output that fits, anchored on `gh` and `docker`: no identifier is ever cut or folded.

Piped (stdout not a terminal), every listing is plain rows: one item a line, tab-separated, every
value whole. On a terminal, tables shorten free text with "…" and never an identifier; where the
identifiers alone do not fit, each item becomes a block of lines. The golden files under
tests/golden/ hold each listing at 80 columns, piped and in a terminal (timestamps normalised;
`UPDATE_GOLDEN=1` rewrites them), so a change that cuts an identifier fails here.

The commands run in-process on a real repository and state database (tests/cli_support.py);
`TTY_COMPATIBLE=1` makes rich treat stdout as a terminal, as it does for a real one.
"""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from cli_support import supervisor
from rich.cells import cell_len
from rich.console import Console
from routing_support import record_run

from supervisor.cli.output import show
from supervisor.cli.reports import doctor_table
from supervisor.lifecycle.doctor import Check
from supervisor.state.records import EventSpec
from supervisor.state.store import Store
from supervisor.views.listings import doctor as doctor_listing

GOLDEN = Path(__file__).parent / "golden"
SHA = "3f9a2c4e1b7d8f0a6c5e4d3b2a1f0e9d8c7b6a5f"
BRANCH = "ai/1-implement-multiply-with-overflow-checks"
STEP = "implement_component"
ROLE = "implementer_for_very_long_component_names"
TASK = "Implement multiply next to add, with overflow checks,\nand document it in the README"
IDS = (SHA, BRANCH, STEP, ROLE)
TIMES = [
    (re.compile(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}"), "2026-01-01 12:00:00"),
    (re.compile(r"\b\d{2}:\d{2}:\d{2}\b"), "12:00:00"),
]


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A home directory holding the repository (paths print as `~/repo/...`, the same on every
    machine) whose state has a workflow with long identifiers, its events and recorded runs."""
    home = tmp_path_factory.mktemp("home")
    root = home / "repo"
    root.mkdir()
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q", "-b", "main"], check=True)
    (root / "README.md").write_text("x\n")
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "init"], check=True)
    roles = root / ".supervisor" / "roles"
    roles.mkdir(parents=True)
    (roles / f"{ROLE}.yaml").write_text(
        "extends: implementer_fast\ndescription: A role whose name is longer than a column.\n"
    )
    with Store(root / ".supervisor" / "state.db") as store:
        wf = store.create_workflow(
            description=TASK,
            cli="claude",
            base_branch="main",
            base_sha=SHA,
            branch_for_id=lambda i: f"ai/{i}-implement-multiply-with-overflow-checks",
            definition={},
            first_step=STEP,
        )
        step = store.start_step(wf.id, STEP, 1, ROLE, None)
        payload = {"commit": SHA, "branch": BRANCH, "summary": "Added multiply and its tests"}
        event = EventSpec("step_finished", step=STEP, role=ROLE, status="succeeded",
                          payload=payload, input_tokens=1200, output_tokens=300)  # fmt: skip
        store.finish_step(step, "succeeded", event=event)
        record_run(store, role=ROLE, cli="claude", task_type="implementation", step=STEP)
        record_run(store, role="reviewer", cli="gemini", task_type="review", step="review",
                   success=False, seconds=12.5)  # fmt: skip
    return home


def run(home: Path, *args: str, terminal: bool, columns: int = 80) -> str:
    env = {"HOME": str(home), "SUPERVISOR_USER_DIR": str(home / "user")}
    if terminal:
        env["TTY_COMPATIBLE"] = "1"
    done = supervisor(*args, cwd=home / "repo", env=env, columns=columns)
    assert done.returncode == 0, done.stderr
    return done.stdout


def normalised(out: str) -> str:
    for pattern, fixed in TIMES:
        out = pattern.sub(fixed, out)
    return "\n".join(line.rstrip() for line in out.splitlines()) + "\n"


def assert_golden(name: str, out: str) -> None:
    path = GOLDEN / f"{name}.txt"
    if os.environ.get("UPDATE_GOLDEN") or not path.exists():
        path.parent.mkdir(exist_ok=True)
        path.write_text(normalised(out))
    assert normalised(out) == path.read_text(), f"differs from {path} (UPDATE_GOLDEN=1 rewrites)"


def whole_on_one_line(out: str, *ids: str) -> None:
    lines = out.splitlines()
    for ident in ids:
        assert any(ident in line for line in lines), f"{ident!r} cut or folded in:\n{out}"


LISTINGS = {
    "status": (("status",), (BRANCH, STEP)),
    "events": (("events", "1"), (SHA, BRANCH, STEP, ROLE)),
    "metrics": (("metrics",), (ROLE, "reviewer", "implementation")),
    "roles-list": (("roles", "list"), (ROLE, "implementer_fast", "security_auditor")),
}


@pytest.mark.parametrize("name", list(LISTINGS))
def test_in_a_terminal_of_80_columns_no_identifier_is_cut_or_folded(home: Path, name: str) -> None:
    args, ids = LISTINGS[name]
    out = run(home, *args, terminal=True)
    whole_on_one_line(out, *ids)
    assert max(cell_len(line) for line in out.splitlines()) <= 80
    assert_golden(f"{name}-terminal-80", out)


@pytest.mark.parametrize("name", list(LISTINGS))
def test_piped_every_item_is_one_line_of_whole_tab_separated_values(home: Path, name: str) -> None:
    args, ids = LISTINGS[name]
    out = run(home, *args, terminal=False)
    whole_on_one_line(out, *ids)
    assert "…" not in out and "┃" not in out and "│" not in out  # no table, nothing shortened
    assert_golden(f"{name}-piped", out)


def test_piped_status_has_the_whole_task_and_branch_in_their_own_fields(home: Path) -> None:
    row = run(home, "status", terminal=False).splitlines()[0].split("\t")
    assert row[0] == "1" and row[2] == STEP and row[3] == BRANCH
    assert row[4] == TASK.replace("\n", " ")  # whole, on the row's one line


def test_piped_events_keep_the_whole_payload(home: Path) -> None:
    finished = next(
        line.split("\t")
        for line in run(home, "events", "1", terminal=False).splitlines()
        if "\tstep_finished\t" in line
    )
    assert finished[2:7] == ["step_finished", STEP, ROLE, "succeeded", "1200/300"]
    assert SHA in finished[7] and BRANCH in finished[7] and "Added multiply" in finished[7]


@pytest.mark.parametrize("columns", [100, 120, 200])
def test_a_terminal_wide_enough_gets_a_table_that_shortens_only_the_task(
    home: Path, columns: int
) -> None:
    out = run(home, "status", terminal=True, columns=columns)
    whole_on_one_line(out, BRANCH, STEP)
    assert max(cell_len(line) for line in out.splitlines()) <= columns
    if columns == 200:  # room for the identifiers whole: a table, the task cut with "…"
        assert "┃ branch" in out and "┃ updated" in out
        assert "Implement multiply" in out and "README" not in out and "…" in out
    if columns == 120:  # a table still, without the column a person can most do without
        assert "┃ branch" in out and "┃ updated" not in out


@pytest.mark.parametrize("role", ["implementer", ROLE])
def test_roles_show_at_80_columns_keeps_every_value_whole(home: Path, role: str) -> None:
    """A role's values are names (models, a template, a strategy) and lists of them: read
    whole, never `claude-sonne…`; the description wraps at its spaces."""
    import json

    resolved = json.loads(run(home, "roles", "show", role, "--json", terminal=False))["role"]
    out = run(home, "roles", "show", role, terminal=True)
    whole_on_one_line(out, *resolved["models"].values(), resolved["context"]["strategy"])
    assert "…" not in out
    assert max(cell_len(line) for line in out.splitlines()) <= 80


def test_config_show_prints_yaml_values_not_python_reprs(home: Path) -> None:
    out = run(home, "config", "show", terminal=False)
    rows = dict(line.split("\t")[:2] for line in out.splitlines() if "\t" in line)
    assert rows["clis.claude.model"] == "null"
    assert rows["clis.claude.credential_env"] == "[ANTHROPIC_API_KEY, ANTHROPIC_AUTH_TOKEN]"
    assert "None" not in out and "['" not in out


def test_every_listing_takes_json(home: Path) -> None:
    import json

    for args in (
        ("status",),
        ("metrics",),
        ("roles", "list"),
        ("roles", "show", ROLE),
        ("config", "show"),
    ):
        out = run(home, *args, "--json", terminal=False)
        json.loads(out)
    lines = run(home, "events", "1", "--json", terminal=False).splitlines()
    assert [json.loads(line)["type"] for line in lines][-1] == "step_finished"


def test_context_takes_json(home: Path) -> None:
    import json

    pack = json.loads(run(home, "context", "planner", "--json", terminal=False))
    assert pack["cli"] and "README.md" in pack["files"] and "tokens" in pack


def test_piped_status_loads_no_rich_table(home: Path) -> None:
    """Plain rows need no layout: a piped `status` does not pay for rich's tables (`events` goes
    through the full command line, whose imports are another matter)."""
    import supervisor

    code = (
        "import sys\nfrom supervisor.cli.entry import main\n"
        "sys.argv = ['supervisor', *sys.argv[1:]]\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print('LOADED', 'rich.table' in sys.modules, 'supervisor.views.tables' in sys.modules)"
    )
    checkout = str(Path(supervisor.__file__).parents[1])
    for args in (["status"],):
        done = subprocess.run(
            [sys.executable, "-c", code, *args, "--repo", str(home / "repo")],
            capture_output=True, text=True, timeout=60, check=True,
            env={**os.environ, "HOME": str(home), "SUPERVISOR_USER_DIR": str(home / "user"),
                 "PYTHONPATH": checkout},
        )  # fmt: skip
        assert done.stdout.splitlines()[-1] == "LOADED False False", (args, done.stdout)


CHECKS = [
    Check("repository", True, "~/repo"),
    Check("sandbox image", True, "supervisor-sandbox:latest-with-a-long-tag (1146 MB, build 21a9)"),
    Check(
        "sandbox DNS",
        True,
        "engine 20.10.24 is affected by CVE-2024-29018, but the host resolver is not on loopback",
        "Upgrade the Docker engine to 26.0.0 or later (or 25.0.5 / 23.0.11).",
        warning=True,
    ),
    Check(
        "claude credentials", False, "No credentials for the claude CLI", "Set ANTHROPIC_API_KEY."
    ),
    Check("gemini credentials", False, "No credentials", "Set GEMINI_API_KEY.", required=False),
]


def test_doctor_never_puts_a_tick_beside_a_finding() -> None:
    terminal = _console(terminal=True)
    terminal.print(doctor_table(CHECKS))
    out = terminal.file.getvalue()  # type: ignore[attr-defined]
    finding = next(line for line in out.splitlines() if "sandbox DNS" in line)
    assert finding.startswith("!") and "✓" not in finding
    whole_on_one_line(out, "supervisor-sandbox:latest-with-a-long-tag")
    assert max(cell_len(line) for line in out.splitlines()) <= 80
    assert_golden("doctor-terminal-80", out)
    piped = _console(terminal=False)
    show(piped, doctor_listing(CHECKS))
    rows = [line.split("\t") for line in piped.file.getvalue().splitlines()]  # type: ignore[attr-defined]
    assert [r[0] for r in rows] == ["ok", "ok", "warning", "failed", "optional"]
    assert rows[2][3].startswith("Upgrade the Docker engine")
    assert_golden("doctor-piped", piped.file.getvalue())  # type: ignore[attr-defined]


def _console(*, terminal: bool) -> Console:
    return Console(file=io.StringIO(), force_terminal=terminal, width=80, color_system=None)


def test_a_component_id_with_a_tab_newline_or_escape_cannot_forge_a_row(tmp_path: Path) -> None:
    """A worker names its component `a\\tb\\nc\\x1b[2J`: piped, the event is still one row of
    eight fields, and the escape is shown, never sent to the terminal."""
    root = tmp_path / "repo"
    root.mkdir()
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "init"], check=True)
    evil = "a\tforged\nforged-row\x1b[2J\x1b]0;owned\x07"
    with Store(root / ".supervisor" / "state.db") as store:
        wf = store.create_workflow(
            description=evil, cli="claude", base_branch="main", base_sha=SHA,
            branch_for_id=lambda i: f"ai/{i}-x", definition={}, first_step=evil,
        )  # fmt: skip
        store.add_event(wf.id, EventSpec("component_merged", step=evil, role=evil,
                                         payload={"component": evil}))  # fmt: skip
    for args, fields in ((("status",), 6), (("events", "1"), 8)):
        done = supervisor(*args, cwd=root, env={"SUPERVISOR_USER_DIR": str(tmp_path / "u")})
        assert done.returncode == 0, done.stderr
        assert "\x1b" not in done.stdout and "\x07" not in done.stdout
        assert all(len(line.split("\t")) == fields for line in done.stdout.splitlines())
        assert "forged-row" not in [line.split("\t")[0] for line in done.stdout.splitlines()]


def test_doctor_remembers_an_images_cli_versions_by_its_id(tmp_path: Path) -> None:
    """An image id is its content's hash: the versions asked once hold for good, so a second
    `doctor` starts no container for them; a file that is not ours is ignored, not trusted."""
    from supervisor.lifecycle.doctor import remember, remembered

    cache = tmp_path / "cache" / "versions.json"
    assert remembered(cache, "sha256:a") is None
    remember(cache, "sha256:a", {"claude": "2.1.197", "codex": None})
    assert remembered(cache, "sha256:a") == {"claude": "2.1.197", "codex": None}
    assert remembered(cache, "sha256:b") is None
    for i in range(12):
        remember(cache, f"sha256:{i}", {"claude": "1.0.0"})
    assert remembered(cache, "sha256:11") and remembered(cache, "sha256:a") is None  # the last 8
    cache.write_text('{"sha256:a": {"claude": ["not", "a", "version"]}}')
    assert remembered(cache, "sha256:a") is None
    cache.write_text("not json")
    assert remembered(cache, "sha256:a") is None
