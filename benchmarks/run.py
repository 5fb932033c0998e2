"""Benchmarks of the supervisor's own overhead per worker step, on the real parts.

    .venv/bin/python benchmarks/run.py [--repeat 5] [--step-only]

Prints the median of each part of a step (worktree, Repomix packing, container run, parsing and the
database write), the bare floor measured in the same run (`docker run` of a no-op plus `git worktree
add`), and one whole worker step with the real `claude` binary against the scripted model API.
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from makespan import Breakdown, Span, breakdown  # noqa: E402

from supervisor.core import process  # noqa: E402
from supervisor.core.parsing import parse_worker_output  # noqa: E402
from supervisor.core.schemas import ImplementationOutput  # noqa: E402
from supervisor.fakeapi import ScriptedModelServer, load_script  # noqa: E402
from supervisor.gates import base_tests  # noqa: E402
from supervisor.lifecycle.demo import demo_script, make_demo_repo, write_project_config  # noqa: E402
from supervisor.sandbox.docker import DockerSandbox, RunSpec  # noqa: E402
from supervisor.state.store import EventSpec, Store  # noqa: E402
from supervisor.workspace.treedata import CommitFiles  # noqa: E402
from supervisor.workspace.worktrees import Workspace  # noqa: E402

IMAGE = "supervisor-sandbox:latest"


def timed(fn: Callable[[], object], repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


def make_repo(base: Path, files: int) -> Path:
    repo = make_demo_repo(base / f"repo{files}")
    pkg = repo / "pkg"
    pkg.mkdir(exist_ok=True)
    for i in range(files):
        (pkg / f"mod{i}.py").write_text(f"def f{i}(x):\n    return x + {i}\n")
    process.run(["git", "-C", str(repo), "add", "-A"])
    process.run(
        ["git", "-C", str(repo), "-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qm", "m"]
    )
    return repo


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--files", type=int, default=1000, help="files in the benchmark repo")
    parser.add_argument("--components", type=int, default=6, help="independent components (N)")
    parser.add_argument("--workers", type=int, default=3, help="components at once (K)")
    parser.add_argument(
        "--makespan-runs", type=int, default=5, help="fan-outs timed (the median ratio is shown)"
    )
    parser.add_argument(
        "--step-only",
        action="store_true",
        help="only the per-step overhead and the worker step (a 10-file repo for the big pack; "
        "no event log or parallel components)",
    )
    args = parser.parse_args()
    console = Console(width=130)
    rows: list[tuple[str, float, str]] = []
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        repo = make_repo(base, args.files)
        ws = Workspace(repo)
        head = ws.head_commit()
        sandbox = DockerSandbox(IMAGE, "supervisor-egress-bench")
        counter = iter(range(10_000))

        def worktree_cycle() -> None:
            tree = ws.add_worktree(f"bench-{next(counter)}", head)
            ws.remove_worktree(tree)

        floor_tree = ws.add_worktree("bench-floor", head)

        def docker_noop() -> None:
            sandbox.run(RunSpec(argv=["true"], worktree=floor_tree))

        from supervisor.context.assemble import build_pack
        from supervisor.context.roles import load_role

        implementer = load_role("implementer", None)
        five = [f"pkg/mod{i}.py" for i in range(5)]

        def pack_five() -> None:
            # As the engine does: the step's commit, read as blobs (the worktree is never read).
            files = CommitFiles(ws.git_dir, head)
            build_pack(files, implementer, repo=None, prompt_tokens=600, targets=five)

        def snapshot_one_change() -> float:
            tree = ws.add_worktree(f"bench-snap-{next(counter)}", head)
            (tree / "pkg" / "mod1.py").write_text("changed\n")
            started = time.perf_counter()
            ws.snapshot(tree, "bench")
            seconds = time.perf_counter() - started
            ws.remove_worktree(tree)
            return seconds

        answer = (
            '```json\n{"status": "SUCCESS", "files_created": [], "files_modified": ["calc.py"],'
            ' "tests_written": [], "blockers": []}\n```'
        )
        store = Store(base / "bench.db")
        wf = store.create_workflow(
            description="bench",
            cli="claude",
            base_branch="main",
            base_sha=head,
            branch_for_id=lambda i: f"ai/{i}-bench",
            definition={},
            first_step="implement",
        )

        def parse_and_record() -> None:
            data = parse_worker_output(answer, ImplementationOutput).model_dump()
            step = store.start_step(wf.id, "implement", 1, "implementer", None)
            store.finish_step(step, "succeeded", output=data, event=EventSpec("implementation"))
            store.advance(wf.id, step="implement", next_step="test", context={"x": 1})

        changed_tree = ws.add_worktree("bench-oracle", head)
        (changed_tree / "pkg" / "mod1.py").write_text("changed\n")
        changed = ws.snapshot(changed_tree, "bench") or head
        ws.remove_worktree(changed_tree)

        def oracle_check() -> None:  # the common path: no test of the base changed, no run
            assert not base_tests.changes(ws.git_dir, head, changed)

        worktree_s = timed(worktree_cycle, args.repeat)
        noop_s = timed(docker_noop, args.repeat)
        pack_s = timed(pack_five, args.repeat)
        parse_s = timed(parse_and_record, args.repeat)
        snap_s = statistics.median(snapshot_one_change() for _ in range(args.repeat))
        oracle_s = timed(oracle_check, args.repeat)
        floor = worktree_s + noop_s
        rows += [
            ("git worktree add + remove", worktree_s, f"{args.files}-file repo"),
            ("container run of `true` (create, start, wait, logs, remove)", noop_s, "floor"),
            ("bare floor: worktree + no-op container", floor, ""),
            ("context pack of 5 target files (strategy, tiktoken, Repomix, redaction)", pack_s, ""),
            ("parse + validate + 3 state transactions", parse_s, ""),
            ("candidate snapshot from the worktree as data (1 file changed)", snap_s, ""),
            ("base oracle's check, no test of the base changed (per counted gate)", oracle_s, ""),
            (
                "supervisor overhead per step (sum of the above)",
                floor + pack_s + parse_s + snap_s,
                f"{(floor + pack_s + parse_s + snap_s) / floor:.2f} x floor",
            ),
        ]

        big_files = 10 if args.step_only else 10_000
        big = make_repo(base, big_files)
        packs = []

        def pack_big() -> None:
            packs.append(build_pack(big, implementer, repo=None, prompt_tokens=600, targets=five))

        big_s = timed(pack_big, args.repeat)
        last = packs[-1]
        rows.append(
            (
                f"pack 5 target files in a {big_files:,}-file repo (strategy implementer_targeted)",
                big_s,
                f"{last.prompt_tokens}+{last.tokens} of {last.budget} tokens, "
                f"{len(last.files)} files, {len(last.pruned)} pruned",
            )
        )

        os.environ.setdefault("ANTHROPIC_API_KEY", "bench-key")
        os.environ["SUPERVISOR_USER_DIR"] = str(base / "user")
        demo_repo = make_demo_repo(base / "demo")
        from supervisor.lifecycle import tasks

        with ScriptedModelServer(load_script(demo_script())) as server:
            write_project_config(demo_repo, server.url)
            started = time.perf_counter()
            done = tasks.start_task("Implement add and multiply", demo_repo)
            whole = time.perf_counter() - started
        with tasks.reading(demo_repo) as st:
            worker_steps = [s for s in st.steps(done.id) if s["role"]]
            gate_steps = [s for s in st.steps(done.id) if not s["role"]]

        def seconds(row: dict[str, object]) -> float:
            return (row["finished_at"] - row["started_at"]).total_seconds()  # type: ignore[operator]

        rows += [
            (
                "worker step with real claude (median, DB start→finish)",
                statistics.median(seconds(s) for s in worker_steps),
                f"{len(worker_steps)} steps",
            ),
            (
                "gate step `make test` (median)",
                statistics.median(seconds(s) for s in gate_steps),
                f"{len(gate_steps)} gates",
            ),
            ("whole demo workflow (start-task to completed)", whole, done.status),
        ]
        sandbox.close()
        store.close()
        if args.step_only:
            print_rows(console, rows, args.repeat)
            return

        # `status` on a long event log: 100,000 events in one workflow's history.
        from sqlalchemy import insert

        from supervisor.state import schema
        from supervisor.state.store import now
        from supervisor.views.render import workflow_detail

        big_store = Store(base / "events.db")
        wf_big = big_store.create_workflow(
            description="long",
            cli="claude",
            base_branch="main",
            base_sha=head,
            branch_for_id=lambda i: f"ai/{i}-long",
            definition={},
            first_step="implement",
        )
        with big_store.engine.begin() as conn:
            conn.execute(
                insert(schema.events),
                [
                    {
                        "workflow_id": wf_big.id,
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
                    for i in range(100_000)
                ],
            )
        quiet = Console(file=io.StringIO(), width=120)

        def status_once() -> None:
            with Store(base / "events.db") as st:
                quiet.print(workflow_detail(st, wf_big.id))

        rows.append(
            (
                "`status <id>` with a 100,000-event log (open, query, render)",
                timed(status_once, args.repeat),
                "target ≤ 0.2 s",
            )
        )
        big_store.close()

        rows += parallel_rows(base, args.components, args.workers, args.makespan_runs)

    print_rows(console, rows, args.repeat)


def print_rows(console: Console, rows: list[tuple[str, float, str]], repeat: int) -> None:
    table = Table(title=f"supervisor step overhead (median of {repeat})")
    table.add_column("measure")
    table.add_column("seconds", justify="right")
    table.add_column("note")
    for name, value, note in rows:
        table.add_row(name, f"{value:.3f}", note)
    console.print(table)


def parallel_rows(base: Path, n: int, k: int, runs: int) -> list[tuple[str, float, str]]:
    """Makespan of N independent components on K workers, and `resume` to its first new step."""
    import signal
    import subprocess
    from datetime import UTC, datetime

    from supervisor.lifecycle import tasks
    from supervisor.lifecycle.demo import fenced

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
    conversations = [{"when": "ROLE: planner", "repeat": True, "turns": [{"text": fenced(plan)}]}]
    for c in ids:
        write = {"name": "Write", "input": {"file_path": f"{c}.py", "content": f"{c} = 1\n"}}
        conversations.append(
            {
                "when": f"one component of the plan: '{c}'",
                "repeat": True,
                "turns": [{"tool_use": write}, {"text": fenced(report)}],
            }
        )
    workflow = (
        "workflow:\n  initial_step: plan\n  steps:\n"
        "    plan: {role: planner, next: implement}\n"
        "    implement: {role: implementer, for_each: component, next: commit}\n"
        "    commit: {action: commit}\n"
    )
    rows: list[tuple[str, float, str]] = []
    with ScriptedModelServer(load_script({"conversations": conversations})) as server:
        found: list[Breakdown] = []
        for run in range(runs):
            repo = make_demo_repo(base / f"parallel{run}")
            write_project_config(repo, server.url)
            with (repo / ".supervisor" / "config.yaml").open("a") as handle:
                handle.write(f"limits:\n  max_parallel_components: {k}\n")
            (repo / ".supervisor" / "workflow.yaml").write_text(workflow)
            done = tasks.start_task("Build the parts", repo)
            with tasks.reading(repo) as st:
                spans = [
                    Span(s["name"].split("/", 1)[1], s["started_at"], s["finished_at"])
                    for s in st.steps(done.id)
                    if s["name"].startswith("implement/")
                ]
                merged = {
                    e.payload["component"]: e.timestamp
                    for e in st.events(done.id)
                    if e.type == "component_merged"
                }
            found.append(breakdown(spans, merged, k))
            print(f"  makespan run {run + 1}: {found[-1].makespan:.2f} s; {found[-1].describe()}")
        middle = sorted(found, key=lambda b: b.ratio)[len(found) // 2]
        rows.append(
            (
                f"makespan of {n} independent components on {k} workers (median ratio of {runs})",
                middle.makespan,
                f"{middle.describe()} (target <= 1.05)",
            )
        )

        # Kill a run inside its second component's step, then time resume to its first new step.
        repo = make_demo_repo(base / "resume")
        write_project_config(repo, server.url)
        (repo / ".supervisor" / "workflow.yaml").write_text(workflow)
        start = [sys.executable, "-m", "supervisor", "start-task", "Build", "--yes"]
        killed = subprocess.run(
            [*start, "--repo", str(repo)],
            env={**os.environ, "SUPERVISOR_KILL_AT": "context_packed#2"},
            capture_output=True,
            check=False,
        )
        assert killed.returncode == -signal.SIGKILL, killed.stderr[-500:]
        wf = tasks.workflows(repo)[0]
        started = datetime.now(UTC)
        clock = time.perf_counter()
        tasks.resume(wf.id, repo)
        total = time.perf_counter() - clock
        with tasks.reading(repo) as st:
            first = next(
                e.timestamp
                for e in st.events(wf.id)
                if e.type == "step_started" and e.timestamp.replace(tzinfo=UTC) >= started
            )
        rows.append(
            (
                "resume after a SIGKILL: call to its first new step",
                (first.replace(tzinfo=UTC) - started).total_seconds(),
                f"target <= 1 s; whole resume {total:.1f} s",
            )
        )
    return rows


if __name__ == "__main__":
    main()
