"""Adaptive assignment, specified on a real SQLite state database seeded with recorded runs: the
next run of a role goes to the CLI that has done its kind of work best, unless the figures are
too few, the gain too small, or a person locked the role to a CLI."""

from __future__ import annotations

import json
import subprocess
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import pytest
from cli_support import supervisor
from e2e_support import new_repo
from routing_support import gemini_beats_claude_at_review, record_run

from supervisor.core.config import AdaptiveSettings, AdaptiveWeights, load_settings
from supervisor.core.errors import ConfigError
from supervisor.guard.trust import trust
from supervisor.lifecycle import tasks
from supervisor.lifecycle.demo import make_demo_repo
from supervisor.lifecycle.opening import start_preview
from supervisor.routing import adaptive, history, route
from supervisor.sandbox.standin import StandinSandbox, WorkerCall, answer
from supervisor.state.records import EventSpec
from supervisor.state.store import Store

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path


@pytest.fixture
def store(tmp_path: Path, api_keys: None) -> Iterator[Store]:
    with Store(tmp_path / "state.db") as s:
        yield s


def choice_for(
    tmp_path: Path, store: Store, role: str = "reviewer", **adaptive_conf: Any
) -> adaptive.Choice:
    settings = load_settings(None, {"adaptive": adaptive_conf} if adaptive_conf else None)
    return route.choose_for_role(tmp_path, settings, store, role, "claude")


def test_twelve_reviews_where_gemini_beats_claude_send_the_next_review_to_gemini(
    tmp_path: Path, store: Store
) -> None:
    gemini_beats_claude_at_review(store)
    choice = choice_for(tmp_path, store)
    assert (choice.cli, choice.default, choice.basis) == ("gemini", "claude", "adapted")
    assert choice.scores["gemini"] > choice.scores["claude"] + 0.05
    assert choice.figures["claude"]["success_rate"] == pytest.approx(2 / 6, abs=1e-3)
    assert choice.figures["gemini"]["runs"] == 6
    event = choice.event("review")
    assert (event.type, event.step, event.role) == ("cli_chosen", "review", "reviewer")
    assert event.payload is not None and event.payload["cli"] == "gemini"
    assert "12 review runs" in event.payload["reason"]


def test_a_locked_assignment_wins_over_the_figures(tmp_path: Path, store: Store) -> None:
    gemini_beats_claude_at_review(store)
    choice = choice_for(tmp_path, store, locked_assignments={"reviewer": "claude"})
    assert (choice.cli, choice.basis) == ("claude", "locked")
    assert route.worth_recording(choice)  # the lock is said in the events, too


def test_a_lock_to_a_cli_with_no_settings_is_a_config_error(tmp_path: Path, store: Store) -> None:
    with pytest.raises(ConfigError, match="'reviewer' to 'copilot'") as raised:
        choice_for(tmp_path, store, locked_assignments={"reviewer": "copilot"})
    assert "claude, codex, gemini" in raised.value.hint


def test_too_few_recorded_runs_keep_the_configured_cli(tmp_path: Path, store: Store) -> None:
    gemini_beats_claude_at_review(store)
    choice = choice_for(tmp_path, store, min_samples_before_adapt=13)
    assert (choice.cli, choice.basis) == ("claude", "too_few_runs")
    assert "12 review runs" in choice.reason


def test_runs_older_than_the_window_do_not_count(store: Store) -> None:
    gemini_beats_claude_at_review(store)
    later = datetime.now(UTC) + timedelta(days=8)
    assert history.snapshot(store, "reviewer", "review", 7, at=later).stats == {}
    assert history.snapshot(store, "reviewer", "review", 9, at=later).runs(["claude"]) == 6


