"""The wait a user sees between steps: from one step's end (its row's `finished_at`) to the next
worker CLI's first model request (the scripted API's request log), on the demo task, with the
real `claude` in the real sandbox. Split into the engine's move (previous end -> next step row's
start), the step's own set-up (start -> `context_packed` event: worktree, pack, prompt), and the
container plus CLI start-up (-> first request). Any checkout, for a before/after in one run:

    .venv/bin/python benchmarks/step_gap.py [checkout ...] [--runs 3]

`--model-seconds S` makes every model conversation's first answer take S seconds and
`--gate-seconds G` the test gate at least G seconds (`sleep G && make test`): the scripted API
answers at once and the demo's gate takes about a second, where a real model thinks and a real
suite runs for seconds; what a step can prepare meanwhile depends on both.

Also per task: the preparations discarded unused, those with a started container, and the CPU
their containers had spent (the CLI's start-up; read from the container's cgroup just before it is
removed), and how many steps used a context pack gathered ahead.

Target (issue 30): the gap <= 0.2 s. Prints the load average beside every line, and the bare
floor of a step measured in the same run (worktree add + remove, a no-op container: what
benchmarks/run.py calls the floor), so that the gap a user sees reads as a multiple of it.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

RUN_ID = re.compile(r"RUN: wf\d+-[\w./-]+-step(\d+)")


def container_cpu(container_id: str) -> float:
    """CPU seconds a container has used, from its cgroup (v1 cgroupfs, else v2); 0 when neither."""
    for path in (
        f"/sys/fs/cgroup/cpuacct/docker/{container_id}/cpuacct.usage",
        f"/sys/fs/cgroup/system.slice/docker-{container_id}.scope/cpu.stat",
    ):
        try:
            text = Path(path).read_text()
        except OSError:
            continue
        if path.endswith("cpuacct.usage"):
            return int(text) / 1e9
        return int(text.split()[1]) / 1e6  # usage_usec
    return 0.0


def one(
    checkout: Path, model_s: float = 0.0, gate_s: float = 0.0, containers: int | None = None
) -> dict[str, object]:
    """One demo run in this process, importing the supervisor from `checkout`."""
    sys.path.insert(0, str(checkout))
    os.chdir(checkout)
    from supervisor import tasks
    from supervisor.sandbox import warm

    wasted: list[float] = []
    remove = warm._remove

    def measured(container: object, volume: object, run_dir: Path) -> None:
        if container is not None:
            wasted.append(container_cpu(str(getattr(container, "id", ""))))
        remove(container, volume, run_dir)

    warm._remove = measured  # type: ignore[assignment]  # the benchmark's own instrument
    from supervisor.demo import demo_script, make_demo_repo, write_project_config
    from supervisor.fakeapi import ScriptedModelServer, load_script

    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        os.environ.setdefault("ANTHROPIC_API_KEY", "bench-key")
        os.environ["SUPERVISOR_USER_DIR"] = str(base / "user")
        repo = make_demo_repo(base / "demo")
        script = demo_script()
        for conversation in script["conversations"]:
            conversation["turns"][0]["delay"] = model_s
        with ScriptedModelServer(load_script(script)) as server:
            write_project_config(repo, server.url)
            if gate_s or containers is not None:
                from supervisor.guard.trust import trust

                config = repo / ".supervisor" / "config.yaml"
                text = config.read_text().replace(
                    "test: make test", f"test: sleep {gate_s} && make test"
                )
                if containers is not None:  # a checkout that knows limits.prepare_containers
                    text += f"limits:\n  prepare_containers: {containers}\n"
                config.write_text(text)
                trust(repo)
            done = tasks.start_task("Implement add and multiply", repo)
            requests = server.requests
        with tasks.reading(repo) as st:
            steps = st.steps(done.id)
            events = st.events(done.id)
    first: dict[int, float] = {}
    for r in requests:
        if r.kind not in ("scripted", "default", "exhausted", "unmatched"):
            continue
        found = RUN_ID.search(json.dumps(r.body))
        if found:
            first.setdefault(int(found[1]), r.at)
    packed = [e.timestamp.timestamp() for e in events if e.type == "context_packed"]
    prepared = [e.timestamp.timestamp() for e in events if e.type == "prepared_run_used"]
    rows: list[dict[str, object]] = []
    ordered = sorted(steps, key=lambda s: s["started_at"])
    for prev, step in itertools.pairwise(ordered):
        if step["id"] not in first or prev["finished_at"] is None:
            continue
        end = prev["finished_at"].timestamp()
        began = step["started_at"].timestamp()
        request = first[step["id"]]
        pack = next((p for p in packed if began <= p <= request), began)
        rows.append(
            {
                "after": f"{prev['name']}({prev['role'] or 'gate'})",
                "step": f"{step['name']}({step['role']})",
                "gap": request - end,
                "engine": began - end,
                "setup": pack - began,
                "container": request - pack,
                "prepared": any(began <= p <= request for p in prepared),
            }
        )
    discarded = [e for e in events if e.type == "prepared_run_discarded"]
    return {
        "rows": rows,
        "discarded": len(discarded),
        "discarded_containers": len(wasted),
        "wasted_cpu_s": sum(wasted),
        "packs_ahead": sum(
            bool(e.payload.get("ahead")) for e in events if e.type == "context_packed"
        ),
    }


def floor(checkout: Path, repeat: int = 3) -> float:
    """Worktree add + remove and a no-op container run, median of `repeat` (this process)."""
    import time

    sys.path.insert(0, str(checkout))
    from supervisor.demo import make_demo_repo
    from supervisor.sandbox.docker import DockerSandbox, RunSpec
    from supervisor.workspace.worktrees import Workspace

    samples = []
    with tempfile.TemporaryDirectory() as tmp:
        repo = make_demo_repo(Path(tmp) / "repo")
        ws = Workspace(repo)
        head = ws.head_commit()
        sandbox = DockerSandbox("supervisor-sandbox:latest", "supervisor-egress-bench")
        tree = ws.add_worktree("floor", head)
        for i in range(repeat):
            started = time.perf_counter()
            ws.remove_worktree(ws.add_worktree(f"f{i}", head))
            sandbox.run(RunSpec(argv=["true"], worktree=tree))
            samples.append(time.perf_counter() - started)
        sandbox.close()
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("checkouts", nargs="*", type=Path, default=[Path()])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--model-seconds", type=float, default=0.0)
    parser.add_argument("--gate-seconds", type=float, default=0.0)
    parser.add_argument(
        "--prepare-containers",
        type=int,
        default=None,
        help="limits.prepare_containers for every checkout (default: the checkout's own)",
    )
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        found = one(
            args.checkouts[0].resolve(),
            args.model_seconds,
            args.gate_seconds,
            args.prepare_containers,
        )
        print(json.dumps(found))
        return
    bare = floor(args.checkouts[0].resolve())
    print(
        f"bare floor (worktree add+remove + no-op container) {bare:.3f} s, load "
        f"{os.getloadavg()[0]:.1f}"
    )
    print("gap = previous step's end -> next CLI's first model request (seconds, median of runs)")
    print("     = engine (end -> next step's start) + setup (-> context_packed) + container/CLI")
    for _ in range(args.runs):
        for checkout in args.checkouts:
            load = os.getloadavg()[0]
            out = subprocess.run(
                [
                    sys.executable,
                    __file__,
                    str(checkout.resolve()),
                    "--one",
                    f"--model-seconds={args.model_seconds}",
                    f"--gate-seconds={args.gate_seconds}",
                    *(
                        [f"--prepare-containers={args.prepare_containers}"]
                        if args.prepare_containers is not None
                        else []
                    ),
                ],
                capture_output=True,
                text=True,
                check=False,
            )
            if out.returncode != 0:
                print(f"{checkout}: failed: {out.stderr[-800:]}")
                continue
            found = json.loads(out.stdout.strip().splitlines()[-1])
            rows = found["rows"]
            load = max(load, os.getloadavg()[0])
            gaps = [float(r["gap"]) for r in rows]
            median = statistics.median(gaps)
            print(
                f"{checkout!s:<24} median gap {median:.3f} s ({median / bare:.2f} x floor)  "
                f"max {max(gaps):.3f} s  load {load:.1f}\n"
                f"    discarded {found['discarded']} ({found['discarded_containers']} with a "
                f"started container, {found['wasted_cpu_s']:.1f} CPU-s); packs gathered ahead "
                f"used {found['packs_ahead']}"
            )
            for r in rows:
                print(
                    f"    {r['after']:<28} -> {r['step']:<26} gap {r['gap']:.3f} = engine "
                    f"{r['engine']:.3f} + setup {r['setup']:.3f} + container {r['container']:.3f}"
                    f"{'  (prepared)' if r.get('prepared') else ''}"
                )


if __name__ == "__main__":
    main()
