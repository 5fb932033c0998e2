"""The first hour of a new user (issue 28): what `supervisor` says when it is new to them, run
in-process as a shell would run it (tests/cli_support.py) on real git repositories and files.

Help that groups the commands and shows examples; a bare `supervisor` that is not an error; a
demo that never overwrites a directory of theirs, and that asks for `setup` before it needs it;
errors that name the cause and the fix that fits this installation; figures that keep their
digits; a start preview that says when the approval policy may stop the run."""

from __future__ import annotations

import subprocess
from typing import TYPE_CHECKING

import pytest
from cli_support import supervisor

from supervisor.core import resources
from supervisor.core.config import load_settings
from supervisor.core.errors import SandboxError
from supervisor.guard.trust import trust
from supervisor.lifecycle import demo
from supervisor.lifecycle.demo import make_demo_repo
from supervisor.policy import approvals
from supervisor.policy.budgets import describe_spend, dollars
from supervisor.sandbox import reach
from supervisor.workflow.loading import load_workflow

if TYPE_CHECKING:
    from pathlib import Path


@pytest.fixture
def user_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SUPERVISOR_USER_DIR", str(tmp_path / "user"))
    return tmp_path / "user"


# -- help ----------------------------------------------------------------------------------------


def test_a_bare_supervisor_shows_the_grouped_help_and_exits_0() -> None:
    bare = supervisor()
    assert bare.returncode == 0, bare.stderr
    for panel in ("Everyday", "Approvals", "Project set-up", "Team / scale-out", "Maintenance"):
        assert panel in bare.stdout
    assert bare.stdout.index("start-task") < bare.stdout.index("Approvals")
    assert bare.stdout.index("Approvals") < bare.stdout.index("│ approve ")
    assert "EXAMPLES" in bare.stdout
    assert "10 waiting for a person" in bare.stdout  # the exit code a script must know


@pytest.mark.parametrize("command", ["start-task", "status", "approve", "resume", "demo"])
def test_the_main_commands_take_dash_h_and_show_examples(command: str) -> None:
    shown = supervisor(command, "-h")
    assert shown.returncode == 0, shown.stderr
    assert "EXAMPLES" in shown.stdout
    assert f"$ supervisor {command}" in shown.stdout


def test_status_help_documents_exit_status() -> None:
    shown = supervisor("status", "--help").stdout
    assert "--exit-status" in shown and "10 if it waits for a person" in shown


# -- the demo ------------------------------------------------------------------------------------


def test_demo_keep_refuses_a_directory_with_the_users_files_and_touches_nothing(
    tmp_path: Path,
) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "README.md").write_text("my notes\n")
    (mine / "plan.txt").write_text("do not commit me\n")

    refused = supervisor("demo", "--keep", str(mine))

    assert refused.returncode == 2
    assert "is not empty and is not an earlier demo's directory" in refused.stderr
    assert "fix: Name a new or empty directory" in refused.stderr
    assert sorted(p.name for p in mine.iterdir()) == ["README.md", "plan.txt"]
    assert (mine / "README.md").read_text() == "my notes\n"


def test_demo_keep_runs_again_in_an_earlier_demos_directory_and_says_so(tmp_path: Path) -> None:
    earlier = make_demo_repo(tmp_path / "demo")
    (earlier / "calc.py").write_text("changed by the earlier demo's task, then committed\n")
    git = ["git", "-C", str(earlier), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "commit", "-qam", "the earlier demo's work"], check=True)

    note = demo.check_keep(earlier)
    again = make_demo_repo(earlier)

    assert note is not None and "holds an earlier demo" in note
    assert (again / "calc.py").read_text() == demo.CALC_STUB  # the stub is back, committed
    assert subprocess.run([*git, "status", "--porcelain"], capture_output=True, text=True,
                          check=True).stdout == ""  # fmt: skip


def test_demo_keep_refuses_an_earlier_demo_with_changes_of_the_users(tmp_path: Path) -> None:
    earlier = make_demo_repo(tmp_path / "demo")
    (earlier / "mine.txt").write_text("mine\n")
    refused = supervisor("demo", "--keep", str(earlier))
    assert refused.returncode == 2
    assert "holds an earlier demo with changes of yours" in refused.stderr
    assert (earlier / "mine.txt").read_text() == "mine\n"


def test_demo_keep_leaves_an_edited_config_of_an_earlier_demo_alone(tmp_path: Path) -> None:
    """The demo writes `.supervisor/config.yaml` each run (its scripted API's new port); a run
    in an earlier demo's directory whose config the user edited since is refused, the file
    named, and nothing touched. The demo's own config, unedited, is rewritten as before."""
    earlier = make_demo_repo(tmp_path / "demo")
    demo.write_project_config(earlier, "http://127.0.0.1:41001")
    assert demo.check_keep(earlier) is not None  # as the demo left it: runs again
    demo.write_project_config(earlier, "http://127.0.0.1:41002")  # a second demo run's port
    assert demo.check_keep(earlier) is not None

    config = earlier / ".supervisor" / "config.yaml"
    mine = config.read_text() + "limits:\n  max_retries: 9   # mine\n"
    config.write_text(mine)
    refused = supervisor("demo", "--keep", str(earlier))

    assert refused.returncode == 2
    text = " ".join(refused.stderr.split())
    assert ".supervisor/config.yaml" in text and "edited" in text
    assert "fix:" in text
    assert config.read_text() == mine  # untouched


