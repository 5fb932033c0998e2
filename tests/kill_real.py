"""The random-kill run on real parts, shared by its spec (tests/test_kill_random.py) and its
benchmark (benchmarks/kill_adoption.py): the command line (`start-task`, then `resume` after each
kill) as a separate process, the real `claude` in the real sandbox against the scripted model API,
a real SIGKILL at a random moment inside a worker step.

What it counts, per run (see `Run`):

- kills landed: kills with at least one worker container of the task running;
- workers at kills, kept / re-run: each worker container running at a kill (prepared ones
  included, by the step row that names them) is kept when its step's row ended `succeeded`
  (adopted by `resume`), re-run otherwise;
- conversations: one worker run's model requests, told apart by the run id its prompt opens with
  (`RUN: wf<id>-<step>-<role>-step<row>`); a step whose answers were bought in more than one run
  paid for a conversation twice; answers paid twice counts every (step, turn) answered more than
  once;
- leftovers after the final resume: containers and volumes with the repository's label, run
  folders, worktrees, copy-on-write bases, firewall rules of the supervisors the run started, task
  locks still held or still naming a pid.
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from supervisor.fakeapi import ScriptedModelServer, load_script
from supervisor.guard.trust import trust
from supervisor.lifecycle.demo import fenced, make_demo_repo
from supervisor.sandbox.docker import LABEL_REPO, LABEL_STEP, LABEL_STEP_ID, repo_label
from supervisor.sandbox.warm import LABEL_PREPARED

TASK = "Build the shapes package"
COMPONENTS = {
    "square": ("square.py", "def area(side):\n    return side * side\n"),
    "circle": ("circle.py", "def area(r):\n    return 3.14159 * r * r\n"),
    "triangle": ("triangle.py", "def area(b, h):\n    return b * h / 2\n"),
}
WORKFLOW = """workflow:
  initial_step: plan
  steps:
    plan: {role: planner, next: implement}
    implement: {role: implementer, for_each: component, gates: [compile], next: test,
                max_retries: 1}
    test: {gate: test, next: review, on_fail: implement}
    review: {role: reviewer, next: commit, on_reject: implement}
    commit: {action: commit}
"""
GATES = """gates:
  compile: "python3 -m py_compile *.py"
  test: "python3 -c 'import square, circle, triangle'"
"""
LABEL_ROLE = "supervisor.role"  # sandbox/adopt.py: set on worker containers only
_RUN = re.compile(r"RUN: ([\w./-]+)")
_STEP = re.compile(r"^wf\d+-(.+)-[a-z_-]+-step(\d+)$")


def marker(cid: str) -> str:
    return f"one component of the plan: '{cid}'"


def script(shell: float, think: float) -> dict[str, Any]:
    """Each component's worker works `shell` seconds in a shell command, then waits `think`
    seconds on the model's next answer (a request open through the proxy); the reviewer thinks
    too. Every conversation repeats: a worker run again opens it anew."""
    components = [
        {"id": cid, "description": f"the {cid} module", "files": [path], "depends_on": []}
        for cid, (path, _) in COMPONENTS.items()
    ]
    plan = {
        "status": "COMPLETE",
        "phases": [{"id": "p1", "description": "shapes", "components": components}],
        "estimated_components": len(components),
    }
    conversations: list[dict[str, Any]] = [
        {"when": "ROLE: planner", "repeat": True, "turns": [{"text": "Plan:\n" + fenced(plan)}]}
    ]
    for cid, (path, content) in COMPONENTS.items():
        report = {"status": "SUCCESS", "summary": cid, "files_created": [path]}
        write = {"name": "Write", "input": {"file_path": path, "content": content}}
        conversations.append(
            {
                "when": marker(cid),
                "repeat": True,
                "turns": [
                    {"tool_use": {"name": "Bash", "input": {"command": f"sleep {shell}"}}},
                    {"delay": think, "tool_use": write},
                    {"text": "Done.\n" + fenced(report)},
                ],
            }
        )
    review = {"status": "APPROVED", "summary": "fine", "issues": []}
    conversations.append(
        {
            "when": "ROLE: reviewer",
            "repeat": True,
            "turns": [{"delay": think, "text": "LGTM\n" + fenced(review)}],
        }
    )
    return {"conversations": conversations}


@dataclass
class Kill:
    invocation: str
    after_s: float
    workers: list[dict[str, str]]
    """The worker containers running at the kill: step id, step name, container id, and the
    model answers its run had had."""


@dataclass
class Run:
    seed: int
    status: str = ""
    kills: list[Kill] = field(default_factory=list)
    workers_at_kills: int = 0
    kept: int = 0
    rerun: int = 0
    conversations: int = 0
    conversations_paid_twice: int = 0
    answers: int = 0
    answers_paid_twice: int = 0
    leftovers: dict[str, list[str]] = field(default_factory=dict)
    requests: list[str] = field(default_factory=list)
    """The scripted API's log: "<kind> turn <n> <run id>" per model request."""
    problems: list[str] = field(default_factory=list)
    seconds: float = 0.0


