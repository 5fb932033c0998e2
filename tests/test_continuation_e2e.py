"""Bounded continuations on real parts: the real `claude` in the real sandbox against the scripted
API. A planner whose plan comes back NEEDS_REFINEMENT continues its own session (`--resume`): the
scripted API receives the earlier turns (the first prompt and the planner's own earlier answers) in
the continued request, and after `max_continuation_turns` the next run starts a fresh session."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest
from e2e_support import PLAN_TEXT, new_repo, require_sandbox, write_workflow

from supervisor.lifecycle import tasks
from supervisor.lifecycle.demo import fenced

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.docker
TASK = "Add a divide function to calc.py"
PLAN_ONLY = (
    "workflow:\n  initial_step: plan\n  steps:\n"
    "    plan: {role: planner, next: commit, max_retries: 5}\n"
    "    commit: {action: commit}\n"
)


def refining(n: int) -> dict[str, str]:
    plan = {"status": "NEEDS_REFINEMENT", "summary": f"draft {n}", "phases": []}
    return {"text": f"Planner draft #{n}.\n" + fenced({**plan, "estimated_components": 0})}


@pytest.fixture(autouse=True)
def real_parts(api_keys: None) -> None:
    require_sandbox()


@pytest.mark.parametrize("cli", ["claude", "codex", "gemini"])
def test_a_planner_sent_back_continues_its_cli_session_and_stops_at_the_limit(
    tmp_path: Path, serve: Any, cli: str
) -> None:
    server = serve(
        # One session: the first run and its three continued turns (matched by its opening).
        {"when": "ROLE: planner", "turns": [refining(1), refining(2), refining(3), refining(4)]},
        # The fifth run, past the limit, is a new session.
        {"when": "ROLE: planner", "turns": [{"text": PLAN_TEXT}]},
    )
    extra = f"  codex: {{base_url: '{server.url}/v1'}}\n  gemini: {{base_url: '{server.url}'}}\n"
    repo = new_repo(tmp_path, server.url, extra)
    write_workflow(repo, PLAN_ONLY)

    wf = tasks.start_task(TASK, repo, cli=cli)

    assert wf.status == "completed"
    assert server.player.unused() == []
    turns = [r for r in server.requests if r.kind == "scripted"]
    assert [(r.conversation, r.turn) for r in turns] == [(0, 0), (0, 1), (0, 2), (0, 3), (1, 0)]
    third = json.dumps(turns[2].body)
    # The continued request carries the whole session: the first prompt, the planner's earlier
    # answers, and the supervisor's feedback on the last one.
    assert "TASK:" in third and TASK in third
    assert "Planner draft #1." in third and "Planner draft #2." in third
    assert "FEEDBACK ON YOUR LAST ANSWER" in third and "Planner draft #3" not in third
    # Past the limit: a fresh session, whose request holds no earlier turn.
    assert "Planner draft #" not in json.dumps(turns[4].body)
    with tasks.reading(repo) as store:
        events = store.events(wf.id)
        runs = [s for s in store.steps(wf.id) if s["name"] == "plan"]
    assert [e.payload["turn"] for e in events if e.type == "continuation"] == [1, 2, 3]
    assert [e.type for e in events if e.type == "continuation_limit"] == ["continuation_limit"]
    sessions = [e.payload.get("session_id") for e in events if e.type == "plan"]
    assert len(set(sessions[:4])) == 1 and sessions[4] != sessions[0]  # one session, then anew
    assert len(runs) == 5
    assert not list((repo / ".supervisor" / "homes").glob("*"))  # the kept home is discarded


def test_links_a_planner_plants_in_its_kept_home_are_removed_never_followed(
    tmp_path: Path, serve: Any
) -> None:
    """Attack: the kept home is a host folder the worker writes. It plants links to host paths
    there; when the supervisor discards the home, it removes the links, not what they name."""
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "keep.txt").write_text("precious\n")
    plant = (
        f"mkdir -p ~/deep && ln -s {victim} ~/victim-dir && ln -s {victim}/keep.txt "
        f"~/deep/victim-file && ln -s / ~/root && ls -la ~"
    )
    server = serve(
        {
            "when": "ROLE: planner",
            "turns": [
                {"tool_use": {"name": "Bash", "input": {"command": plant}}},
                refining(1),
                {"text": PLAN_TEXT},  # the continued turn, in the same session
            ],
        }
    )
    repo = new_repo(tmp_path, server.url)
    write_workflow(repo, PLAN_ONLY)

    wf = tasks.start_task(TASK, repo)

    assert wf.status == "completed"
    turns = [(r.conversation, r.turn) for r in server.requests if r.kind == "scripted"]
    assert turns == [(0, 0), (0, 1), (0, 2)]  # the links were in the home the session resumed
    assert "victim-dir" in json.dumps(server.requests[1].body)  # the worker's `ls` saw them
    assert (victim / "keep.txt").read_text() == "precious\n"
    assert not list((repo / ".supervisor" / "homes").glob("*"))
