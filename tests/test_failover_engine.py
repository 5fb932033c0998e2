"""Failover in the engine, fast: the real engine, SQLite, git and the claude and codex adapters'
parsing, with the stand-in sandbox of tests/test_engine_fast.py (a scripted worker answers in the
output format of the CLI it was started as). The same on the real binaries against the scripted
API is tests/test_failover_e2e.py."""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

import pytest
from test_engine_fast import (
    FAN_OUT,
    GATE,
    Project,
    Watcher,
    api_error,
    component,
    no_waiting,
    plans,
    reviews,
    writes,
)
from test_engine_fast import project as project  # the fixture, used by `make`

from supervisor.core.errors import CredentialsError
from supervisor.guard.trust import trust
from supervisor.lifecycle import tasks
from supervisor.lifecycle.demo import make_demo_repo
from supervisor.sandbox.standin import WorkerCall

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

WORKFLOW = """implement
  steps:
    implement: {role: implementer, next: test, max_retries: 3}
    test: {gate: test, next: review, on_fail: implement}
    review: {role: reviewer, next: commit}
    commit: {action: commit}
"""
TWO_HOURS = "429 rate limit exceeded, try again in 7200 seconds"
FIVE_SECONDS = "429 rate limit exceeded, retry after 5 s"
ONE_SECOND = "429 rate limit exceeded, retry after 1 s"


def on(cli: str, do: Callable[[WorkerCall], str]) -> Callable[[WorkerCall], str]:
    """A scripted worker that must run as `cli`, answering in that CLI's output format."""

    def run(call: WorkerCall) -> str:
        assert call.argv[0] == cli, f"ran as {call.argv[0]}, expected {cli}"
        out = do(call)
        return out if cli == "claude" else as_codex(out)

    return run


def as_codex(claude_stdout: str) -> str:
    """The same answer as `codex exec --json` prints it."""
    result = json.loads(claude_stdout.strip().splitlines()[-1])
    lines: list[dict[str, Any]] = [{"type": "thread.started", "thread_id": "standin-thread"}]
    if result["is_error"]:
        lines.append({"type": "turn.failed", "error": {"message": result["result"]}})
    else:
        message = {"type": "agent_message", "text": result["result"]}
        lines.append({"type": "item.completed", "item": message})
        lines.append({"type": "turn.completed", "usage": {"input_tokens": 100, "output_tokens": 9}})
    return "".join(json.dumps(line) + "\n" for line in lines)


def with_clis(p: Project, **roles: str) -> Project:
    for role, clis in roles.items():
        path = p.root / ".supervisor" / "roles" / f"{role}.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"extends: {role}\ncli: {clis}\n")
    return p


@pytest.fixture
def make(project: Callable[..., Project]) -> Callable[..., Project]:
    """A project as in tests/test_engine_fast.py (imported there as `project`)."""
    return project


def shown(p: Project) -> str:
    """What `supervisor status <id>` prints for the task."""
    from rich.console import Console

    from supervisor.views.render import workflow_detail

    console = Console(width=200, record=True)
    with tasks.reading(p.root) as store:
        console.print(workflow_detail(store, 1))
    return console.export_text()


def clis_run(p: Project) -> list[tuple[str, str]]:
    return [(c.role, c.argv[0]) for _, c in p.script.calls]


