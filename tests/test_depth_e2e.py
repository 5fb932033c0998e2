"""Adaptive depth on the real parts: the real `claude` binary in the real sandbox, real git and
SQLite, against the scripted model API. A small fix costs three model conversations (analyze,
implement, review); `--depth` forces each path; the analyzer's score gates the path even when its
own `path` says otherwise; a bad verdict is refused like any worker answer. The pure decisions:
tests/test_depth.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import TYPE_CHECKING, Any

import pytest
from e2e_support import GOOD_CALC, implementer, new_repo, planner, require_sandbox, reviewer

from supervisor.core.errors import StepFailedError
from supervisor.lifecycle import tasks
from supervisor.lifecycle.demo import fenced

if TYPE_CHECKING:
    from pathlib import Path

    from supervisor.fakeapi import ScriptedModelServer

pytestmark = pytest.mark.docker

TASK = "Implement add and multiply in calc.py"
FINDING = "multiply() is the only function the tests exercise beyond add()"


@pytest.fixture(autouse=True)
def real_parts(api_keys: None) -> None:
    require_sandbox()


def analyzer(complexity: Any = 2, path: str = "simple", **more: Any) -> dict[str, Any]:
    verdict = {
        "complexity": complexity,
        "path": path,
        "reasons": ["two small functions in one file"],
        "expected_files": ["calc.py"],
        "recommended_components": 1,
        **more,
    }
    return {"when": "ROLE: analyzer", "turns": [{"text": "Verdict.\n" + fenced(verdict)}]}


def investigator() -> dict[str, Any]:
    report = {
        "findings": [FINDING],
        "files": ["calc.py", "test_calc.py"],
        "risks": ["none beyond the two functions"],
        "open_questions": [],
    }
    return {"when": "ROLE: investigator", "turns": [{"text": "Report.\n" + fenced(report)}]}


def conversations(server: ScriptedModelServer) -> list[str]:
    """The role of each model conversation the run held, in order (one per worker run; a
    CLI's repeated first request is the same conversation)."""
    seen: dict[int, str] = {}
    for r in server.requests:
        if r.kind == "scripted" and r.conversation is not None:
            when = server.player.script.conversations[r.conversation].when or ""
            seen.setdefault(r.conversation, when.removeprefix("ROLE: "))
    return list(seen.values())


def opening_prompts(server: ScriptedModelServer, marker: str) -> list[str]:
    found = []
    for r in server.requests:
        text = json.dumps(r.body)
        if r.kind == "scripted" and r.turn == 0 and marker in text:
            found.append(text)
    return found


def step_names(repo: Path, wf_id: int) -> list[str]:
    """The step runs, a component's (`implement/<component>`) under its step's name."""
    with tasks.reading(repo) as store:
        return [s["name"].split("/")[0] for s in store.steps(wf_id)]


def supervisor(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "supervisor", *args, "--repo", str(repo)],
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def test_a_small_fix_costs_three_conversations_analyze_implement_review(
    tmp_path: Path, serve: Any
) -> None:
    """The real command, its default depth (auto): no planner runs. The analyzer also tries to
    slip a file in (it reads, never writes): its worktree is thrown away with its run."""
    lying = analyzer()
    planted = {"name": "Write", "input": {"file_path": "planted.py", "content": "import os\n"}}
    lying["turns"].insert(0, {"tool_use": planted})
    server = serve(lying, planner(), implementer(GOOD_CALC), reviewer())
    repo = new_repo(tmp_path, server.url)

    done = supervisor(repo, "start-task", TASK, "--yes")

    assert done.returncode == 0, done.stderr[-3000:]
    assert conversations(server) == ["analyzer", "implementer", "reviewer"]
    assert not (repo / "planted.py").exists()
    assert step_names(repo, 1) == ["analyze", "implement", "test", "review"]
    assert not [r for r in server.requests if r.kind in ("unmatched", "exhausted")]
    status = supervisor(repo, "status", "1")
    assert "simple (complexity 2/10)" in " ".join(status.stdout.split()), status.stdout
    shown = json.loads(supervisor(repo, "status", "1", "--json").stdout)
    assert shown["status"] == "completed"
    assert (shown["depth"]["path"], shown["depth"]["complexity"]) == ("simple", 2)
    assert shown["depth"]["expected_files"] == ["calc.py"]
    branch = subprocess.run(
        [
            "git",
            "-C",
            str(repo),
            "ls-tree",
            "-r",
            "--name-only",
            shown["task_branch"],
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert "calc.py" in branch and "planted.py" not in branch
    with tasks.reading(repo) as store:
        [chosen] = [e for e in store.events(1) if e.type == "depth_chosen"]
    assert chosen.status == "simple" and chosen.payload["verdict"]["complexity"] == 2


@pytest.mark.parametrize(
    ("asked", "script", "steps"),
    [
        ("simple", ["implementer", "reviewer"], ["implement", "test", "review"]),
        (
            "planned",
            ["planner", "implementer", "reviewer"],
            ["plan", "implement", "test", "review"],
        ),
        (
            "researched",
            ["investigator", "planner", "implementer", "reviewer"],
            ["research", "plan", "implement", "test", "review"],
        ),
    ],
)
def test_an_explicit_depth_skips_the_analyzer_and_takes_its_path(
    tmp_path: Path, serve: Any, asked: Any, script: list[str], steps: list[str]
) -> None:
    made = {
        "investigator": investigator(),
        "planner": planner(),
        "implementer": implementer(GOOD_CALC),
        "reviewer": reviewer(),
    }
    server = serve(analyzer(), *(made[role] for role in script))
    repo = new_repo(tmp_path, server.url)

    wf = tasks.start_task(TASK, repo, depth=asked)

    assert wf.status == "completed"
    assert conversations(server) == script  # the analyzer's conversation is never asked for
    assert not [r for r in server.requests if r.kind == "default"]
    assert step_names(repo, wf.id) == steps
    assert wf.context["depth"]["path"] == asked
    if asked == "researched":
        [planning] = opening_prompts(server, "ROLE: planner")
        assert "RESEARCH REPORT" in planning and FINDING in planning


def test_a_high_score_researches_although_the_analyzer_asked_for_the_simple_path(
    tmp_path: Path, serve: Any
) -> None:
    server = serve(
        analyzer(complexity=8, path="simple"),
        investigator(),
        planner(),
        implementer(GOOD_CALC),
        reviewer(),
    )
    repo = new_repo(tmp_path, server.url)

    wf = tasks.start_task(TASK, repo, depth="auto")

    assert wf.status == "completed"
    assert conversations(server) == [
        "analyzer",
        "investigator",
        "planner",
        "implementer",
        "reviewer",
    ]
    depth = wf.context["depth"]
    assert (depth["path"], depth["by_score"], depth["suggested"]) == (
        "researched",
        "researched",
        "simple",
    )
    assert "overruled by the threshold" in depth["why"]


def test_a_bad_verdict_is_refused_with_the_reason_and_the_task_fails_after_the_retries(
    tmp_path: Path, serve: Any
) -> None:
    missing = analyzer()
    missing["turns"][0]["text"] = "Verdict.\n" + fenced({"complexity": 2, "path": "simple"})
    server = serve(
        missing,
        analyzer(complexity=11),
        analyzer(path="quick"),
        planner(),
    )
    repo = new_repo(tmp_path, server.url)

    with pytest.raises(StepFailedError, match="'analyze'"):
        tasks.start_task(TASK, repo, depth="auto")

    assert conversations(server) == ["analyzer"] * 3  # nothing was planned on a bad verdict
    with tasks.reading(repo) as store:
        refused = [e.payload["error"] for e in store.events(1) if e.type == "output_invalid"]
        wf = store.workflow(1)
    assert len(refused) == 3
    assert "reasons" in refused[0] and "expected_files" in refused[0]
    assert "complexity" in refused[1] and "path" in refused[2]
    assert wf.status == "failed" and "depth" in wf.context and "analysis" not in wf.context
    # each retry was told why the last verdict was refused
    assert len(opening_prompts(server, "FEEDBACK FROM THE PREVIOUS ATTEMPT")) == 2
