"""Pipelined steps on the real parts (the real `claude` in the real sandbox against the scripted
API, real git, real SQLite): while a gate runs, the worker steps that may follow it are prepared
(their CLI started in its container, waiting for a prompt, for as many as the configuration or
the idle cores allow); the one the gate's outcome chooses is used, the other discarded; a
prepared CLI sends no model request before its step has started, and nothing prepared is left
behind."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import docker
import pytest
from e2e_support import (
    APPROVED,
    BAD_CALC,
    GOOD_CALC,
    implementer,
    new_repo,
    read_turn,
    released_on_adoption,
    require_sandbox,
    reviewer,
    write_workflow,
)

from supervisor.lifecycle import tasks
from supervisor.sandbox.docker import LABEL_REPO, repo_label
from supervisor.sandbox.warm import LABEL_PREPARED
from supervisor.workspace.worktrees import Workspace

if TYPE_CHECKING:
    from collections.abc import Callable

    from supervisor.fakeapi import ScriptedModelServer

pytestmark = pytest.mark.docker
FLOW = (
    "workflow:\n  initial_step: implement\n  steps:\n"
    "    implement: {role: implementer, next: test, max_retries: 3}\n"
    "    test: {gate: test, next: review, on_fail: implement}\n"
    "    review: {role: reviewer, next: commit}\n"
    "    commit: {action: commit}\n"
)
RUN_ID = re.compile(r"RUN: wf\d+-[\w./-]+-step(\d+)")


@pytest.fixture(autouse=True)
def real_parts(api_keys: None) -> None:
    require_sandbox()


def leftovers(repo: Path) -> list[str]:
    client = docker.from_env()
    filters = {"label": [f"{LABEL_REPO}={repo_label(repo)}", LABEL_PREPARED]}
    containers = client.containers.list(all=True, filters=filters)
    trees = Workspace(repo).worktrees_dir
    prepared = [p.name for p in trees.iterdir() if "-prep-" in p.name] if trees.exists() else []
    return [c.name for c in containers] + prepared


def test_the_fix_up_and_the_review_run_in_containers_started_while_the_gate_ran(
    tmp_path: Path, serve: Callable[..., ScriptedModelServer]
) -> None:
    server = serve(
        implementer(BAD_CALC),
        implementer(GOOD_CALC, when="FEEDBACK FROM THE PREVIOUS ATTEMPT"),
        reviewer(),
    )
    # Both ways with their container at once, whatever the machine's load (by default only the
    # likeliest is, unless cores are idle: tests/test_pipeline_fast.py).
    repo = new_repo(tmp_path, server.url, "limits:\n  prepare_containers: 2\n", cli="claude")
    write_workflow(repo, FLOW)

    wf = tasks.start_task("Fix multiply in calc.py", repo)

    assert wf.status == "completed", wf
    with tasks.reading(repo) as store:
        steps = store.steps(wf.id)
        events = store.events(wf.id)
    used = [
        (e.step, e.role, e.payload["container"]) for e in events if e.type == "prepared_run_used"
    ]
    # The gate failed: the fix-up ran in the container prepared for it, the review's went; the
    # gate then passed: the review ran in its prepared container, the fix-up's went.
    assert used == [("implement", "implementer", True), ("review", "reviewer", True)]
    discarded = [e.role for e in events if e.type == "prepared_run_discarded"]
    # (in either order: under load the review's may be removed after the fix-up's went)
    assert sorted(discarded[:2]) == ["implementer", "reviewer"]
    # Their context packs were gathered during the gate too.
    ahead = [(e.step, e.payload["ahead"]) for e in events if e.type == "context_packed"]
    assert ahead == [("implement", False), ("implement", True), ("review", True)]
    # A prepared CLI waited for its prompt: every model request belongs to a step already
    # started, and the discarded ones sent none (3 + 3 + 1 scripted turns).
    started = {s["id"]: s["started_at"].timestamp() for s in steps}
    requests = [r for r in server.requests if r.kind == "scripted"]
    assert len(requests) == 7
    for request in requests:
        found = RUN_ID.search(json.dumps(request.body))
        assert found is not None
        assert request.at >= started[int(found[1])]
    assert server.unmatched == [] and server.exhausted == []
    assert leftovers(repo) == []


def test_a_prepared_container_that_is_not_the_steps_own_is_discarded_unused(
    tmp_path: Path, serve: Callable[..., ScriptedModelServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A preparation whose container differs from the one the step makes (here: the workers'
    memory limit changed in the config once it was made) is never used: the step runs its own."""
    from supervisor.workflow.steps import prepare

    server = serve(
        implementer(BAD_CALC),
        implementer(GOOD_CALC, when="FEEDBACK FROM THE PREVIOUS ATTEMPT"),
        reviewer(),
    )
    repo = new_repo(tmp_path, server.url, "limits:\n  prepare_containers: 2\n", cli="claude")
    write_workflow(repo, FLOW)
    took = prepare.take
    sizes = iter(range(3000, 4000, 10))

    def then_the_config_changes(c: Any, *args: Any) -> Any:
        out = took(c, *args)
        c.settings.limits.worker_memory = f"{next(sizes)}m"  # the step's container differs now
        return out

    monkeypatch.setattr(prepare, "take", then_the_config_changes)

    wf = tasks.start_task("Fix multiply in calc.py", repo)

    assert wf.status == "completed", wf
    with tasks.reading(repo) as store:
        events = store.events(wf.id)
    reasons = [e.payload["reason"] for e in events if e.type == "prepared_run_discarded"]
    assert "the step's container differs from the prepared one" in reasons
    used = [e.payload["container"] for e in events if e.type == "prepared_run_used"]
    assert used  # taken (worktree, route), its container discarded, the step's own run instead
    assert leftovers(repo) == []