def test_a_two_hour_rate_limit_moves_the_step_to_the_fallback_and_later_steps_stay_there(
    make: Callable[..., Project],
) -> None:
    p = with_clis(
        make(
            WORKFLOW,
            GATE,
            ("ROLE: implementer", on("claude", api_error(TWO_HOURS, 429))),
            ("ROLE: implementer", on("codex", writes({"answer.txt": "right\n"}))),
            ("ROLE: reviewer", on("codex", reviews("APPROVED"))),
        ),
        implementer="[claude, codex]",
        reviewer="[claude, codex]",
    )
    started = time.time()
    wf = p.start()

    assert wf.status == "completed"
    assert p.on_branch("answer.txt") == "right\n"
    # The review did not try claude again: it is remembered as limited until its reset.
    assert clis_run(p) == [
        ("implementer", "claude"),
        ("implementer", "codex"),
        ("reviewer", "codex"),
    ]
    (moved,) = p.events("failover")
    assert moved.step == "implement" and moved.status == "rate_limited"
    assert (moved.payload["from"], moved.payload["to"]) == ("claude", "codex")
    assert moved.payload["until"] == pytest.approx(started + 7200, abs=60)
    assert not p.events("retry_scheduled")  # no wait was scheduled
    limited = p.workflow().context["unavailable"]["claude"]
    assert limited["cause"] == "rate_limited"
    assert "claude passed over until" in shown(p) and "(rate_limited)" in shown(p)
    # The same checkpoint: the fallback worked from the same base, with the same prompt.
    (_, first), (_, second) = p.script.calls[:2]
    assert first.prompt.replace("step1", "stepN") == second.prompt.replace("step2", "stepN")


def test_a_limited_component_fails_over_while_the_other_merges_on_the_preferred_cli(
    make: Callable[..., Project],
) -> None:
    p = with_clis(
        make(
            FAN_OUT,
            {"test": "test -f slow.txt && test -f q.txt"},
            ("ROLE: planner", plans(component("slow", "slow.txt"), component("quick", "q.txt"))),
            ("'slow'", on("claude", api_error(TWO_HOURS, 429))),
            ("'quick'", on("claude", writes({"q.txt": "q\n"}))),
            ("'slow'", on("codex", writes({"slow.txt": "s\n"}))),
        ),
        implementer="[claude, codex]",
    )
    wf = p.start()

    assert wf.status == "completed"
    assert [e.payload["component"] for e in p.events("component_merged")] == ["quick", "slow"]
    (moved,) = p.events("failover")
    assert moved.step == "implement" and (moved.payload["from"], moved.payload["to"]) == (
        "claude",
        "codex",
    )
    runs = sorted((c.step, c.argv[0]) for _, c in p.script.calls if c.role == "implementer")
    assert runs == [
        ("implement/quick", "claude"),
        ("implement/slow", "claude"),
        ("implement/slow", "codex"),
    ]
    assert not p.events("rate_limit_over")


def test_without_a_fallback_a_long_rate_limit_is_still_the_waiting_state(
    make: Callable[..., Project], monkeypatch: pytest.MonkeyPatch
) -> None:
    slept = no_waiting(monkeypatch)
    p = make(
        WORKFLOW,
        GATE,
        ("ROLE: implementer", on("claude", api_error(TWO_HOURS, 429))),
        ("ROLE: implementer", on("claude", writes({"answer.txt": "right\n"}))),
        ("ROLE: reviewer", on("claude", reviews("APPROVED"))),
    )
    watcher = Watcher(p.root)
    wf = p.start(watcher)

    assert wf.status == "completed"
    assert [s for t, s in watcher.seen if t.startswith("rate limited")] == ["rate_limited"]
    assert slept == [pytest.approx(7200, abs=5)]  # the engine waited for the reset
    assert not p.events("failover")
    assert [c for _, c in clis_run(p)] == ["claude", "claude", "claude"]


def test_a_rate_limit_shorter_than_the_configured_wait_is_waited_out_even_with_a_fallback(
    make: Callable[..., Project], monkeypatch: pytest.MonkeyPatch
) -> None:
    slept = no_waiting(monkeypatch)
    p = with_clis(
        make(
            WORKFLOW,
            GATE,
            ("ROLE: implementer", on("claude", api_error("429 rate limit, retry after 5 s", 429))),
            ("ROLE: implementer", on("claude", writes({"answer.txt": "right\n"}))),
            ("ROLE: reviewer", on("claude", reviews("APPROVED"))),
        ),
        implementer="[claude, codex]",
    )
    assert p.start().status == "completed"
    assert slept == [pytest.approx(5, abs=1)] and not p.events("failover")