def docker_client() -> Any:
    import docker

    return docker.from_env(timeout=60)


def running_workers(client: Any, label: str, repo: Path) -> list[dict[str, str]]:
    """The task's worker containers running now: those started for their step (labelled with
    it), and prepared ones (sandbox/warm.py, started before their step was known) that a step's
    row names."""
    found = client.containers.list(filters={"label": f"{LABEL_REPO}={label}"})
    prepared = [c for c in found if LABEL_PREPARED in c.labels]
    rows: dict[str, dict[str, Any]] = {}
    if prepared:
        from supervisor.lifecycle import tasks

        with tasks.reading(repo) as store:
            rows = {s["container_id"]: s for s in store.steps(1) if s["container_id"]}
    workers = []
    for c in found:
        if c.status != "running":
            continue
        if LABEL_ROLE in c.labels:
            step_id, step = c.labels.get(LABEL_STEP_ID, ""), c.labels.get(LABEL_STEP, "")
        elif c.id in rows:
            step_id, step = str(rows[c.id]["id"]), str(rows[c.id]["name"])
        else:
            continue
        workers.append({"step_id": step_id, "step": step, "container": c.id[:12]})
    return workers


def supervisor(checkout: Path, repo: Path, log: Path, *args: str) -> subprocess.Popen[bytes]:
    """The command line in its own process; its output to `log` (a pipe nobody reads while the
    process runs would fill and stall it)."""
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "supervisor", *args, "--repo", str(repo)],
            cwd=checkout,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
        )


def kill_inside_a_worker(
    child: subprocess.Popen[bytes],
    client: Any,
    label: str,
    repo: Path,
    server: ScriptedModelServer,
    rng: random.Random,
    window: float,
) -> Kill | None:
    """SIGKILL `child` at a random moment within `window` s after a worker of the task is at
    work (its container runs and the model answered it at least once: a CLI still starting has
    no work to lose), at a moment a worker container still runs; None when the process ended
    first."""
    began = time.monotonic()
    while not answered_runs(server, running_workers(client, label, repo)):
        if child.poll() is not None:
            return None
        time.sleep(0.2)
    time.sleep(rng.uniform(0.0, window))
    while True:
        if child.poll() is not None:
            return None
        workers = running_workers(client, label, repo)
        if workers:
            break
        time.sleep(0.2)
    child.send_signal(signal.SIGKILL)
    child.wait()
    answered = answered_runs(server, workers)
    for worker in workers:
        worker["answers"] = str(answered.get(worker["step_id"], 0))
    return Kill("", round(time.monotonic() - began, 1), workers)


def answered_runs(server: ScriptedModelServer, workers: list[dict[str, str]]) -> dict[str, int]:
    """Model answers so far of each worker's run (by step id), for those with any."""
    ids = {w["step_id"] for w in workers}
    found: dict[str, int] = {}
    for request in server.requests:
        run = run_of(request)
        step = _STEP.match(run) if run and request.kind == "scripted" else None
        if step and step[2] in ids:
            found[step[2]] = found.get(step[2], 0) + 1
    return found


_RUNS: dict[int, str | None] = {}


