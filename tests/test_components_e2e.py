"""A plan's components built in parallel on real parts: one real `claude` per component in its
own sandbox, worktree and branch, merged in dependency order once its gates pass."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from typing import TYPE_CHECKING, Any

import pytest
from e2e_support import killed_at, new_repo, planner, require_sandbox, reviewer, write_workflow

from supervisor.core.errors import StepFailedError
from supervisor.lifecycle import tasks
from supervisor.lifecycle.demo import fenced
from supervisor.sandbox.docker import LABEL_REPO, repo_label
from supervisor.state.store import Store
from supervisor.workspace.worktrees import Workspace

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.docker
TASK = "Build the shapes package"
WORKFLOW = """workflow:
  initial_step: plan
  steps:
    plan: {role: planner, next: implement}
    implement: {role: implementer, for_each: component, gates: [compile], next: review,
                max_retries: 1}
    review: {role: reviewer, next: commit, on_reject: implement}
    commit: {action: commit}
"""
GATES = 'gates:\n  compile: "python3 -m py_compile *.py"\n'
SQUARE = "def area(side):\n    return side * side\n"
CIRCLE = "def area(r):\n    return 3.14159 * r * r\n"
TOTAL = (
    "import circle\nimport square\n\n\ndef total():\n    return square.area(2) + circle.area(1)\n"
)


@pytest.fixture(autouse=True)
def real_parts(api_keys: None) -> None:
    require_sandbox()


def plan(*components: dict[str, Any]) -> str:
    return fenced(
        {
            "status": "COMPLETE",
            "phases": [{"id": "p1", "description": "shapes", "components": list(components)}],
            "estimated_components": len(components),
        }
    )


def component(cid: str, files: list[str], depends_on: list[str] | None = None) -> dict[str, Any]:
    return {
        "id": cid,
        "description": f"the {cid} module",
        "files": files,
        "depends_on": depends_on or [],
    }


def builds(
    cid: str, *writes: tuple[str, str], delay: float = 0.0, reads: tuple[str, ...] = ()
) -> dict[str, Any]:
    """The worker of one component: reads (Write needs a Read of an existing file first), writes
    its files, then reports them."""
    turns: list[dict[str, Any]] = [
        {"tool_use": {"name": "Read", "input": {"file_path": path}}} for path in reads
    ]
    turns += [
        {
            "delay": delay if i == 0 else 0.0,
            "tool_use": {"name": "Write", "input": {"file_path": path, "content": content}},
        }
        for i, (path, content) in enumerate(writes)
    ]
    report = {"status": "SUCCESS", "summary": cid, "files_created": [p for p, _ in writes]}
    turns.append({"text": "Done.\n" + fenced(report)})
    return {"when": f"one component of the plan: '{cid}'", "turns": turns}


def repo_for(tmp_path: Path, url: str) -> Path:
    repo = new_repo(tmp_path, url, GATES)
    write_workflow(repo, WORKFLOW)
    return repo


def events(repo: Path, wf_id: int) -> list[Any]:
    with tasks.reading(repo) as store:
        return store.events(wf_id)


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=True
    ).stdout


def branches(repo: Path) -> list[str]:
    return sorted(git(repo, "branch", "--format=%(refname:short)").split())


def shapes_script() -> list[dict[str, Any]]:
    return [
        planner(
            plan(
                component("square", ["square.py"]),
                component("circle", ["circle.py"]),
                component("total", ["total.py"], ["square", "circle"]),
            )
        ),
        builds("square", ("square.py", SQUARE), delay=2.0),
        builds("circle", ("circle.py", CIRCLE), delay=2.0),
        builds("total", ("total.py", TOTAL), reads=("square.py",)),
        reviewer(),
    ]


def test_independent_components_run_at_once_and_a_dependent_one_sees_their_merged_work(
    tmp_path: Path, serve: Any
) -> None:
    server = serve(*shapes_script())
    repo = repo_for(tmp_path, server.url)

    wf = tasks.start_task(TASK, repo)

    assert wf.status == "completed"
    for path, content in {"square.py": SQUARE, "circle.py": CIRCLE, "total.py": TOTAL}.items():
        assert git(repo, "show", f"{wf.task_branch}:{path}") == content
    log = events(repo, wf.id)
    started = {e.step: e.id for e in log if e.type == "step_started"}
    merged = {e.payload["component"]: e.id for e in log if e.type == "component_merged"}
    assert set(merged) == {"square", "circle", "total"}
    # square and circle ran side by side: both started before either was merged
    assert max(started["implement/square"], started["implement/circle"]) < min(
        merged["square"], merged["circle"]
    )
    # total waited for both, and its worker could read what they wrote
    assert started["implement/total"] > max(merged["square"], merged["circle"])
    sent = [json.dumps(r.body) for r in server.requests]
    read_back = [body for body in sent if "one component of the plan: 'total'" in body]
    assert any("side * side" in body for body in read_back)
    gates = [e for e in log if e.type == "gate"]
    assert sorted(e.step for e in gates) == [
        "implement/circle/compile",
        "implement/square/compile",
        "implement/total/compile",
    ]
    assert all(e.status == "passed" for e in gates)
    assert branches(repo) == sorted(["main", wf.task_branch])  # merged branches are gone


def test_a_merge_conflict_stops_with_the_files_and_keeps_the_component_branch(
    tmp_path: Path, serve: Any
) -> None:
    # `circle` declares only circle.py but also rewrites square.py: the plan said the two could
    # run at once, and git finds they could not. (Ownership is not checked here, so the change
    # reaches the merge; tests/test_ownership_e2e.py has the default, checked, case.)
    server = serve(
        planner(plan(component("square", ["square.py"]), component("circle", ["circle.py"]))),
        builds("square", ("square.py", SQUARE)),
        builds("circle", ("circle.py", CIRCLE), ("square.py", "SIDE = 2\n"), delay=3.0),
    )
    repo = new_repo(tmp_path, server.url, GATES + "limits:\n  component_scope: allow\n")
    write_workflow(repo, WORKFLOW)

    with pytest.raises(StepFailedError) as failure:
        tasks.start_task(TASK, repo)

    message = f"{failure.value.message} {failure.value.hint}"
    assert "conflicts in: square.py" in message
    wf = tasks.workflows(repo)[0]
    kept = f"{wf.task_branch}--circle"
    assert kept in message
    assert kept in branches(repo)
    assert git(repo, "show", f"{kept}:circle.py") == CIRCLE  # the unmerged work is intact
    assert wf.status == "failed"
    assert wf.context["components"]["square"]["status"] == "merged"
    assert wf.context["components"]["circle"]["status"] == "conflict"


WORKER_STEPS = ("plan", "implement/square", "implement/circle", "implement/total", "review")
KILL_CHAINS = {
    # Each point is where one process is SIGKILLed; the next point kills the `resume` after it
    # (event counts restart in each process), and a last `resume` finishes the task. A point
    # later in a chain is reached on a task that has already been killed and resumed, so every
    # point is covered once, on fewer pipelines than one task per point.
    "plan-first": (
        "plan:during",  # inside the write that records the plan
        "context_packed#3",  # inside a component's step, before its CLI runs
        "component_merged#2",  # between two merges
        "review:during",  # inside the write that records the review
    ),
    "committed": (
        "plan",  # right after the plan and the move to implement commit (one transaction)
        "implementation#1",  # a component done and recorded, its gate not yet run
        "component_merged#3",  # after the last merge, before the step is recorded done
        "commit:during",  # the task branch moved, the database not yet
    ),
    "starts": (
        "step_started#3:during",  # as the second parallel component starts
        "gate#1",  # a component's gate recorded, its hand-over to the merge not yet
        "review",  # right after the review and the move to commit commit
        "workflow_completed:during",  # the very last write
    ),
    "merges": (
        "component_merged#1:during",  # mid-merge: the candidate ref moved, the database not yet
        "commit",  # right after the commit step and the workflow's completion commit
    ),
}


@pytest.mark.parametrize("chain", KILL_CHAINS)
def test_a_supervisor_killed_anywhere_resumes_to_the_same_branch_without_rerunning_done_steps(
    tmp_path: Path, serve: Any, chain: str
) -> None:
    # A re-run of an interrupted worker opens a new conversation (its prompt names the new run).
    server = serve(*[{**conversation, "repeat": True} for conversation in shapes_script()])
    repo = repo_for(tmp_path, server.url)
    before = Workspace(repo).user_checkout_fingerprint()
    first, *later = KILL_CHAINS[chain]
    killed = killed_at(first, repo, "start-task", TASK, "--yes")
    assert killed.returncode == -9, f"never reached {first}: {killed.stderr[-2000:]}"
    wf = tasks.workflows(repo)[0]
    for point in later:
        killed = killed_at(point, repo, "resume", str(wf.id))
        assert killed.returncode == -9, f"resume never reached {point}: {killed.stderr[-2000:]}"

    done = tasks.resume(wf.id, repo)

    assert done.status == "completed"
    changed = git(repo, "diff", "--name-only", f"{done.base_sha}..{done.task_branch}").split()
    assert sorted(changed) == ["circle.py", "square.py", "total.py"]
    for path, content in {"square.py": SQUARE, "circle.py": CIRCLE, "total.py": TOTAL}.items():
        assert git(repo, "show", f"{done.task_branch}:{path}") == content
    with tasks.reading(repo) as store:
        assert store.integrity_ok()
        steps = store.steps(done.id)
    for name in WORKER_STEPS:
        runs = [s["status"] for s in steps if s["name"] == name]
        assert runs.count("succeeded") == 1, (name, runs)  # a finished step never runs again
        assert set(runs) <= {"succeeded", "interrupted"}, (name, runs)
    assert Workspace(repo).user_checkout_fingerprint() == before
    assert branches(repo) == sorted(["main", done.task_branch])
    import docker

    client = docker.from_env()
    assert (
        client.containers.list(all=True, filters={"label": f"{LABEL_REPO}={repo_label(repo)}"})
        == []
    )
    worktrees = repo / ".supervisor" / "worktrees"
    assert not worktrees.exists() or list(worktrees.iterdir()) == []


LEAD = "ROLE: tech_lead"
API = 'def area(size: float) -> float:\n    """Every shape module has one."""\n    ...\n'


def test_interfaces_are_compiled_then_read_only_for_every_component(
    tmp_path: Path, serve: Any
) -> None:
    server = serve(
        planner(plan(component("square", ["square.py"]), component("circle", ["circle.py"]))),
        {**builds("lead", ("shapes_api.py", "def area(size:\n")), "when": LEAD},  # no compile
        {**builds("lead", ("shapes_api.py", API)), "when": LEAD},
        builds(  # also changes the locked interface file
            "square",
            ("square.py", SQUARE),
            ("shapes_api.py", API + "PI = 3\n"),
            reads=("shapes_api.py",),
        ),
        builds("square", ("square.py", SQUARE)),
        builds("circle", ("circle.py", CIRCLE)),
        reviewer(),
    )
    repo = new_repo(tmp_path, server.url, GATES)
    write_workflow(
        repo,
        WORKFLOW.replace(
            "plan: {role: planner, next: implement}",
            "plan: {role: planner, next: interfaces}\n"
            "    interfaces: {role: tech_lead, interfaces: true, next: implement}",
        ),
    )

    wf = tasks.start_task(TASK, repo)

    assert wf.status == "completed"
    assert git(repo, "show", f"{wf.task_branch}:shapes_api.py") == API
    assert wf.context["locked_files"] == ["shapes_api.py"]
    log = events(repo, wf.id)
    checks = [e for e in log if e.type == "interfaces"]
    assert [e.status for e in checks] == ["failed", "locked"]
    assert (
        "SyntaxError" in checks[0].payload["compiler"]
        or "py_compile" in checks[0].payload["compiler"]
    )
    changed = [e for e in log if e.type == "interface_changed"]
    assert [(e.step, e.payload["locked"]) for e in changed] == [
        ("implement/square", ["shapes_api.py"])
    ]
    sent = [json.dumps(r.body) for r in server.requests]
    assert any("do not compile" in body for body in sent if "ROLE: tech_lead" in body)
    assert any("read-only" in body for body in sent if "'square'" in body)


def test_a_rate_limited_component_waits_while_the_others_go_on_and_resume_continues_it(
    tmp_path: Path, serve: Any
) -> None:
    # The reset time reaches the supervisor through the CLI's error text, as with the real API.
    # Ten minutes: the other component is surely merged before it, however loaded the machine
    # (with 30 s, a slow circle let square's reset pass first); the spec then moves the clock.
    message = "rate limited, try again in 600 seconds"
    limited = {"error": {"status": 429, "message": message, "retry_after": 600}}
    server = serve(
        planner(plan(component("square", ["square.py"]), component("circle", ["circle.py"]))),
        {"when": "one component of the plan: 'square'", "turns": [limited]},
        builds("square", ("square.py", SQUARE)),
        builds("circle", ("circle.py", CIRCLE)),
        reviewer(),
    )
    repo = repo_for(tmp_path, server.url)
    run = subprocess.Popen(
        [sys.executable, "-m", "supervisor", "start-task", TASK, "--yes", "--repo", str(repo)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 240
        while not (tasks.workflows(repo) and tasks.workflows(repo)[0].status == "rate_limited"):
            assert run.poll() is None, "the supervisor ended instead of waiting"
            assert time.monotonic() < deadline, "the rate limit never became a waiting state"
            time.sleep(0.5)
        wf = tasks.workflows(repo)[0]
        components = wf.context["components"]
        assert components["circle"]["status"] == "merged"  # the other component went on
        assert components["square"]["status"] == "waiting"
        shown = subprocess.run(
            [sys.executable, "-m", "supervisor", "status", str(wf.id), "--repo", str(repo)],
            env={**os.environ, "COLUMNS": "200"},
            capture_output=True,
            text=True,
            check=True,
        )
        text = " ".join(shown.stdout.split())
        assert "rate limited until" in text
        assert "component square waits until" in text
    finally:
        run.send_signal(signal.SIGKILL)
        run.wait()

    with Store(repo / ".supervisor" / "state.db") as store:  # ten minutes later
        wf = store.workflow(wf.id)
        assert float(wf.context["waiting_until"]) > time.time() + 60
        later = {**wf.context, "waiting_until": time.time()}
        store.update_workflow(wf.id, status=wf.status, current_step=wf.current_step, context=later)
    done = tasks.resume(wf.id, repo)  # the reset has passed: it runs square only

    assert done.status == "completed"
    assert git(repo, "show", f"{done.task_branch}:square.py") == SQUARE
    assert git(repo, "show", f"{done.task_branch}:circle.py") == CIRCLE
    log = events(repo, done.id)
    assert [e.payload["component"] for e in log if e.type == "component_waiting"] == ["square"]
    assert [e.status for e in log if e.type == "retry_scheduled"] == ["wait"]
    with tasks.reading(repo) as store:
        runs = [s["name"] for s in store.steps(done.id)]
    assert runs.count("implement/circle") == 1 and runs.count("implement/square") == 2
