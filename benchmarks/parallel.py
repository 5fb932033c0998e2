"""Makespan of N independent components on K workers, for several repository sizes, and for
several checkouts of the supervisor in the same run (a change's before/after on one machine;
copy-on-write workspaces where the checkout has them, BENCH_WORKSPACE=full for full ones, or
`--workspaces full,overlay` for both, alternating, in one run):

    git worktree add /tmp/before <old-commit> && ln -s $PWD/node_modules /tmp/before/
    .venv/bin/python benchmarks/parallel.py /tmp/before . --files 200,10000 --workers 2,4,8

Each component is one implementer step with the real `claude` in the real sandbox against the
scripted model API, whose first answer takes `--delay` seconds (the stand-in for the model).
The makespan runs from the first component step's start to the last component's merge; the
ideal is ceil(N/K) x the median component step time of the same run. Configurations alternate
between the checkouts so that both see the same machine load; the load average is printed.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def one(checkout: Path, files: int, k: int, n: int, delay: float) -> dict[str, float]:
    """One run, importing the supervisor from `checkout` (runs in its own process)."""
    sys.path.insert(0, str(checkout))
    os.chdir(checkout)
    from supervisor.core import process
    from supervisor.fakeapi import ScriptedModelServer, load_script
    from supervisor.lifecycle import tasks
    from supervisor.lifecycle.demo import fenced, make_demo_repo, write_project_config

    ids = [f"c{i}" for i in range(n)]
    plan = {
        "status": "COMPLETE",
        "phases": [
            {
                "id": "p1",
                "description": "parts",
                "components": [{"id": c, "description": c, "files": [f"{c}.py"]} for c in ids],
            }
        ],
        "estimated_components": n,
    }
    report = {"status": "SUCCESS", "summary": "done", "files_created": []}
    conversations: list[dict[str, object]] = [
        {"when": "ROLE: planner", "repeat": True, "turns": [{"text": fenced(plan)}]}
    ]
    for c in ids:
        write = {"name": "Write", "input": {"file_path": f"{c}.py", "content": f"{c} = 1\n"}}
        conversations.append(
            {
                "when": f"one component of the plan: '{c}'",
                "repeat": True,
                "turns": [{"tool_use": write, "delay": delay}, {"text": fenced(report)}],
            }
        )
    workflow = (
        "workflow:\n  initial_step: plan\n  steps:\n"
        "    plan: {role: planner, next: implement}\n"
        "    implement: {role: implementer, for_each: component, next: commit}\n"
        "    commit: {action: commit}\n"
    )
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        os.environ.setdefault("ANTHROPIC_API_KEY", "bench-key")
        os.environ["SUPERVISOR_USER_DIR"] = str(base / "user")
        repo = make_demo_repo(base / "repo")
        for i in range(files):
            target = repo / "pkg" / f"d{i % 100}" / f"mod{i}.py"
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(f"def f{i}(x):\n    return x + {i}\n")
        git = ["git", "-C", str(repo), "-c", "user.name=b", "-c", "user.email=b@b"]
        process.run([*git, "add", "-A"])
        process.run([*git, "commit", "-qm", "many files"])
        with ScriptedModelServer(load_script({"conversations": conversations})) as server:
            write_project_config(repo, server.url)
            with (repo / ".supervisor" / "config.yaml").open("a") as handle:
                handle.write(f"limits:\n  max_parallel_components: {k}\n")
                if (checkout / "supervisor" / "overlay.py").is_file():  # copy-on-write known
                    mode = os.environ.get("BENCH_WORKSPACE", "overlay")
                    handle.write(f"sandbox:\n  workspace: {mode}\n")
            (repo / ".supervisor" / "workflow.yaml").write_text(workflow)
            done = tasks.start_task("Build the parts", repo)
            requests = server.requests
        with tasks.reading(repo) as st:
            steps = [s for s in st.steps(done.id) if s["name"].startswith("implement/")]
            events = st.events(done.id)
            merged = [e for e in events if e.type == "component_merged"]
    times = [(s["finished_at"] - s["started_at"]).total_seconds() for s in steps]
    makespan = (merged[-1].timestamp - min(s["started_at"] for s in steps)).total_seconds()
    return {
        "makespan": makespan,
        "step": statistics.median(times),
        "busy": sum(times) / k,
        "merged": len(merged),
        "status": done.status,
        **breakdown(steps, events, requests),
    }


def breakdown(steps: list[Any], events: list[Any], requests: list[Any]) -> dict[str, float]:
    """Where a component step's time goes (medians): set-up (start -> context_packed: worktree,
    pack, prompt), start-up (-> its CLI's first model request: container and CLI), model (first
    -> last request, the scripted delay included), finish (-> the step's end: answer, snapshot,
    commit) and merge (-> component_merged: waiting for the main thread's merge)."""
    run_id = re.compile(r"RUN: wf\d+-[\w./-]+-step(\d+)")
    seen: dict[int, list[float]] = {}
    for r in requests:
        found = run_id.search(json.dumps(r.body))
        if found and r.kind == "scripted":
            seen.setdefault(int(found[1]), []).append(r.at)
    packed = {e.step: e.timestamp.timestamp() for e in events if e.type == "context_packed"}
    merges = {
        str(e.payload.get("component")): e.timestamp.timestamp()
        for e in events
        if e.type == "component_merged"
    }
    parts: dict[str, list[float]] = {
        k: [] for k in ("setup", "startup", "model", "finish", "merge")
    }
    for s in steps:
        at = seen.get(s["id"])
        if not at or s["name"] not in packed:
            continue
        start, end = s["started_at"].timestamp(), s["finished_at"].timestamp()
        parts["setup"].append(packed[s["name"]] - start)
        parts["startup"].append(min(at) - packed[s["name"]])
        parts["model"].append(max(at) - min(at))
        parts["finish"].append(end - max(at))
        cid = s["name"].split("/", 1)[1]
        if cid in merges:
            parts["merge"].append(merges[cid] - end)
    return {k: statistics.median(v) if v else 0.0 for k, v in parts.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("checkouts", nargs="+", type=Path)
    parser.add_argument("--files", default="200,10000")
    parser.add_argument("--workers", default="2,4,8")
    parser.add_argument("--components", type=int, default=20)
    parser.add_argument("--delay", type=float, default=3.0)
    parser.add_argument(
        "--workspaces",
        default=os.environ.get("BENCH_WORKSPACE", "overlay"),
        help="step workspaces to compare, e.g. full,overlay (checkouts that have overlay.py)",
    )
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        result = one(
            args.checkouts[0].resolve(),
            int(args.files),
            int(args.workers),
            args.components,
            args.delay,
        )
        print(json.dumps(result))
        return
    n = args.components
    print(f"{n} components, model step delay {args.delay} s; ratio = makespan / ideal")
    print("(sched = makespan / (sum of the step times / K): what the engine adds between steps,")
    print(" apart from steps slower than the median, e.g. K CLIs starting at once on few cores)")
    print("files  K  checkout (workspace)           makespan  step   ideal  ratio  sched  load(1m)")
    for files in [int(f) for f in args.files.split(",")]:
        for k in [int(w) for w in args.workers.split(",")]:
            runs = [(c, w) for c in args.checkouts for w in args.workspaces.split(",")]
            for checkout, workspace in runs:
                load = os.getloadavg()[0]
                started = time.perf_counter()
                sizes = ["--files", str(files), "--workers", str(k), "--components", str(n)]
                sizes += ["--delay", str(args.delay)]
                out = subprocess.run(
                    [sys.executable, __file__, str(checkout), "--one", *sizes],
                    capture_output=True,
                    text=True,
                    check=False,
                    env={**os.environ, "BENCH_WORKSPACE": workspace},
                )
                if out.returncode != 0:
                    name = f"{checkout} ({workspace})"
                    print(f"{files:>5} {k:>2}  {name:<28}  failed: {out.stderr[-600:]}")
                    continue
                r = json.loads(out.stdout.strip().splitlines()[-1])
                ideal = math.ceil(n / k) * r["step"]
                load = max(load, os.getloadavg()[0])
                print(
                    f"{files:>5} {k:>2}  {f'{checkout} ({workspace})':<28} {r['makespan']:>8.1f} "
                    f"{r['step']:>5.1f} {ideal:>6.1f} {r['makespan'] / ideal:>6.2f} "
                    f"{r['makespan'] / r['busy']:>6.2f}  {load:>5.1f}"
                    f"   ({r['merged']} merged, {r['status']}, "
                    f"{time.perf_counter() - started:.0f} s whole)",
                    flush=True,
                )
                print(
                    "        per component (median s): "
                    + ", ".join(f"{k} {r[k]:.2f}" for k in ("setup", "startup", "model"))
                    + f", finish {r['finish']:.2f}, merge wait {r['merge']:.2f}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
