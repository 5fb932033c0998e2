"""Where a test run's wall time went, process by process (issue 30, item 6).

Run the suite with a timeline, then read it:

    SUPERVISOR_TEST_TIMELINE=/tmp/timeline.tsv CI=true bash scripts/test.sh
    .venv/bin/python benchmarks/suite_timeline.py /tmp/timeline.tsv

For each xdist process: its busy time, its first start and last end, and its longest specs; then
the files that cost most in all. The run's floor is the process that ends last: what it ran
after the others had finished is the time a better split could save."""

from __future__ import annotations

import argparse
from collections import defaultdict
from pathlib import Path
from typing import NamedTuple


class Spec(NamedTuple):
    worker: str
    start: float
    end: float
    nodeid: str

    @property
    def seconds(self) -> float:
        return self.end - self.start

    @property
    def file(self) -> str:
        return self.nodeid.split("::", 1)[0]


def read(path: Path) -> list[Spec]:
    specs = []
    for line in path.read_text(encoding="utf-8").splitlines():
        worker, start, end, nodeid = line.split("\t", 3)
        specs.append(Spec(worker, float(start), float(end), nodeid))
    return specs


def report(specs: list[Spec], top: int) -> str:
    t0 = min(s.start for s in specs)
    by_worker: dict[str, list[Spec]] = defaultdict(list)
    for spec in specs:
        by_worker[spec.worker].append(spec)
    span = max(s.end for s in specs) - t0
    lines = [f"{len(specs)} specs, {span:.0f} s from the first start to the last end"]
    ends = {w: max(s.end for s in ss) for w, ss in by_worker.items()}
    first_done = min(ends.values())
    for worker, ss in sorted(by_worker.items()):
        busy = sum(s.seconds for s in ss)
        tail = sum(max(0.0, s.end - max(s.start, first_done)) for s in ss)
        lines.append(
            f"{worker}: {len(ss)} specs, busy {busy:.0f} s, ends at {ends[worker] - t0:.0f} s,"
            f" {tail:.0f} s after the first process finished"
        )
        for s in sorted(ss, key=lambda s: -s.seconds)[:top]:
            lines.append(f"    {s.seconds:6.1f} s  at {s.start - t0:6.0f} s  {s.nodeid}")
    per_file: dict[str, float] = defaultdict(float)
    for spec in specs:
        per_file[spec.file] += spec.seconds
    lines.append("files by total time:")
    for name, secs in sorted(per_file.items(), key=lambda kv: -kv[1])[: top * 2]:
        lines.append(f"    {secs:7.1f} s  {name}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("timeline", type=Path)
    parser.add_argument("--top", type=int, default=12)
    args = parser.parse_args()
    print(report(read(args.timeline), args.top))


if __name__ == "__main__":
    main()