def test_a_run_whose_work_a_gate_sent_back_is_no_success_although_the_cli_exited_cleanly(
    tmp_path: Path, store: Store
) -> None:
    for i in range(6):  # claude's implementations all exit cleanly, but 4 fail the test gate
        record_run(
            store, role="implementer", cli="claude", task_type="implementation",
            step="implement", sent_back=i < 4, cost=0.05,
        )  # fmt: skip
        record_run(
            store, role="implementer", cli="codex", task_type="implementation",
            step="implement/calc", cost=0.05,
        )  # fmt: skip
    snap = history.snapshot(store, "implementer", "implementation", 7)
    assert (snap.stats["claude"].runs, snap.stats["claude"].successes) == (6, 2)
    assert snap.stats["codex"].success_rate == 1.0  # a component's run answers for its step
    choice = choice_for(tmp_path, store, role="implementer")
    assert (choice.cli, choice.basis) == ("codex", "adapted")


def test_a_gain_below_the_margin_keeps_the_default(tmp_path: Path, store: Store) -> None:
    for i in range(10):
        record_run(store, role="reviewer", cli="claude", task_type="review", step="review",
                   success=i != 0)  # fmt: skip
        record_run(store, role="reviewer", cli="gemini", task_type="review", step="review")
    # 90% against 100% at the same cost: gemini scores 0.07 more
    kept = choice_for(tmp_path, store, switch_margin=0.1)
    assert kept.scores["gemini"] - kept.scores["claude"] == pytest.approx(0.07)
    assert (kept.cli, kept.basis) == ("claude", "kept")
    assert "not better by the margin 0.1" in kept.reason
    assert choice_for(tmp_path, store, switch_margin=0.05).cli == "gemini"


def test_a_cheaper_cli_may_not_win_by_losing_too_much_success(store: Store) -> None:
    snap = adaptive.Snapshot(
        role="reviewer",
        task_type="review",
        window_days=7,
        stats={
            "claude": adaptive.CliStats(cli="claude", runs=10, successes=9, avg_cost_usd=1.0),
            "codex": adaptive.CliStats(cli="codex", runs=10, successes=6, avg_cost_usd=0.01),
        },
    )
    weights = AdaptiveWeights(success=0.5, cost=0.5)
    loose = AdaptiveSettings(weights=weights, max_deviation_from_default=0.5)
    strict = AdaptiveSettings(weights=weights, max_deviation_from_default=0.2)
    assert adaptive.choose("reviewer", "review", ["claude", "codex"], snap, loose).cli == "codex"
    kept = adaptive.choose("reviewer", "review", ["claude", "codex"], snap, strict)
    assert (kept.cli, kept.basis) == ("claude", "kept")
    assert "60% success against 90% is more than max_deviation_from_default (20%)" in kept.reason


