"""Adaptive assignment on real parts: the real `claude` and `gemini` binaries in the real sandbox
against the scripted API, real git, and the real state database seeded with recorded runs."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
from e2e_support import GOOD_CALC, implementer, new_repo, require_sandbox, reviewer, write_workflow
from routing_support import gemini_beats_claude_at_review

from supervisor.guard.trust import trust
from supervisor.lifecycle import tasks

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.docker
REVIEWER = 1
WORKFLOW = (
    "workflow:\n  initial_step: implement\n  steps:\n"
    "    implement: {role: implementer, next: test, max_retries: 1}\n"
    "    test: {gate: test, next: review, on_fail: implement}\n"
    "    review: {role: reviewer, next: commit, on_reject: implement}\n"
    "    commit: {action: commit}\n"
)


@pytest.fixture(autouse=True)
def real_parts(api_keys: None) -> None:
    require_sandbox()


def vendor_of(path: str) -> str:
    if "generatecontent" in path.lower():
        return "gemini"
    return "claude" if "/messages" in path else "codex"


def reviewed_by(server: Any, after: int = 0) -> set[str]:
    """Which vendor's API the reviewer's script (the second conversation) was answered on."""
    return {vendor_of(r.path) for r in server.requests[after:] if r.conversation == REVIEWER}


def test_twelve_runs_where_gemini_beats_claude_make_the_next_review_run_on_gemini_unless_locked(
    tmp_path: Path, serve: Any
) -> None:
    server = serve(
        {**implementer(GOOD_CALC), "repeat": True},
        {**reviewer(), "repeat": True},
    )
    repo = new_repo(tmp_path, server.url, f"  gemini: {{base_url: '{server.url}'}}\n", cli="claude")
    write_workflow(repo, WORKFLOW)
    with tasks.reading(repo) as store:
        gemini_beats_claude_at_review(store)

    wf = tasks.start_task("Fix multiply in calc.py", repo)
    assert wf.status == "completed"
    assert reviewed_by(server) == {"gemini"}
    with tasks.reading(repo) as store:
        runs = [r for r in store.invocations() if r["workflow_id"] == wf.id]
        assert {(r["step"], r["cli"]) for r in runs} == {
            ("implement", "claude"),
            ("review", "gemini"),
        }
        chosen = [e for e in store.events(wf.id) if e.type == "cli_chosen" and e.step == "review"]
    assert chosen[0].status == "adapted"
    assert chosen[0].payload["cli"] == "gemini"
    assert chosen[0].payload["scores"]["gemini"] > chosen[0].payload["scores"]["claude"]

    # A person locks the reviewer to claude: the figures no longer move it.
    with (repo / ".supervisor" / "config.yaml").open("a") as handle:
        handle.write("adaptive:\n  locked_assignments: {reviewer: claude}\n")
    trust(repo)
    before = len(server.requests)
    wf = tasks.start_task("Fix multiply in calc.py again", repo)
    assert wf.status == "completed"
    assert reviewed_by(server, before) == {"claude"}
    with tasks.reading(repo) as store:
        reviews = [r for r in store.invocations() if r["workflow_id"] == wf.id]
        chosen = [e for e in store.events(wf.id) if e.type == "cli_chosen" and e.step == "review"]
    assert {r["cli"] for r in reviews if r["step"] == "review"} == {"claude"}
    assert chosen[0].status == "locked"
