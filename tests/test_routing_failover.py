"""Failover decisions, one case at a time: which CLI a step runs on, and when a failure moves it
to the role's next CLI (supervisor/routing/failover.py). Pure functions over plain values; the
engine's use of them is pinned in tests/test_failover_engine.py and on the real parts in
tests/test_failover_e2e.py."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from supervisor.context.roles import load_role
from supervisor.core.config import FailoverSettings
from supervisor.core.errors import ConfigError
from supervisor.policy.recovery import Action, Category, Classification
from supervisor.routing import failover
from supervisor.routing.failover import Unavailable
from supervisor.workflow.cli_choice import cli_for
from supervisor.workflow.state import WorkflowState

if TYPE_CHECKING:
    from pathlib import Path

NOW = 1_000_000.0
SETTINGS = FailoverSettings(max_wait_seconds=600, down_seconds=900)
TWO_HOURS = Classification(Category.RESOURCE, Action.WAIT, "rate limited", 7200)
ONE_MINUTE = Classification(Category.RESOURCE, Action.WAIT, "rate limited", 60)
NO_RESET = Classification(Category.RESOURCE, Action.WAIT, "rate limited", None)
API_DOWN = Classification(Category.NETWORK, Action.RETRY_SAME, "API Error: 503")
CRASHED = Classification(Category.CLI_ERROR, Action.RETRY_SAME, "segfault")


def limited(until: float | None, cause: failover.Cause = "rate_limited") -> Unavailable:
    return Unavailable(cause=cause, since=NOW - 1, until=until)


# -- which CLI a step runs on ---------------------------------------------------------------------


def test_a_step_runs_on_the_preferred_cli_while_nothing_is_unavailable() -> None:
    assert failover.choose(["claude", "codex"], {}, NOW) == "claude"


def test_a_step_skips_a_cli_until_its_reset_and_returns_to_it_after() -> None:
    gone = {"claude": limited(NOW + 7200)}
    assert failover.choose(["claude", "codex", "gemini"], gone, NOW) == "codex"
    assert failover.choose(["claude", "codex", "gemini"], gone, NOW + 7199) == "codex"
    assert failover.choose(["claude", "codex", "gemini"], gone, NOW + 7200) == "claude"


def test_fallbacks_are_taken_in_the_order_the_role_lists_them() -> None:
    gone = {"claude": limited(NOW + 60), "codex": limited(None, "credentials")}
    assert failover.choose(["claude", "codex", "gemini"], gone, NOW) == "gemini"


def test_with_every_cli_unavailable_the_preferred_one_is_chosen_to_wait_for() -> None:
    gone = {"claude": limited(NOW + 60), "codex": limited(NOW + 60)}
    assert failover.choose(["claude", "codex"], gone, NOW) == "claude"


def test_a_role_without_a_cli_runs_on_the_tasks_cli() -> None:
    assert failover.chain([], "gemini") == ["gemini"]
    assert failover.chain(["codex", "claude"], "gemini") == ["codex", "claude"]


# -- which failures leave a CLI -------------------------------------------------------------------


def test_a_rate_limit_past_the_configured_wait_leaves_the_cli_a_shorter_one_is_waited_out() -> None:
    assert failover.cause_of(TWO_HOURS, exhausted=False, settings=SETTINGS) == "rate_limited"
    assert failover.cause_of(ONE_MINUTE, exhausted=False, settings=SETTINGS) is None
    assert failover.cause_of(NO_RESET, exhausted=False, settings=SETTINGS) is None
    assert failover.cause_of(NO_RESET, exhausted=True, settings=SETTINGS) == "rate_limited"


def test_an_api_down_leaves_the_cli_only_once_the_retry_policys_attempts_are_spent() -> None:
    assert failover.cause_of(API_DOWN, exhausted=False, settings=SETTINGS) is None
    assert failover.cause_of(API_DOWN, exhausted=True, settings=SETTINGS) == "api_down"


def test_a_crashing_cli_is_not_a_reason_to_fail_over() -> None:
    assert failover.cause_of(CRASHED, exhausted=True, settings=SETTINGS) is None


def test_how_long_a_cli_is_passed_over_depends_on_the_cause() -> None:
    assert failover.until_for("rate_limited", TWO_HOURS, NOW, SETTINGS) == NOW + 7200
    assert failover.until_for("rate_limited", NO_RESET, NOW, SETTINGS) == NOW + 900
    assert failover.until_for("api_down", API_DOWN, NOW, SETTINGS) == NOW + 900
    assert failover.until_for("credentials", None, NOW, SETTINGS) is None


# -- the decision ---------------------------------------------------------------------------------


def test_a_failure_on_the_preferred_cli_moves_the_step_to_the_first_fallback() -> None:
    clis = ["claude", "codex"]
    moved = failover.decide(clis, "claude", "rate_limited", "429", NOW + 7200, {}, NOW)
    assert moved is not None
    assert (moved.from_cli, moved.to_cli, moved.cause) == ("claude", "codex", "rate_limited")
    assert moved.unavailable.until == NOW + 7200
    assert moved.payload() == {
        "from": "claude",
        "to": "codex",
        "cause": "rate_limited",
        "until": NOW + 7200,
        "reason": "429",
    }


def test_without_a_fallback_there_is_no_failover() -> None:
    assert failover.decide(["claude"], "claude", "rate_limited", "", NOW + 60, {}, NOW) is None


def test_a_cli_outside_the_roles_list_has_no_failover() -> None:
    # The step ran on the task's CLI (`--cli`), which the role's list does not name.
    assert failover.decide(["claude", "codex"], "gemini", "api_down", "", None, {}, NOW) is None


def test_a_failing_fallback_moves_on_to_the_next_available_one_or_to_none() -> None:
    gone = {"claude": limited(NOW + 7200)}
    clis = ["claude", "codex", "gemini"]
    moved = failover.decide(clis, "codex", "api_down", "", NOW + 900, gone, NOW)
    assert moved is not None and moved.to_cli == "gemini"
    gone["gemini"] = limited(None, "credentials")
    assert failover.decide(clis, "codex", "api_down", "", NOW + 900, gone, NOW) is None


def test_a_failing_fallback_goes_back_to_the_preferred_cli_once_its_reset_passed() -> None:
    gone = {"claude": limited(NOW - 1)}
    moved = failover.decide(["claude", "codex"], "codex", "api_down", "", NOW + 900, gone, NOW)
    assert moved is not None and moved.to_cli == "claude"


def test_expired_unavailability_is_dropped_when_the_engine_writes() -> None:
    gone = {"claude": limited(NOW - 1), "codex": limited(NOW + 1), "gemini": limited(None)}
    assert sorted(failover.current_unavailable(gone, NOW)) == ["codex", "gemini"]


# -- the selection point and the typed state ------------------------------------------------------


def role_file(repo: Path, name: str, text: str) -> None:
    path = repo / ".supervisor" / "roles" / f"{name}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_the_worker_asks_the_workflow_state_which_cli_to_use(tmp_path: Path) -> None:
    role_file(tmp_path, "implementer", "extends: implementer\ncli: [claude, codex]\n")
    role = load_role("implementer", tmp_path)
    state = WorkflowState(unavailable={"claude": limited(NOW + 7200)})
    stored = WorkflowState.load(state.dump()).dump()  # through the database's JSON and back
    assert cli_for(role, "gemini", {}, NOW) == "claude"
    assert cli_for(role, "gemini", stored, NOW) == "codex"
    assert cli_for(role, "gemini", stored, NOW + 7200) == "claude"


def test_a_stored_unavailability_with_an_unknown_cause_is_refused_as_invalid_state() -> None:
    from supervisor.core.errors import StateError

    bad = {"unavailable": {"claude": {"cause": "bored", "since": NOW}}}
    with pytest.raises(StateError, match="unavailable"):
        WorkflowState.load(bad)


# -- role files -----------------------------------------------------------------------------------


def test_a_cli_list_in_a_role_is_the_preferred_cli_then_its_fallbacks(tmp_path: Path) -> None:
    role_file(tmp_path, "implementer", "extends: implementer\ncli: [codex, gemini, claude]\n")
    role = load_role("implementer", tmp_path)
    assert role.cli == "codex"
    assert role.fallbacks == ["gemini", "claude"]
    assert role.clis == ["codex", "gemini", "claude"]


def test_a_childs_cli_list_replaces_its_parents_instead_of_appending(tmp_path: Path) -> None:
    role_file(tmp_path, "base_impl", "extends: implementer\ncli: [claude, codex]\n")
    role_file(tmp_path, "child_impl", "extends: base_impl\ncli: [gemini]\n")
    assert load_role("base_impl", tmp_path).clis == ["claude", "codex"]
    assert load_role("child_impl", tmp_path).clis == ["gemini"]


def test_the_roles_model_applies_to_its_preferred_cli_only() -> None:
    from supervisor.context.roles import Role

    role = Role(
        name="x", template="t", output="plan", cli="claude", fallbacks=["codex"], model="opus"
    )
    assert role.model_for("claude", "claude-sonnet-4-5") == "opus"
    assert role.model_for("codex", "gpt-5.5") == "gpt-5.5"  # the fallback's own default


@pytest.mark.parametrize(
    ("cli", "problem"),
    [
        ("[claude, cluade]", "unknown CLI(s) 'cluade'"),
        ("[claude, codex, claude]", "'claude' more than once"),
        ("[]", "is an empty list"),
        ("copilot", "unknown CLI(s) 'copilot'"),
    ],
)
def test_a_bad_cli_list_is_a_config_error_naming_the_role_and_the_known_clis(
    tmp_path: Path, cli: str, problem: str
) -> None:
    role_file(tmp_path, "implementer", f"extends: implementer\ncli: {cli}\n")
    with pytest.raises(ConfigError) as caught:
        load_role("implementer", tmp_path)
    assert "Role 'implementer'" in caught.value.message
    assert problem in caught.value.message
    assert "Known CLIs: claude, codex, gemini" in caught.value.message
    assert "cli: [claude, codex]" in (caught.value.hint or "")


def test_the_failover_settings_come_from_limits_yaml_and_a_project_overrides_them(
    tmp_path: Path,
) -> None:
    from supervisor.core.config import load_settings

    assert load_settings(None).failover == FailoverSettings(max_wait_seconds=600, down_seconds=900)
    (tmp_path / ".supervisor").mkdir()
    (tmp_path / ".supervisor" / "config.yaml").write_text("failover: {max_wait_seconds: 30}\n")
    assert load_settings(tmp_path).failover.max_wait_seconds == 30
    (tmp_path / ".supervisor" / "config.yaml").write_text("failover: {max_wait: 30}\n")
    with pytest.raises(ConfigError, match="max_wait"):
        load_settings(tmp_path)


def test_the_command_line_prints_the_bad_list_and_its_fix_as_written(tmp_path: Path) -> None:
    """Brackets in an error are text, not console markup (`[claude, codex]` used to vanish)."""
    import subprocess

    from cli_support import supervisor

    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "first"], check=True)
    role_file(tmp_path, "implementer", "extends: implementer\ncli: [claude, cluade]\n")
    command = ["roles", "show", "implementer", "--repo", str(tmp_path)]
    result = supervisor(*command, env={"SUPERVISOR_USER_DIR": str(tmp_path / "user")}, columns=300)
    assert result.returncode == 2
    err = " ".join(result.stderr.split())
    assert "`cli: ['claude', 'cluade']` names unknown CLI(s) 'cluade'" in err
    assert "such as `cli: [claude, codex]`" in err