def test_later_steps_return_to_the_preferred_cli_once_its_reset_has_passed(
    make: Callable[..., Project],
) -> None:
    def slow_fix(call: WorkerCall) -> str:
        time.sleep(1.5)  # past claude's reset by the time the review starts
        return writes({"answer.txt": "right\n"})(call)

    p = with_clis(
        make(
            WORKFLOW,
            GATE,
            ("ROLE: implementer", on("claude", api_error("429 rate limit, retry after 1 s", 429))),
            ("ROLE: implementer", on("codex", slow_fix)),
            ("ROLE: reviewer", on("claude", reviews("APPROVED"))),
        ),
        implementer="[claude, codex]",
        reviewer="[claude, codex]",
    )
    (p.root / ".supervisor" / "config.yaml").open("a").write("failover: {max_wait_seconds: 0.5}\n")
    assert p.start().status == "completed"
    assert [c for _, c in clis_run(p)] == ["claude", "codex", "claude"]
    (moved,) = p.events("failover")
    assert moved.payload["to"] == "codex"


def test_with_every_cli_limited_the_step_waits_for_the_first_one_back_and_runs_there(
    make: Callable[..., Project], monkeypatch: pytest.MonkeyPatch
) -> None:
    slept = no_waiting(monkeypatch)
    three_hours = "429 rate limit exceeded, try again in 10800 seconds"
    p = with_clis(
        make(
            WORKFLOW,
            GATE,
            ("ROLE: implementer", on("claude", api_error(TWO_HOURS, 429))),
            ("ROLE: implementer", on("codex", api_error(three_hours, 429))),
            ("ROLE: implementer", on("claude", writes({"answer.txt": "right\n"}))),
            ("ROLE: reviewer", on("claude", reviews("APPROVED"))),
        ),
        implementer="[claude, codex]",
        reviewer="[claude, codex]",
    )
    assert p.start().status == "completed"
    # claude is back after two hours, codex after three: the wait is claude's.
    assert slept == [pytest.approx(7200, abs=60)]
    (scheduled,) = p.events("retry_scheduled")
    assert scheduled.status == "wait" and scheduled.payload["delay_s"] == pytest.approx(7200, 60)
    assert [c for _, c in clis_run(p)] == ["claude", "codex", "claude", "claude"]
    assert [e.payload["to"] for e in p.events("failover")] == ["codex"]


def test_an_api_that_stays_down_after_the_retries_fails_over_instead_of_failing(
    make: Callable[..., Project], monkeypatch: pytest.MonkeyPatch
) -> None:
    slept = no_waiting(monkeypatch)
    down = {"when": "ROLE: implementer", "do": on("claude", api_error("503 overloaded", 503))}
    p = with_clis(
        make(
            WORKFLOW,
            GATE,
            down,
            dict(down),
            dict(down),
            ("ROLE: implementer", on("codex", writes({"answer.txt": "right\n"}))),
            ("ROLE: reviewer", on("codex", reviews("APPROVED"))),
        ),
        implementer="[claude, codex]",
        reviewer="[claude, codex]",
    )
    assert p.start().status == "completed"
    # config/retry_policies.yaml, default: 3 attempts on claude (2 waits), then codex.
    assert [c for _, c in clis_run(p)] == ["claude"] * 3 + ["codex", "codex"]
    assert len(slept) == 2
    (moved,) = p.events("failover")
    assert moved.status == "api_down" and "503" in moved.payload["reason"]
    assert moved.payload["until"] == pytest.approx(time.time() + 900, abs=60)


def test_refused_credentials_fail_over_for_the_rest_of_the_task(
    make: Callable[..., Project],
) -> None:
    p = with_clis(
        make(
            WORKFLOW,
            GATE,
            ("ROLE: implementer", on("claude", api_error("401 invalid x-api-key", 401))),
            ("ROLE: implementer", on("codex", writes({"answer.txt": "right\n"}))),
            ("ROLE: reviewer", on("codex", reviews("APPROVED"))),
        ),
        implementer="[claude, codex]",
        reviewer="[claude, codex]",
    )
    assert p.start().status == "completed"
    (moved,) = p.events("failover")
    assert moved.status == "credentials" and moved.payload["until"] is None
    assert [c for _, c in clis_run(p)] == ["claude", "codex", "codex"]


