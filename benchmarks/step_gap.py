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

`--tasks N` runs N demo tasks in one repository and measures the last: what a checkout learns
from a gate's earlier runs (the demo's first test run fails by design, its second passes) shows
only from the second task on.

Beside each step before a gap: how long it took (what is prepared meanwhile slows it on a small
host: the cost side). Not in the gap: the step's tail before its row ends (`exit -> end`: its
container exited, its logs read, it removed, its result recorded), printed beside it and added to
the gap in `from the CLI's exit`, the wait as a user watching the CLIs sees it. Where the
container part went, for a prepared container (read from the host: its cgroup's CPU and its
processes' states every 20 ms): when it was started, when its CLI was ready (all its processes
asleep, no CPU used: booted and blocked on its prompt; `booting` when its prompt came first),
when its prompt was given, and its CLI's own prompt -> request time with the CPU it spent then.

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
import threading
import time
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


SAMPLE_S = 0.02
IDLE_CPU_S = 0.002
"""A prepared CLI counts as ready (booted, blocked on its prompt) from the first of the samples
before its prompt in which its container's processes all sleep and used under 2 ms of CPU."""


class Watch:
    """One prepared container's life, seen from the host: when it was started, its cgroup's CPU
    and its processes' states every SAMPLE_S, and when its prompt was given (warm.run)."""

    def __init__(self, container_id: str) -> None:
        self.id = container_id
        self.started = time.time()
        self.prompted: float | None = None
        self.samples: list[tuple[float, float, bool]] = []  # (time, cpu s, all asleep)
        self.thread = threading.Thread(target=self._sample, daemon=True)
        self.thread.start()

    def _sample(self) -> None:
        base = f"/sys/fs/cgroup/cpuacct/docker/{self.id}"
        while True:
            try:
                cpu = int(Path(f"{base}/cpuacct.usage").read_text()) / 1e9
                pids = Path(f"{base}/cgroup.procs").read_text().split()
            except OSError:
                return  # removed
            asleep = True
            for pid in pids:
                try:
                    state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
                except (OSError, IndexError):
                    continue
                asleep = asleep and state in ("S", "I")
            self.samples.append((time.time(), cpu, asleep))
            time.sleep(SAMPLE_S)

    def ready(self) -> float | None:
        """When its CLI had booted (the start of the idle run that reaches the prompt); None when
        it was still busy when its prompt came."""
        if self.prompted is None:
            return None
        before = [s for s in self.samples if s[0] <= self.prompted]
        ready = None
        for (_, cpu0, _), (t1, cpu1, asleep) in itertools.pairwise(before):
            idle = asleep and cpu1 - cpu0 < IDLE_CPU_S
            ready = (ready or t1) if idle else None
        return ready

    def cpu_at(self, at: float) -> float:
        found = [cpu for t, cpu, _ in self.samples if t <= at]
        return found[-1] if found else 0.0


def instrument(warm: object) -> dict[str, Watch]:
    """Watch every prepared container (the benchmark's own instrument, not the product's)."""
    watches: dict[str, Watch] = {}
    prepare, run = warm.prepare, warm.run  # type: ignore[attr-defined]

    def prepared(*args: object, **kwargs: object) -> object:
        made = prepare(*args, **kwargs)
        if made is not None:
            cid = str(made.container.id)
            watches[cid] = Watch(cid)
        return made

    def ran(sandbox: object, ready: object, *args: object, **kwargs: object) -> object:
        watch = watches.get(str(getattr(getattr(ready, "container", None), "id", "")))
        if watch is not None:
            watch.prompted = time.time()
        return run(sandbox, ready, *args, **kwargs)

    warm.prepare, warm.run = prepared, ran  # type: ignore[attr-defined]
    return watches


def exits(docker_sandbox: type) -> list[float]:
    """When each container the sandbox waited for had exited (before its logs are read and it
    is removed): a step's end as its user sees it, earlier than its row's `finished_at`."""
    found: list[float] = []
    wait = docker_sandbox._wait  # type: ignore[attr-defined]

    def waited(*args: object, **kwargs: object) -> object:
        code = wait(*args, **kwargs)
        found.append(time.time())
        return code

    docker_sandbox._wait = waited  # type: ignore[attr-defined]
    return found