def test_demo_before_setup_says_to_run_setup_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(resources, "NODE_MODULES", tmp_path / "nothing-installed")
    refused = supervisor("demo", "--keep", str(tmp_path / "new"))
    assert refused.returncode == 3
    assert "The demo needs what setup installs" in refused.stderr
    assert f"fix: Run `{resources.setup_command()}` first" in refused.stderr
    assert "o200k" not in refused.stderr
    assert not (tmp_path / "new").exists()  # nothing made before it could run


# -- errors that fit -----------------------------------------------------------------------------


def test_docker_out_of_reach_names_where_it_looked_and_the_fix_for_this_install() -> None:
    via_env = reach.unreachable("connection refused", "tcp://10.0.0.9:2375")
    assert "DOCKER_HOST=tcp://10.0.0.9:2375" in via_env.message
    assert "unset DOCKER_HOST" in via_env.hint
    local = reach.unreachable("connection refused", None)
    assert "unix:///var/run/docker.sock" in local.message
    assert resources.setup_command() in local.hint
    # This test runs from a source checkout: the fix is its script, not `supervisor setup`.
    assert resources.setup_command().endswith("scripts/setup.sh")


def test_the_real_docker_client_at_a_dead_docker_host_is_told_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from supervisor.sandbox.docker import connect

    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no.sock")
    with pytest.raises(SandboxError) as caught:
        connect()
    assert f"DOCKER_HOST=unix://{tmp_path}/no.sock" in caught.value.message


def test_metrics_with_a_period_it_cannot_read_is_a_usage_error(
    tmp_path: Path, user_dir: Path
) -> None:
    repo = make_demo_repo(tmp_path / "repo")
    refused = supervisor("metrics", "--last", "yesterday", "--repo", str(repo))
    assert refused.returncode == 2
    assert "--last 'yesterday' is not a period" in refused.stderr
    assert "fix: Use a number and d, h or m" in refused.stderr


def test_an_empty_status_says_how_to_start_a_task(tmp_path: Path, user_dir: Path) -> None:
    repo = make_demo_repo(tmp_path / "repo")
    shown = supervisor("status", "--repo", str(repo))
    assert shown.returncode == 0
    assert 'Start one: supervisor start-task "what to do"' in shown.stdout
    assert supervisor("status", "--json", "--repo", str(repo)).stdout.strip() == "[]"


# -- figures -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("amount", "shown"),
    [(0.002, "$0.002"), (0.0031, "$0.0031"), (0.00314, "$0.0031"), (2, "$2.00"), (0, "$0.00"),
     (12.345, "$12.35"), (0.5, "$0.50")],
)  # fmt: skip
def test_money_keeps_the_digits_that_matter(amount: float, shown: str) -> None:
    assert dollars(amount) == shown


def test_a_tiny_budget_is_not_shown_as_nothing() -> None:
    line = describe_spend({"usd": 0.0031, "tokens": 900}, {"usd": 0.002, "tokens": None})
    assert line.startswith("$0.0031 of $0.002")


# -- the start preview ---------------------------------------------------------------------------


def configured(tmp_path: Path) -> Path:
    repo = make_demo_repo(tmp_path / "repo")
    (repo / ".supervisor").mkdir()
    (repo / ".supervisor" / "config.yaml").write_text("gates: {test: make test}\n")
    return repo


def test_the_start_preview_says_when_the_approval_policy_may_stop_the_run(
    tmp_path: Path, user_dir: Path
) -> None:
    repo = configured(tmp_path)
    line = approvals.preview_line(load_workflow(repo, load_settings(repo)), repo)
    assert not line.startswith("none: the run goes to the end")
    assert line.startswith("none planned; the approval policy stops before 'commit'")
    assert "the change touches auth/payment/keys paths" in line
    assert "a reviewer lists security concerns" in line


def test_a_policy_that_never_stops_leaves_the_run_to_go_to_the_end(
    tmp_path: Path, user_dir: Path
) -> None:
    repo = configured(tmp_path)
    (repo / ".supervisor" / "approval_policy.yaml").write_text(
        "levels:\n  critical: {action: auto_approve}\n  high: {action: auto_approve}\n"
    )
    trust(repo)
    line = approvals.preview_line(load_workflow(repo, load_settings(repo)), repo)
    assert line == "none: the run goes to the end without stopping"