def test_only_the_pass_ways_container_is_started_and_the_fix_up_runs_in_it_when_the_gate_fails(
    tmp_path: Path, serve: Callable[..., ScriptedModelServer]
) -> None:
    """One container ahead (the default on a busy machine): the review's CLI is started (during
    the implementation, advanced to it during the gate); the fix-up gets its worktree, route and
    context pack. When the gate fails, the fix-up runs in the review's container, the very
    container it would have made (the role is in the prompt, not in the container), with the
    review's worktree, which holds the same commit. Nothing made for a way not taken is left
    behind."""
    server = serve(
        implementer(BAD_CALC),
        implementer(GOOD_CALC, when="FEEDBACK FROM THE PREVIOUS ATTEMPT"),
        reviewer(),
    )
    repo = new_repo(tmp_path, server.url, "limits:\n  prepare_containers: 1\n", cli="claude")
    write_workflow(repo, FLOW)

    wf = tasks.start_task("Fix multiply in calc.py", repo)

    assert wf.status == "completed", wf
    with tasks.reading(repo) as store:
        events = store.events(wf.id)
    used = [
        (e.step, e.role, e.payload["container"]) for e in events if e.type == "prepared_run_used"
    ]
    assert used == [("implement", "implementer", True), ("review", "reviewer", True)]
    discarded = [
        (e.role, e.payload["container"]) for e in events if e.type == "prepared_run_discarded"
    ]
    assert discarded == [("implementer", False), ("implementer", False)]  # no start-up wasted
    ahead = [(e.step, e.payload["ahead"]) for e in events if e.type == "context_packed"]
    assert ahead == [("implement", False), ("implement", True), ("review", True)]
    assert server.unmatched == [] and server.exhausted == []
    assert leftovers(repo) == []


