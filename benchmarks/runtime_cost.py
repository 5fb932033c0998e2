"""What gVisor costs per step, against runc, in one run on one machine: a no-op container, the
demo's test gate (`make test`: python3 -m unittest) and a one-turn `claude` worker against the
scripted API, each through DockerSandbox.run as a task runs them. The runtimes alternate within
every round (and which goes first alternates between rounds), so a machine that gets busier or
quieter during the run weighs on both alike. Medians are reported.

    .venv/bin/python benchmarks/runtime_cost.py [ROUNDS] [GATE_RUNTIME] [WORKER_RUNTIME]

Defaults: 10 rounds, runsc for the no-op and the gate, runsc-net for the worker (what
scripts/setup.sh registers; see README "Optional: gVisor").
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from supervisor.core import process
from supervisor.core.config import load_settings
from supervisor.fakeapi import ScriptedModelServer, load_script
from supervisor.gates.run import run_gate
from supervisor.lifecycle import demo
from supervisor.sandbox.docker import DockerSandbox, RunSpec
from supervisor.sandbox.runtime import known
from supervisor.workers.claude import ClaudeAdapter
from supervisor.workspace.worktrees import Workspace

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 10
GATE_RUNTIME = sys.argv[2] if len(sys.argv) > 2 else "runsc"
WORKER_RUNTIME = sys.argv[3] if len(sys.argv) > 3 else "runsc-net"
IMAGE = "supervisor-sandbox:latest"
NETWORK = "supervisor-egress-bench"
GOOD_CALC = "def add(a, b):\n    return a + b\n\n\ndef multiply(a, b):\n    return a * b\n"


def seconds(fn: Callable[[], object]) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def main() -> None:
    boxes = {
        "runc": DockerSandbox(IMAGE, NETWORK),
        "gvisor": DockerSandbox(
            IMAGE, NETWORK, runtime=GATE_RUNTIME, worker_runtime=WORKER_RUNTIME
        ),
    }
    missing = {GATE_RUNTIME, WORKER_RUNTIME} - set(known(boxes["runc"].client))
    if missing:
        sys.exit(f"not registered with the engine: {', '.join(sorted(missing))} (run setup.sh)")
    limits = load_settings(None).limits
    script = load_script({"conversations": [{"turns": [{"text": "Done."}], "repeat": True}]})
    with tempfile.TemporaryDirectory() as tmp, ScriptedModelServer(script) as server:
        repo = demo.make_demo_repo(Path(tmp) / "repo")
        (repo / "calc.py").write_text(GOOD_CALC)  # a gate that passes, as a finished step's
        git = ["git", "-C", str(repo), "-c", "user.name=b", "-c", "user.email=b@b"]
        process.run([*git, "commit", "-qam", "calc"])
        ws = Workspace(repo)
        tree = ws.add_worktree("bench", ws.head_commit())
        adapter = ClaudeAdapter()
        routes = {name: box.route(server.url) for name, box in boxes.items()}

        def noop(box: DockerSandbox) -> None:
            result = box.run(RunSpec(argv=["true"], worktree=tree))
            assert result.exit_code == 0, result.stderr

        def gate(box: DockerSandbox) -> None:
            result = run_gate(box, "test", "make test", tree, limits, {})
            assert result.passed, result.output

        def worker(box: DockerSandbox) -> None:
            route = routes["runc" if box is boxes["runc"] else "gvisor"]
            invocation = adapter.build(
                model="claude-sonnet-4-5", base_url=route.url, workdir="/workspace", extra_flags=[]
            )
            run = box.run(
                RunSpec(
                    argv=invocation.argv,
                    worktree=tree,
                    env={**invocation.env, "ANTHROPIC_API_KEY": "bench-key"},
                    stdin_text="ROLE: bench\nSay done.",
                    network=NETWORK,
                    extra_hosts={route.alias: route.gateway},
                    timeout=300,
                )
            )
            assert adapter.parse_output(run.stdout, run.stderr, run.exit_code).ok, run.stderr

        cases = {"no-op container": noop, "gate (make test)": gate, "claude worker, 1 turn": worker}
        samples: dict[tuple[str, str], list[float]] = {}
        for name, fn in cases.items():
            fn(boxes["runc"])  # warm: image layers, the network, node's first start
            fn(boxes["gvisor"])
            for i in range(ROUNDS):
                order = ["runc", "gvisor"] if i % 2 == 0 else ["gvisor", "runc"]
                for runtime in order:
                    took = seconds(lambda fn=fn, runtime=runtime: fn(boxes[runtime]))
                    samples.setdefault((name, runtime), []).append(took)
        for box in boxes.values():
            box.close()
        ws.remove_worktree(tree)

    print(f"{ROUNDS} rounds; gVisor = {GATE_RUNTIME} (gates), {WORKER_RUNTIME} (workers)")
    print(f"{'':24}{'runc':>10}{'gVisor':>10}{'extra':>10}{'ratio':>8}")
    for name in cases:
        runc = statistics.median(samples[(name, "runc")])
        gvisor = statistics.median(samples[(name, "gvisor")])
        print(f"{name:24}{runc:9.2f}s{gvisor:9.2f}s{gvisor - runc:+9.2f}s{gvisor / runc:7.2f}x")


if __name__ == "__main__":
    main()