def test_a_cli_without_credentials_is_never_chosen(
    tmp_path: Path, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    gemini_beats_claude_at_review(store)
    monkeypatch.delenv("GEMINI_API_KEY")
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no gemini login files either
    choice = choice_for(tmp_path, store)
    assert "gemini" not in choice.candidates
    assert choice.cli == "claude"


def test_with_adaptive_off_the_role_runs_where_configured_and_nothing_is_recorded(
    tmp_path: Path, store: Store
) -> None:
    gemini_beats_claude_at_review(store)
    choice = choice_for(tmp_path, store, enabled=False)
    assert (choice.cli, choice.basis) == ("claude", "disabled")
    assert not route.worth_recording(choice)


# -- what a person sees: suggestions and dry runs ---------------------------------------------


def cli(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return supervisor(*args, "--repo", str(repo))


def test_metrics_suggest_names_retries_pruned_context_and_a_failing_cli_with_the_figures(
    tmp_path: Path, api_keys: None
) -> None:
    repo = new_repo(tmp_path, "http://127.0.0.1:9", cli="claude")
    with tasks.reading(repo) as store:
        gemini_beats_claude_at_review(store)  # claude: 2 of 6 reviews usable
        wf_id = record_run(
            store, role="implementer", cli="claude", task_type="implementation", step="implement"
        )
        for _ in range(3):  # the same task's implement step ran 4 times
            record_run(store, role="implementer", cli="claude", task_type="implementation",
                       step="implement", workflow_id=wf_id)  # fmt: skip
        for pruned in ([{"section": "files", "path": "big.py", "tokens": 9000}], [], [{}]):
            payload = {"budget": 25000, "pruned": pruned}
            store.add_event(wf_id, EventSpec("context_packed", role="planner", payload=payload))
    shown = cli(repo, "metrics", "--suggest")
    assert shown.returncode == 0, shown.stderr
    text = shown.stdout
    assert "- implementer: high retry rate: 3.0 retries per task (> 2)" in text
    assert "- planner: context budget often too small: 67% of 3 packs pruned" in text
    assert "token_budget=25000" in text
    assert "- claude: claude fails review: 33% accepted the first time" in text
    assert "gemini succeeds in 100% of review runs" in text
    data = json.loads(cli(repo, "metrics", "--suggest", "--json").stdout)
    assert {(s["kind"], s["subject"]) for s in data} == {
        ("high_retries", "implementer"),
        ("context_pruned", "planner"),
        ("cli_fails_task_type", "claude"),
    }


def test_the_dry_runs_show_which_cli_a_role_would_run_on_and_why(
    tmp_path: Path, api_keys: None
) -> None:
    repo = new_repo(tmp_path, "http://127.0.0.1:9", cli="claude")
    assert "CLI: reviewer → claude (too_few_runs: 0 review runs" in " ".join(
        cli(repo, "context", "reviewer").stdout.split()
    )
    with tasks.reading(repo) as store:
        gemini_beats_claude_at_review(store)
    shown = " ".join(cli(repo, "context", "reviewer").stdout.split())
    assert "CLI: reviewer → gemini (adapted: gemini scores" in shown
    preview = start_preview("Fix multiply", repo)
    assert "routing   reviewer → gemini (adapted:" in preview
    assert "routing   implementer → claude (too_few_runs:" in preview


# -- through the engine (the stand-in sandbox: scripted workers, real git and SQLite) -----------

WORKFLOW = (
    "workflow:\n  initial_step: implement\n  steps:\n"
    "    implement: {role: implementer, next: commit}\n"
    "    commit: {action: commit}\n"
)


def standin_project(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, adaptive_yaml: str
) -> tuple[Path, list[WorkerCall]]:
    root = make_demo_repo(tmp_path / "repo")
    (root / ".supervisor").mkdir(exist_ok=True)
    (root / ".supervisor" / "config.yaml").write_text(
        "clis:\n  claude:\n    base_url: http://127.0.0.1:9\n" + adaptive_yaml
    )
    (root / ".supervisor" / "workflow.yaml").write_text(WORKFLOW)
    trust(root)
    calls: list[WorkerCall] = []

    def worker(call: WorkerCall) -> str:
        calls.append(call)
        call.write("answer.txt", "42\n")
        return answer({"status": "SUCCESS", "summary": "wrote it", "files_created": ["answer.txt"]})

    monkeypatch.setattr(tasks, "open_sandbox", lambda project, clis, **_: StandinSandbox(worker))
    return root, calls


def test_the_engine_records_its_choice_in_the_steps_transition(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, api_keys: None
) -> None:
    root, calls = standin_project(
        tmp_path, monkeypatch, "adaptive: {locked_assignments: {implementer: claude}}\n"
    )
    wf = tasks.start_task("Write the answer", root)
    assert wf.status == "completed" and len(calls) == 1
    with tasks.reading(root) as store:
        events = store.events(wf.id)
    (chosen,) = [e for e in events if e.type == "cli_chosen"]
    assert (chosen.step, chosen.role, chosen.status) == ("implement", "implementer", "locked")
    # committed in the step's transition: right after its run's own record, before the commit
    order = [e.type for e in events]
    assert order.index("implementation") + 1 == order.index("cli_chosen") < order.index("commit")


def test_a_lock_to_an_unknown_cli_fails_the_step_before_any_worker_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, api_keys: None
) -> None:
    root, calls = standin_project(
        tmp_path, monkeypatch, "adaptive: {locked_assignments: {implementer: copilot}}\n"
    )
    with pytest.raises(ConfigError, match="'implementer' to 'copilot'"):
        tasks.start_task("Write the answer", root)
    assert calls == []
    with tasks.reading(root) as store:
        wf = store.workflows()[0]
    assert wf.status == "failed" and "copilot" in (wf.error or "")