def test_when_every_cli_refuses_the_task_stops_and_a_resume_tries_the_preferred_one_again(
    make: Callable[..., Project],
) -> None:
    p = with_clis(
        make(
            WORKFLOW,
            GATE,
            ("ROLE: implementer", on("claude", api_error("401 invalid x-api-key", 401))),
            ("ROLE: implementer", on("codex", api_error("401 invalid x-api-key", 401))),
        ),
        implementer="[claude, codex]",
        reviewer="[claude, codex]",
    )
    with pytest.raises(CredentialsError):
        p.start()
    assert p.workflow().status == "failed"
    assert [e.payload["to"] for e in p.events("failover")] == ["codex"]
    assert p.workflow().context["unavailable"]["claude"]["cause"] == "credentials"

    # The person logs in again and resumes: claude is the preferred CLI once more.
    p.script.add("ROLE: implementer", on("claude", writes({"answer.txt": "right\n"})))
    p.script.add("ROLE: reviewer", on("claude", reviews("APPROVED")))
    assert p.resume().status == "completed"
    assert [c for _, c in clis_run(p)] == ["claude", "codex", "claude", "claude"]
    assert "unavailable" not in p.workflow().context


def test_refused_credentials_without_a_fallback_still_stop_the_task(
    make: Callable[..., Project],
) -> None:
    p = make(
        WORKFLOW,
        GATE,
        ("ROLE: implementer", on("claude", api_error("401 invalid x-api-key", 401))),
    )
    with pytest.raises(CredentialsError):
        p.start()
    assert p.workflow().status == "failed" and not p.events("failover")


def test_a_fallback_without_credentials_stops_start_task_before_anything_is_created(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, api_keys: None
) -> None:
    """The preflight (supervisor/lifecycle/opening.py: open_sandbox) checks every CLI a role may
    fail over to, so a missing login is found now, not mid-task; the credentials check runs before
    any container, so no Docker is needed to see it."""
    for key in ("OPENAI_API_KEY", "CODEX_API_KEY"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # no ~/.codex/auth.json either
    root = make_demo_repo(tmp_path / "repo")
    (root / ".supervisor").mkdir(exist_ok=True)
    (root / ".supervisor" / "config.yaml").write_text(
        "clis:\n  claude:\n    base_url: http://127.0.0.1:9\n"
    )
    roles = root / ".supervisor" / "roles"
    roles.mkdir()
    (roles / "implementer.yaml").write_text("extends: implementer\ncli: [claude, codex]\n")
    trust(root)
    head = (root / ".git" / "HEAD").read_text()
    with pytest.raises(CredentialsError, match="codex"):
        tasks.start_task("Write the answer file", root, no_gate=True)
    assert not (root / ".supervisor" / "state" / "state.db").exists() or not tasks.workflows(root)
    assert (root / ".git" / "HEAD").read_text() == head


def test_doctor_lists_a_fallback_cli_as_needed_and_marks_it(tmp_path: Path, api_keys: None) -> None:
    from supervisor.core.config import load_settings
    from supervisor.lifecycle.doctor import clis_in_use, fallbacks_in_use
    from supervisor.workflow.loading import load_workflow

    root = make_demo_repo(tmp_path / "repo")
    roles = root / ".supervisor" / "roles"
    roles.mkdir(parents=True)
    (roles / "reviewer.yaml").write_text("extends: reviewer\ncli: [claude, gemini]\n")
    (root / ".supervisor" / "config.yaml").write_text("gates: {test: 'true', lint: 'true'}\n")
    settings = load_settings(root)
    definition = load_workflow(root, settings)
    assert "gemini" in clis_in_use(definition, settings, root)
    assert fallbacks_in_use(definition, settings, root) == ["gemini"]