def run_of(request: Any) -> str | None:
    """The run id a model request's prompt opens with (read once per request: the bodies are
    large, and the kill loop asks often)."""
    key = id(request)
    if key not in _RUNS:
        found = _RUN.search(json.dumps(request.body, ensure_ascii=False))
        _RUNS[key] = found[1] if found else None
    return _RUNS[key]


def conversations(
    server: ScriptedModelServer,
) -> tuple[dict[str, set[str]], dict[tuple[str, int], int]]:
    """Worker runs per step (run ids with at least one answered model turn), and how often
    each (step, turn) was answered."""
    runs: dict[str, set[str]] = {}
    answered: dict[tuple[str, int], int] = {}
    for request in server.requests:
        if request.kind != "scripted" or request.turn is None:
            continue
        run_id = run_of(request)
        if run_id is None:
            continue
        step = _STEP.match(run_id)
        name = step[1] if step else run_id
        runs.setdefault(name, set()).add(run_id)
        key = (name, request.turn)
        answered[key] = answered.get(key, 0) + 1
    return runs, answered


def leftovers(client: Any, repo: Path, pids: list[int]) -> dict[str, list[str]]:
    label = repo_label(repo)
    found: dict[str, list[str]] = {}
    filters = {"label": f"{LABEL_REPO}={label}"}
    found["containers"] = [c.name for c in client.containers.list(all=True, filters=filters)]
    found["volumes"] = [v.name for v in client.volumes.list(filters=filters)]
    found["run_folders"] = [
        p.name for p in Path(tempfile.gettempdir()).glob(f"supervisor-run-{label}-*")
    ]
    state = repo / ".supervisor"
    found["worktrees"] = sorted(p.name for p in (state / "worktrees").glob("*"))
    listed = subprocess.run(
        ["git", "-C", str(repo), "worktree", "list", "--porcelain"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    found["worktrees"] += [line for line in listed.splitlines()[1:] if line.startswith("worktree ")]
    found["overlay_bases"] = sorted(p.name for p in (state / "bases").glob("*"))
    rules = subprocess.run(["iptables", "-S"], capture_output=True, text=True, check=False).stdout
    owners = {f"supervisor pid {pid}" for pid in pids}  # an older version's relay in-process
    ports = proxy_ports_of(label)  # the proxy daemon's listeners still open for this task
    found["proxy_routes"] = [f"port {port}" for port in sorted(ports)]
    found["firewall_rules"] = [
        line
        for line in rules.splitlines()
        if "supervisor" in line
        and (any(o in line for o in owners) or any(f"--dport {port} " in line for port in ports))
    ]
    found["locks"] = locks_left(state)
    return {k: v for k, v in found.items() if v}


def proxy_ports_of(label: str) -> set[int]:
    """The listening ports of the proxy daemon's routes that serve this repository's tasks
    (each has a firewall rule): a clean end closed them all."""
    from supervisor.sandbox.proxy_client import ProxyClient

    client = ProxyClient.running()
    if client is None:
        return set()
    try:
        status = client.status()
    finally:
        client.close()
    tasks = status.get("tasks") or {}
    return {
        int(port)
        for key, port in (status.get("routes") or {}).items()
        if str(tasks.get(key) or "").startswith(f"{label}-wf")
    }


def locks_left(state: Path) -> list[str]:
    """Task locks still held, or still naming the pid of a supervisor that held them: a clean
    end empties its lock file (a SIGKILL leaves the pid, which the next holder overwrites)."""
    from supervisor.state.locks import task_holder

    left = []
    for lock in sorted((state / "locks").glob("task-*.lock")):
        wf_id = int(lock.stem.removeprefix("task-"))
        if task_holder(state, wf_id) is not None or lock.read_text().strip():
            left.append(f"{lock.name}: {lock.read_text().strip() or 'held'}")
    return left


def describe(run: Run) -> str:
    return (
        f"run {run.seed}: {run.status}, {len(run.kills)} kills, workers at kills "
        f"{run.workers_at_kills} (kept {run.kept}, re-run {run.rerun}), conversations "
        f"{run.conversations} (paid twice {run.conversations_paid_twice}), answers {run.answers} "
        f"(paid twice {run.answers_paid_twice}), leftovers {run.leftovers or 'none'}"
        f"{f', problems {run.problems}' if run.problems else ''} ({run.seconds} s)"
    )


def one_run(checkout: Path, seed: int, kills: int, shell: float, think: float, base: Path) -> Run:
    rng = random.Random(seed)
    _RUNS.clear()  # the last run's requests are gone: their ids may be reused
    run = Run(seed)
    began = time.monotonic()
    client = docker_client()
    repo = make_demo_repo(base / f"run{seed}")
    log = base / f"run{seed}.log"
    pids: list[int] = []
    with ScriptedModelServer(load_script(script(shell, think))) as server:
        config = repo / ".supervisor" / "config.yaml"
        config.parent.mkdir(parents=True, exist_ok=True)
        config.write_text(f"{GATES}clis:\n  claude:\n    base_url: {server.url}\n")
        (repo / ".supervisor" / "workflow.yaml").write_text(WORKFLOW)
        trust(repo)
        label = repo_label(repo)
        invocation = ["start-task", TASK, "--yes"]
        while True:
            child = supervisor(checkout, repo, log, *invocation)
            pids.append(child.pid)
            kill = None
            if len(run.kills) < kills:
                kill = kill_inside_a_worker(child, client, label, repo, server, rng, shell + think)
            if kill is not None:
                kill.invocation = invocation[0]
                run.kills.append(kill)
                invocation = ["resume", "1"]
                continue
            if child.wait(timeout=900) != 0:
                tail = log.read_text(errors="replace")[-800:]
                run.problems.append(f"{invocation[0]} exit {child.returncode}: {tail}")
            break
        runs, answered = conversations(server)
        for r in server.requests:
            run.requests.append(f"{r.kind} turn {r.turn} {run_of(r) or '-'}")
    from supervisor.lifecycle import tasks

    with tasks.reading(repo) as store:
        (wf,) = store.workflows()
        steps = {str(s["id"]): s for s in store.steps(wf.id)}
        if not store.integrity_ok():
            run.problems.append("database integrity_check failed")
    run.status = wf.status
    for kill in run.kills:
        for worker in kill.workers:
            run.workers_at_kills += 1
            row = steps.get(worker["step_id"])
            if row is not None and row["status"] == "succeeded":
                run.kept += 1
            else:
                run.rerun += 1
    run.conversations = sum(len(r) for r in runs.values())
    run.conversations_paid_twice = sum(len(r) - 1 for r in runs.values() if len(r) > 1)
    run.answers = sum(answered.values())
    run.answers_paid_twice = sum(n - 1 for n in answered.values() if n > 1)
    run.leftovers = leftovers(client, repo, pids)
    for path, content in [v for v in COMPONENTS.values()]:
        shown = subprocess.run(
            ["git", "-C", str(repo), "show", f"{wf.task_branch}:{path}"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout
        if shown != content:
            run.problems.append(f"{path} on the task branch is not the worker's")
    run.seconds = round(time.monotonic() - began, 1)
    return run


def totals(runs: list[Run]) -> dict[str, Any]:
    left: dict[str, int] = {}
    for r in runs:
        for kind, items in r.leftovers.items():
            left[kind] = left.get(kind, 0) + len(items)
    return {
        "runs": len(runs),
        "completed": sum(r.status == "completed" for r in runs),
        "kills_landed": sum(len(r.kills) for r in runs),
        "workers_at_kills": sum(r.workers_at_kills for r in runs),
        "adopted_kept": sum(r.kept for r in runs),
        "adopted_rerun": sum(r.rerun for r in runs),
        "conversations": sum(r.conversations for r in runs),
        "conversations_paid_twice": sum(r.conversations_paid_twice for r in runs),
        "runs_with_answers_paid_twice": sum(r.answers_paid_twice > 0 for r in runs),
        "answers": sum(r.answers for r in runs),
        "answers_paid_twice": sum(r.answers_paid_twice for r in runs),
        "leftovers": left,
        "problems": sum(len(r.problems) for r in runs),
        "load_avg_1m": round(os.getloadavg()[0], 1),
    }
