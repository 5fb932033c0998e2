"""Whole-process time of the read-only CLI commands, from process start to exit.

    .venv/bin/python benchmarks/cli_speed.py [--runs 9] [--events 100000] [--code DIR ...]

Builds a repository whose state database holds one workflow with a 20-component plan, 40 steps and
a 100,000-event log, then runs `supervisor status <id>`, `supervisor status` and `supervisor events
<id> --json` as separate processes (what a person typing them waits for: interpreter start, imports,
the query, rendering) and prints the median of `--runs`: wall time, and the CPU time the process
used (on a busy machine, the better guide to what an idle one would show), each beside a bare
`python -c pass` timed in the same run, with the load average. It also prints where
`status <id>` spends its import time, per top-level package (`python -X importtime`, self time
summed).

`--code DIR` (repeatable) times the supervisor package found in DIR instead of this checkout, so a
before/after comparison runs on the same database in the same run, the checkouts taking turns run
by run, e.g. with a `git worktree` of
an older commit. DIR may be a path list (`DIR:EXTRA`), put first on PYTHONPATH: an older commit's
pinned libraries installed with `pip install --target EXTRA` are then used with it.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TARGETS_S = {"status 1": 0.15, "events 1 --json": 1.0}


def make_state(base: Path, events: int) -> Path:
    """A git repository with one workflow: a 20-component plan, 40 steps, `events` events."""
    from sqlalchemy import insert

    from supervisor.state import schema
    from supervisor.state.store import Store, now

    repo = base / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=b", "-c", "user.email=b@b"]
    subprocess.run([*git, "init", "-q", "-b", "main"], check=True)
    (repo / "README.md").write_text("bench\n")
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "init"], check=True)
    ids = [f"c{i}" for i in range(20)]
    plan = {
        "status": "COMPLETE",
        "phases": [
            {
                "id": "p1",
                "description": "parts",
                "components": [
                    {"id": c, "description": f"part {c}", "files": [f"{c}.py"]} for c in ids
                ],
            }
        ],
        "estimated_components": len(ids),
    }
    progress = {c: {"status": "merged" if i < 10 else "pending"} for i, c in enumerate(ids)}
    with Store(repo / ".supervisor" / "state.db") as store:
        wf = store.create_workflow(
            description="A long task",
            cli="claude",
            base_branch="main",
            base_sha="0" * 40,
            branch_for_id=lambda i: f"ai/{i}-long",
            definition={},
            first_step="implement",
        )
        for c in ids * 2:
            step = store.start_step(wf.id, f"implement/{c}", 1, "implementer", None)
            store.finish_step(step, "succeeded", output={"status": "SUCCESS"})
        store.update_workflow(
            wf.id,
            status="running",
            current_step="implement",
            context={"plan": plan, "components": progress},
        )
        with store.engine.begin() as conn:
            conn.execute(
                insert(schema.events),
                [
                    {
                        "workflow_id": wf.id,
                        "step": "implement",
                        "type": "note",
                        "role": None,
                        "status": None,
                        "payload": {"i": i},
                        "input_tokens": 10,
                        "output_tokens": 1,
                        "cost_usd": 0.001,
                        "timestamp": now(),
                    }
                    for i in range(events)
                ],
            )
    return repo


def timed(argv: list[str], **kwargs: Any) -> tuple[float, float, subprocess.CompletedProcess[str]]:
    """Seconds from spawn to exit and the CPU seconds the process used."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, check=False, **kwargs)
    seconds = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return seconds, cpu, done


def run(
    code: str, repo: Path, args: list[str], *, importtime: bool = False
) -> tuple[float, float, str]:
    """One `supervisor` process: wall and CPU seconds, and its stderr."""
    # An installed package has its bytecode compiled (pip does it); a checkout gets it from the
    # warm-up run, unless the environment forbids writing it.
    env = {
        **{k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"},
        "PYTHONPATH": code,
        "COLUMNS": "120",
        "SUPERVISOR_USER_DIR": str(repo.parent / "user"),
    }
    flags = ["-X", "importtime"] if importtime else []
    argv = [sys.executable, *flags, "-m", "supervisor", *args, "--repo", str(repo)]
    seconds, cpu, done = timed(argv, cwd=code.split(os.pathsep)[0], env=env)
    if done.returncode != 0:
        raise SystemExit(f"supervisor {' '.join(args)} failed:\n{done.stderr[-2000:]}")
    return seconds, cpu, done.stderr


def import_breakdown(stderr: str) -> list[tuple[str, float]]:
    """Seconds of import per top-level package (each module's self time, summed)."""
    per: Counter[str] = Counter()
    for line in stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        self_us, _cumulative, name = line[len("import time:") :].split("|")
        per[name.strip().split(".")[0]] += int(self_us)
    return [(name, us / 1e6) for name, us in per.most_common(12)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--code", action="append", help="checkout(s) to time (a PYTHONPATH)")
    args = parser.parse_args()
    codes = [
        os.pathsep.join(str(Path(p).resolve()) for p in c.split(os.pathsep))
        for c in args.code or [str(ROOT)]
    ]
    commands = [["status", "1"], ["status"], ["events", "1", "--json"]]
    with tempfile.TemporaryDirectory() as tmp:
        repo = make_state(Path(tmp), args.events)
        print(f"load average at the start: {load()}")
        # Round by round, every checkout in turn: on a shared machine the load drifts, and a
        # before/after pair measured minutes apart compares two machines.
        for code in codes:
            for command in commands:
                run(code, repo, command)  # warm the page cache and .pyc files
        samples: dict[tuple[str, str], list[tuple[float, float]]] = {}
        for _ in range(args.runs):
            for code in codes:
                samples.setdefault((code, "bare"), []).append(
                    timed([sys.executable, "-c", "pass"])[:2]
                )
                for command in commands:
                    samples.setdefault((code, " ".join(command)), []).append(
                        run(code, repo, command)[:2]
                    )
        for code in codes:
            print(f"\n{code} ({args.events:,} events, median of {args.runs} runs)")
            bare, bare_cpu = median_pair(samples[(code, "bare")])
            print(f"  bare `python -c pass`           {bare:.3f} s, CPU {bare_cpu:.3f} s")
            for command in commands:
                shown = " ".join(command)
                wall, cpu = median_pair(samples[(code, shown)])
                target = TARGETS_S.get(shown)
                note = f"  (target <= {target} s)" if target else ""
                print(
                    f"  supervisor {shown:<20} {wall:.3f} s, CPU {cpu:.3f} s; "
                    f"bare + {wall - bare:.3f} s, {wall / bare:.1f} x bare{note}"
                )
            _, _, trace = run(code, repo, ["status", "1"], importtime=True)
            total = sum(s for _, s in import_breakdown(trace))
            print(f"  imports of `status 1` by package (top 12, {total:.3f} s of them):")
            for name, seconds in import_breakdown(trace):
                print(f"    {name:<28} {seconds:.3f} s")
        print(f"\nload average at the end: {load()}")


def median_pair(rows: list[tuple[float, float]]) -> tuple[float, float]:
    return statistics.median(r[0] for r in rows), statistics.median(r[1] for r in rows)


def load() -> str:
    """The 1, 5 and 15 minute load averages: a shared machine's figures mean little without."""
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


if __name__ == "__main__":
    main()
