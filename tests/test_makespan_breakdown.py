"""benchmarks/makespan.py: a fan-out's makespan beyond its ideal, followed along its critical
chain, adds up to exactly the parts it names (the figure issue 30, item 3, reports)."""

from __future__ import annotations

import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

from makespan import Span, breakdown

T0 = datetime(2026, 11, 28, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def span(name: str, start: float, end: float) -> Span:
    return Span(name, at(start), at(end))


def test_the_rest_is_the_critical_chains_slow_steps_its_dispatch_and_the_last_merge() -> None:
    # Three slots: a short first step (prepared ahead), then cold ones of about a second.
    spans = [
        span("c0", 0.0, 0.3),
        span("c1", 0.0, 1.1),
        span("c2", 0.0, 1.0),
        span("c3", 0.31, 1.3),
        span("c4", 1.01, 1.9),
        span("c5", 1.12, 2.1),
    ]
    merged = {"c0": at(0.32), "c1": at(1.13), "c2": at(1.03), "c3": at(1.32), "c4": at(1.92)}
    merged["c5"] = at(2.13)

    found = breakdown(spans, merged, workers=3)

    assert found.chain == ["c1", "c5"]  # of the steps ended when c5 began, c1 ended last
    assert found.median_step == pytest.approx(0.985)
    assert found.ideal == pytest.approx(1.97)
    assert found.makespan == pytest.approx(2.13)
    assert found.steps == pytest.approx(1.1 + 0.98 - 1.97)
    assert (found.dispatch, found.merge, found.late_start) == pytest.approx((0.02, 0.03, 0.0))
    rest = found.late_start + found.steps + found.dispatch + found.merge
    assert found.makespan - found.ideal == pytest.approx(rest)
    assert "ratio 1.08" in found.describe()


def test_a_chain_that_began_late_counts_its_late_start() -> None:
    spans = [span("a", 0.0, 1.0), span("b", 0.2, 1.2)]
    found = breakdown(spans, {"a": at(1.01), "b": at(1.25)}, workers=2)

    assert found.chain == ["b"]
    assert (found.late_start, found.merge) == pytest.approx((0.2, 0.05))
    assert found.makespan - found.ideal == pytest.approx(
        found.late_start + found.steps + found.dispatch + found.merge
    )