def test_the_review_starts_up_during_the_implementation_and_reads_exactly_its_result(
    tmp_path: Path, serve: Callable[..., ScriptedModelServer]
) -> None:
    """The implementer commits, so the reviewer's workspace cannot be made before it ends; its
    container is started meanwhile from the commit the implementer started from, and brought to
    the implementation while the gate runs: the reviewer reads the implementer's file as
    committed, in a CLI that started up during the implementation."""
    server = serve(
        implementer(GOOD_CALC),
        {"when": "ROLE: reviewer", "turns": [read_turn("calc.py"), {"text": APPROVED}]},
    )
    repo = new_repo(tmp_path, server.url, "", cli="claude")
    write_workflow(repo, FLOW)

    wf = tasks.start_task("Fix multiply in calc.py", repo)

    assert wf.status == "completed", wf
    with tasks.reading(repo) as store:
        steps = store.steps(wf.id)
        events = store.events(wf.id)
    advanced = [e for e in events if e.type == "prepared_run_advanced"]
    assert [(e.role, e.payload["from"]) for e in advanced] == [("reviewer", wf.base_sha)]
    implement = next(s for s in steps if s["name"] == "implement")
    review = next(s for s in steps if s["name"] == "review")
    assert advanced[0].payload["to"] != wf.base_sha
    assert implement["finished_at"] <= advanced[0].timestamp <= review["started_at"]
    used = [
        (e.step, e.role, e.payload["container"]) for e in events if e.type == "prepared_run_used"
    ]
    assert used == [("review", "reviewer", True)]
    # What the reviewer's Read returned (not its prompt, which quotes the diff): the
    # implementer's file, line for line.
    last = [r for r in server.requests if r.kind == "scripted"][-1]
    results = [
        block
        for message in last.body["messages"]
        if isinstance(message["content"], list)
        for block in message["content"]
        if block.get("type") == "tool_result"
    ]
    assert results, last.body
    read_back = json.dumps(results[-1]["content"])
    assert all(line in read_back for line in GOOD_CALC.splitlines() if line)
    assert server.unmatched == [] and server.exhausted == []
    assert leftovers(repo) == []


def test_a_review_killed_in_its_advanced_container_is_adopted_over_the_implementation(
    tmp_path: Path, serve: Callable[..., ScriptedModelServer]
) -> None:
    """The supervisor is killed while the reviewer's answer is in flight, in the container
    started during the implementation and advanced to it: `resume` adopts that container (the
    state's record of the advance names its commit; its label still names the commit it was
    made from), and the reviewer's conversation is opened and paid once."""
    release = tmp_path / "release"
    held = {"after": str(release), **read_turn("calc.py")}
    server = serve(
        implementer(GOOD_CALC),
        {"when": "ROLE: reviewer", "turns": [held, {"text": APPROVED}]},
    )
    repo = new_repo(tmp_path, server.url, "", cli="claude")
    write_workflow(repo, FLOW)

    def reviewing() -> list[Any]:
        return [
            r
            for r in server.requests
            if r.kind == "scripted" and "ROLE: reviewer" in json.dumps(r.body)
        ]

    child = subprocess.Popen(
        [sys.executable, "-m", "supervisor", "start-task", "Fix multiply in calc.py", "--yes"],
        cwd=repo,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 240
    while not reviewing():
        if child.poll() is not None or time.monotonic() > deadline:
            child.kill()
            pytest.fail(f"the review never started: {child.communicate()[1].decode()[-2000:]}")
        time.sleep(0.1)
    child.send_signal(signal.SIGKILL)
    child.communicate()

    wf = tasks.workflows(repo)[0]
    with released_on_adoption(repo, release, wf.id):
        done = tasks.resume(wf.id, repo)

    assert done.status == "completed", done
    with tasks.reading(repo) as store:
        events = store.events(done.id)
    assert [e.role for e in events if e.type == "prepared_run_advanced"] == ["reviewer"]
    assert [e.step for e in events if e.type == "worker_adopted"] == ["review"]
    opened = [r for r in reviewing() if r.turn == 0]
    assert len(opened) == 1  # one conversation, its held answer bought once
    assert server.unmatched == [] and server.exhausted == []
    assert leftovers(repo) == []
