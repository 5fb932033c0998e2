"""Where a fan-out's makespan goes beyond its ideal (issue 30, item 3): read from one run's
component steps and merges, without the supervisor, so that benchmarks/run.py can print it beside
the ratio and a spec can check the arithmetic.

The ideal is ceil(N/K) x the median component step. The makespan (first component start to last
merge) is followed back along its critical chain: the last-merged component, then the step that
ended last before it began (the one whose slot it took), and so on. The rest is then:
- `steps`: the chain's steps beyond ceil(N/K) x the median: step times vary (a CLI that boots
  beside two others is slower), and a chain of slow ones sets the makespan;
- `dispatch`: from a chain step's end to the next one's start (the engine's move);
- `merge`: the last component's end to its merge;
- `late start`: the chain's first step beginning after the fan-out's first.
"""

from __future__ import annotations

import itertools
import math
import statistics
from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True)
class Span:
    name: str
    start: datetime
    end: datetime

    @property
    def seconds(self) -> float:
        return (self.end - self.start).total_seconds()


@dataclass(frozen=True)
class Breakdown:
    makespan: float
    ideal: float
    median_step: float
    chain: list[str]
    steps: float
    dispatch: float
    merge: float
    late_start: float

    @property
    def ratio(self) -> float:
        return self.makespan / self.ideal

    def describe(self) -> str:
        return (
            f"ideal ceil(N/K) x {self.median_step:.2f} s = {self.ideal:.2f} s; ratio "
            f"{self.ratio:.2f}; the rest {self.makespan - self.ideal:+.2f} s: chain "
            f"{' > '.join(self.chain)} steps {self.steps:+.2f}, dispatch {self.dispatch:.2f}, "
            f"merge {self.merge:.2f}, late start {self.late_start:.2f}"
        )


def breakdown(spans: list[Span], merged: dict[str, datetime], workers: int) -> Breakdown:
    """`spans`: each component step (start, end); `merged`: each component's merge time."""
    first = min(s.start for s in spans)
    last_name = max(merged, key=lambda n: merged[n])
    by_name = {s.name: s for s in spans}
    median = statistics.median(s.seconds for s in spans)
    ideal = math.ceil(len(spans) / workers) * median
    chain = [by_name[last_name]]
    while before := [s for s in spans if s.end <= chain[0].start]:
        chain.insert(0, max(before, key=lambda s: s.end))
    return Breakdown(
        makespan=(merged[last_name] - first).total_seconds(),
        ideal=ideal,
        median_step=median,
        chain=[s.name for s in chain],
        steps=sum(s.seconds for s in chain) - ideal,
        dispatch=sum(
            (later.start - earlier.end).total_seconds()
            for earlier, later in itertools.pairwise(chain)
        ),
        merge=(merged[last_name] - chain[-1].end).total_seconds(),
        late_start=(chain[0].start - first).total_seconds(),
    )