def one(
    checkout: Path,
    model_s: float = 0.0,
    gate_s: float = 0.0,
    containers: int | None = None,
    tasks_in_repo: int = 1,
) -> dict[str, object]:
    """One demo run in this process, importing the supervisor from `checkout`; with
    `tasks_in_repo` > 1, the last of that many demo tasks in one repository (the earlier ones
    its gate's history)."""
    sys.path.insert(0, str(checkout))
    os.chdir(checkout)
    from supervisor.lifecycle import tasks

    wasted: list[float] = []
    watches: dict[str, Watch] = {}
    try:
        from supervisor.sandbox import warm
    except ImportError:  # a checkout from before the pipelined steps: nothing is prepared
        pass
    else:
        remove = warm._remove

        def measured(container: object, volume: object, run_dir: Path) -> None:
            if container is not None:
                wasted.append(container_cpu(str(getattr(container, "id", ""))))
            remove(container, volume, run_dir)

        warm._remove = measured  # type: ignore[assignment]  # the benchmark's own instrument
        watches = instrument(warm)
    from supervisor.sandbox.docker import DockerSandbox

    exited = exits(DockerSandbox)
    from supervisor.fakeapi import ScriptedModelServer, load_script
    from supervisor.lifecycle.demo import demo_script, make_demo_repo, write_project_config

    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        os.environ.setdefault("ANTHROPIC_API_KEY", "bench-key")
        os.environ["SUPERVISOR_USER_DIR"] = str(base / "user")
        repo = make_demo_repo(base / "demo")
        script = demo_script()
        for conversation in script["conversations"]:
            conversation["turns"][0]["delay"] = model_s
        for _ in range(tasks_in_repo):  # the last one measured, on the earlier ones' history
            with ScriptedModelServer(load_script(script)) as server:
                write_project_config(repo, server.url)
                if gate_s or containers is not None:
                    from supervisor.guard.trust import trust

                    config = repo / ".supervisor" / "config.yaml"
                    text = config.read_text().replace(
                        "test: make test", f"test: sleep {gate_s} && make test"
                    )
                    if containers is not None:  # a checkout that knows prepare_containers
                        text += f"limits:\n  prepare_containers: {containers}\n"
                    config.write_text(text)
                    trust(repo)
                wasted.clear()
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
        gone = max((t for t in exited if t <= end), default=end)
        began = step["started_at"].timestamp()
        request = first[step["id"]]
        pack = next((p for p in packed if began <= p <= request), began)
        watch = next(
            (w for w in watches.values() if w.prompted and began <= w.prompted <= request), None
        )
        rows.append(
            {
                "after": f"{prev['name']}({prev['role'] or 'gate'})",
                "step": f"{step['name']}({step['role']})",
                "gap": request - end,
                "tail": end - gone,
                "took": end - prev["started_at"].timestamp(),
                "engine": began - end,
                "setup": pack - began,
                "container": request - pack,
                "prepared": any(began <= p <= request for p in prepared),
                **(split(watch, end, request) if watch is not None else {}),
            }
        )
    discarded = [e for e in events if e.type == "prepared_run_discarded"]
    if os.environ.get("STEP_GAP_SAMPLES"):  # the raw samples, to check the `ready` reading
        Path(os.environ["STEP_GAP_SAMPLES"]).write_text(
            json.dumps([[w.started, w.prompted, w.samples] for w in watches.values()])
        )
    return {
        "rows": rows,
        "discarded": len(discarded),
        "discarded_containers": len(wasted),
        "wasted_cpu_s": sum(wasted),
        "packs_ahead": sum(
            bool(e.payload.get("ahead")) for e in events if e.type == "context_packed"
        ),
    }


def split(watch: Watch, end: float, request: float) -> dict[str, object]:
    """Where the container part went, each time from the previous step's end: the prepared
    container started (negative: before that end), its CLI ready (None: still booting when its
    prompt came), the prompt given; and the CPU its CLI spent from its prompt to its request."""
    assert watch.prompted is not None
    ready = watch.ready()
    return {
        "born": watch.started - end,
        "ready": None if ready is None else ready - end,
        "prompt": watch.prompted - end,
        "cli": request - watch.prompted,
        "cli_cpu": watch.cpu_at(request + SAMPLE_S) - watch.cpu_at(watch.prompted),
    }


def floor(checkout: Path, repeat: int = 3) -> float:
    """Worktree add + remove and a no-op container run, median of `repeat` (this process)."""
    import time

    sys.path.insert(0, str(checkout))
    from supervisor.lifecycle.demo import make_demo_repo
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
    parser.add_argument(
        "--tasks",
        type=int,
        default=1,
        help="run this many demo tasks in one repository and measure the last: a gate's "
        "earlier runs there are the history its successors are guessed from",
    )
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        found = one(
            args.checkouts[0].resolve(),
            args.model_seconds,
            args.gate_seconds,
            args.prepare_containers,
            args.tasks,
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
    print("from the CLI's exit = the step's tail (exit -> end: what its user waits for too) + gap")
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
                    f"--tasks={args.tasks}",
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
            seen = [float(r["gap"]) + float(r["tail"]) for r in rows]
            median = statistics.median(gaps)
            print(
                f"{checkout!s:<24} median gap {median:.3f} s ({median / bare:.2f} x floor)  "
                f"max {max(gaps):.3f} s; from the CLI's exit {statistics.median(seen):.3f} s "
                f"(max {max(seen):.3f})  load {load:.1f}\n"
                f"    discarded {found['discarded']} ({found['discarded_containers']} with a "
                f"started container, {found['wasted_cpu_s']:.1f} CPU-s); packs gathered ahead "
                f"used {found['packs_ahead']}"
            )
            for r in rows:
                print(
                    f"    {r['after']:<18} {r['took']:5.2f} s -> {r['step']:<26} (exit -> end "
                    f"{r['tail']:.3f}) "
                    f"gap {r['gap']:.3f} = engine "
                    f"{r['engine']:.3f} + setup {r['setup']:.3f} + container {r['container']:.3f}"
                    f"{'  (prepared)' if r.get('prepared') else ''}"
                )
                if "prompt" in r:
                    ready = "booting" if r["ready"] is None else f"{r['ready']:+.3f}"
                    print(
                        f"{'':34}container born {r['born']:+.3f}, CLI ready {ready}, prompt "
                        f"{r['prompt']:+.3f}; prompt -> request {r['cli']:.3f} "
                        f"({r['cli_cpu']:.3f} CPU-s)"
                    )


if __name__ == "__main__":
    main()
