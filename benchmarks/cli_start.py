"""CPU a worker CLI spends per run in the real sandbox, per checkout, side by side (issue 30,
items 1 and 6): the checkout's own adapter builds the command line and environment, the real CLI
answers a one-turn scripted conversation (`done`, no tool call) in a workspace of `--files`
files whose `.git` points outside the sandbox, as a step's does. The figure is the container's
own cgroup CPU read inside it after the CLI exits: its start-up, the one request and its exit,
nearly all start-up. Checkouts alternate run by run, each run a fresh interpreter with that
checkout first on the path; a bare `python -c pass` is timed beside each round, with the load
average, so that a figure is compared only with one from the same run:

    .venv/bin/python benchmarks/cli_start.py [checkout ...] [--cli claude] [--runs 7]

Where the CPU goes (claude 2.1.197, codex-cli 0.169.0, gemini 0.61.0 on the 2-core host, load
3-7): claude about 1.3 CPU-s a run, of which `claude --version` alone is 0.18 and `claude -h` 0.55;
`perf record` puts 93 % of a run in the binary's own runtime (its bundled JavaScript, already
bytecode) and under 2 % in the processes it starts (git ls-files/config/status/log, `rg --files`
twice, `ps aux`); a quarter of it is system time (47,000 page faults). No documented switch
reaches the runtime; `--bare` does (about 14 % by its changelog) but leaves the model three
tools, so it is not used. gemini about 3 CPU-s, the same for 10 or 10,000 files: V8 compiling
its 16 MB bundle chunks (0.76 s of a 2.1 s `gemini --version` in `node --cpu-prof`), which Node
20 cannot cache.
codex about 0.5 CPU-s, 0.1-0.3 of it the node launcher that only finds and executes the Rust
binary; the image now puts that binary first on PATH (0.65 -> 0.31 CPU-s, 5 runs each).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve()
# The container's own CPU, from inside it: cgroup v1 (cpuacct) or v2 (cpu.stat, microseconds).
CPU_READ = (
    'echo "CPU_NS=$(cat /sys/fs/cgroup/cpuacct/cpuacct.usage 2>/dev/null'
    " || awk '/usage_usec/ {print $2 * 1000}' /sys/fs/cgroup/cpu.stat)\" >&2"
)
MODEL = {"claude": "claude-sonnet-4-5", "codex": "gpt-5.5", "gemini": "gemini-2.5-pro"}
KEY = {"claude": "ANTHROPIC_API_KEY", "codex": "OPENAI_API_KEY", "gemini": "GEMINI_API_KEY"}
IMAGE = os.environ.get("SUPERVISOR_IMAGE", "supervisor-sandbox:latest")
"""The sandbox image (setup's variable): another tag compares an image's CLIs with this one's."""


def workspace(root: Path, files: int) -> Path:
    """A tree of `files` small files in folders of 100, and a `.git` file naming a git
    directory the sandbox does not have (what a step's workspace shows a worker)."""
    tree = root / "workspace"
    for i in range(files):
        folder = tree / f"d{i // 100}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"f{i % 100}.py").write_text(f"X = {i}\n")
    (tree / ".git").write_text("gitdir: /nonexistent/supervisor-workspace\n")
    return tree


def one(cli: str, tree: Path) -> dict[str, float]:
    """One run with the checkout first on sys.path (the parent sets PYTHONPATH)."""
    from supervisor.fakeapi import ScriptedModelServer, load_script
    from supervisor.sandbox.docker import DockerSandbox, RunSpec
    from supervisor.workers import adapter_for

    script = load_script({"conversations": [{"repeat": True, "turns": [{"text": "done"}]}]})
    sandbox = DockerSandbox(IMAGE, "supervisor-egress-bench")
    try:
        with ScriptedModelServer(script) as server:
            base = f"{server.url}/v1" if cli == "codex" else server.url
            route = sandbox.route(base)
            invocation = adapter_for(cli).build(
                model=MODEL[cli],
                base_url=route.url,
                workdir="/workspace",
                extra_flags=[],
                api_key_env=KEY[cli],
            )
            started = time.monotonic()
            run = sandbox.run(
                RunSpec(
                    argv=["sh", "-c", f'"$@"; {CPU_READ}', "sh", *invocation.argv],
                    worktree=tree,
                    env={**invocation.env, KEY[cli]: "bench-key"},
                    stdin_text="Say done.",
                    home_files=invocation.home_files,
                    route=route,
                    timeout=300,
                )
            )
            wall = time.monotonic() - started
            asked = [r for r in server.requests if r.method == "POST"]
    finally:
        sandbox.close()
    found = re.search(r"CPU_NS=(\d+)", run.stderr)
    if run.exit_code != 0 or found is None or not asked:
        raise SystemExit(f"{cli} run failed (exit {run.exit_code}): {run.stderr[-600:]}")
    # The first model request's size, a figure no load changes: what every request of a step
    # carries before the step's own prompt (tokens are billed per request).
    return {"cpu": int(found[1]) / 1e9, "wall": wall, "request": len(json.dumps(asked[0].body))}


def bare_python() -> float:
    started = time.monotonic()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    return time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("checkouts", nargs="*", default=[str(HERE.parents[1])])
    parser.add_argument("--cli", choices=sorted(MODEL), default="claude")
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one(args.cli, Path(args.one))))
        return
    checkouts = [Path(c).resolve() for c in args.checkouts]
    root = Path(tempfile.mkdtemp(prefix="cli-start-"))
    try:
        tree = workspace(root, args.files)
        results: dict[Path, list[dict[str, float]]] = {c: [] for c in checkouts}
        bare: list[float] = []
        for n in range(args.runs):
            bare.append(bare_python())
            for checkout in checkouts:
                out = subprocess.run(
                    [
                        str(checkout / ".venv/bin/python"),
                        str(HERE),
                        "--cli",
                        args.cli,
                        "--one",
                        str(tree),
                    ],
                    env={**os.environ, "PYTHONPATH": str(checkout)},
                    capture_output=True,
                    text=True,
                    check=True,
                )
                result = json.loads(out.stdout.strip().splitlines()[-1])
                results[checkout].append(result)
                print(
                    f"run {n + 1} {checkout}: {args.cli} CPU {result['cpu']:.3f} s, wall "
                    f"{result['wall']:.2f} s, first request {result['request']:,} bytes "
                    f"(load {os.getloadavg()[0]:.2f})",
                    flush=True,
                )
        print(f"\n{args.cli}, {args.files} files, {args.runs} runs alternating; medians:")
        for checkout, rows in results.items():
            cpu = statistics.median(r["cpu"] for r in rows)
            wall = statistics.median(r["wall"] for r in rows)
            low, high = min(r["cpu"] for r in rows), max(r["cpu"] for r in rows)
            size = statistics.median(r["request"] for r in rows)
            print(
                f"  {checkout}: CPU {cpu:.3f} s ({low:.3f}-{high:.3f}), wall {wall:.2f} s, "
                f"first request {size:,.0f} bytes"
            )
        print(f"  bare `python -c pass` {statistics.median(bare):.3f} s; load {os.getloadavg()}")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
