"""Adaptive assignment: which of a role's CLIs to run, scored from the runs recorded for it.

The plan's "Metrics & Adaptive Role Assignment": each CLI the role may use is scored by its success
rate (a run counts as a success only when its work was not sent back: first-attempt gate pass,
review approval, a valid plan; not merely a zero exit code), its retries, time and cost, over a
recent window. The configured default is kept unless another CLI scores better by the guardrail
margin, and a locked assignment wins over every figure. Everything here is pure (a typed snapshot
in, a typed choice out) so the decision is specified without a database or a CLI; the snapshot is
built by supervisor.routing.history, and the choice is recorded by the engine as a `cli_chosen`
event so that a person can see why a step ran where it did.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict

from supervisor.core.config import AdaptiveSettings
from supervisor.core.plural import plural
from supervisor.state.records import EventSpec

Basis = Literal["locked", "disabled", "too_few_runs", "default_unmeasured", "kept", "adapted"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class CliStats(_Frozen):
    """One CLI's record for one role and task type in the window."""

    cli: str
    runs: int
    successes: int
    """Runs whose work was accepted the first time (see supervisor.routing.history)."""
    avg_retries: float = 0.0
    avg_seconds: float = 0.0
    avg_cost_usd: float = 0.0

    @property
    def success_rate(self) -> float:
        return self.successes / self.runs if self.runs else 0.0

    def figures(self) -> dict[str, float | int]:
        return {
            "runs": self.runs,
            "success_rate": round(self.success_rate, 4),
            "avg_retries": round(self.avg_retries, 3),
            "avg_seconds": round(self.avg_seconds, 2),
            "avg_cost_usd": round(self.avg_cost_usd, 4),
        }


class Snapshot(_Frozen):
    """What the state database says about one role and task type, per CLI."""

    role: str
    task_type: str
    window_days: float
    stats: dict[str, CliStats] = {}

    def runs(self, clis: list[str]) -> int:
        return sum(self.stats[c].runs for c in clis if c in self.stats)


class Choice(_Frozen):
    """The CLI a role runs on for one step, and why."""

    role: str
    task_type: str
    cli: str
    default: str
    basis: Basis
    reason: str
    candidates: list[str]
    scores: dict[str, float] = {}
    figures: dict[str, dict[str, float | int]] = {}

    @property
    def moved(self) -> bool:
        return self.cli != self.default

    def event(self, step: str) -> EventSpec:
        return EventSpec(
            "cli_chosen",
            step=step,
            role=self.role,
            status=self.basis,
            payload={
                "cli": self.cli,
                "default": self.default,
                "task_type": self.task_type,
                "reason": self.reason,
                "candidates": self.candidates,
                "scores": self.scores,
                "figures": self.figures,
            },
        )


@dataclass(frozen=True)
class _Asked:
    """One role's question, kept so that every answer names the same role, task and candidates."""

    role: str
    task_type: str
    clis: list[str]
    """The candidates without repeats, the configured default first."""

    @property
    def default(self) -> str:
        return self.clis[0]

    def answer(
        self,
        cli: str,
        basis: Basis,
        reason: str,
        scores: dict[str, float] | None = None,
        figures: dict[str, dict[str, float | int]] | None = None,
    ) -> Choice:
        return Choice(
            role=self.role,
            task_type=self.task_type,
            cli=cli,
            default=self.default,
            basis=basis,
            reason=reason,
            candidates=self.clis,
            scores=scores or {},
            figures=figures or {},
        )


def choose(
    role: str,
    task_type: str,
    candidates: list[str],
    snapshot: Snapshot,
    settings: AdaptiveSettings,
) -> Choice:
    """The CLI for `role`: its lock, else the best-scoring candidate when it clears the guardrails,
    else the default (the first candidate)."""
    asked = _Asked(role, task_type, list(dict.fromkeys(candidates)))
    unscored = _before_scoring(asked, snapshot, settings)
    if unscored is not None:
        return unscored
    return _by_score(asked, snapshot, settings)


def _window(settings: AdaptiveSettings) -> str:
    return f"in the last {settings.adaptation_interval_days:g} days"


def _before_scoring(asked: _Asked, snapshot: Snapshot, settings: AdaptiveSettings) -> Choice | None:
    """The answers no figure can change: a lock is a person's decision, adaptation may be off,
    one candidate leaves nothing to choose, and too few runs say nothing yet."""
    role, default = asked.role, asked.default
    locked = settings.locked_assignments.get(role)
    if locked is not None:
        return asked.answer(locked, "locked", f"locked_assignments sets {role} to {locked}")
    if not settings.enabled:
        return asked.answer(default, "disabled", "adaptive assignment is off: the configured CLI")
    total = snapshot.runs(asked.clis)
    if len(asked.clis) < 2:
        return asked.answer(default, "kept", f"{default} is the only CLI {role} may use")
    if total < settings.min_samples_before_adapt:
        return asked.answer(
            default,
            "too_few_runs",
            f"{total} {asked.task_type} {plural(total, 'run')} of {role} {_window(settings)}, "
            f"fewer than min_samples_before_adapt ({settings.min_samples_before_adapt}): the "
            f"configured {default}",
        )
    return None


def _by_score(asked: _Asked, snapshot: Snapshot, settings: AdaptiveSettings) -> Choice:
    """The default stays unless a measured CLI beats it by the margin without falling too far
    below its success rate: a switch must be worth the churn, and cheap is not enough."""
    clis, default, window = asked.clis, asked.default, _window(settings)
    total = snapshot.runs(clis)
    enough = settings.min_samples_per_cli
    measured = [c for c in clis if c in snapshot.stats and snapshot.stats[c].runs >= enough]
    figures = {c: snapshot.stats[c].figures() for c in measured}
    if default not in measured:
        return asked.answer(
            default,
            "default_unmeasured",
            f"the configured {default} has fewer than {settings.min_samples_per_cli} runs "
            f"{window}: nothing to compare against, so it stays",
            figures=figures,
        )
    scores = score({c: snapshot.stats[c] for c in measured}, settings)
    base, base_rate = scores[default], snapshot.stats[default].success_rate
    ranked = sorted(measured, key=lambda c: (-scores[c], clis.index(c)))
    found, held = _challenger(default, ranked, scores, snapshot, settings)
    if found is not None:
        rate = snapshot.stats[found].success_rate
        return asked.answer(
            found,
            "adapted",
            f"{found} scores {scores[found]:.2f} against {default}'s {base:.2f} over {total} "
            f"{asked.task_type} runs {window} (success {rate:.0%} vs {base_rate:.0%}; margin "
            f"{settings.switch_margin:g})",
            scores=scores,
            figures=figures,
        )
    best = ranked[0]
    if best == default:
        why = f"{default} scores best ({base:.2f})"
    else:
        why = f"{best} scores {scores[best]:.2f} against {default}'s {base:.2f}: {held}"
    return asked.answer(
        default,
        "kept",
        f"{why} over {total} {asked.task_type} runs {window}",
        scores=scores,
        figures=figures,
    )


def _challenger(
    default: str,
    ranked: list[str],
    scores: dict[str, float],
    snapshot: Snapshot,
    settings: AdaptiveSettings,
) -> tuple[str | None, str]:
    """The best-ranked CLI that clears both guardrails, or None and why the best was held back
    (so that a kept default explains itself)."""
    base, base_rate = scores[default], snapshot.stats[default].success_rate
    held = f"not better by the margin {settings.switch_margin:g}"
    for cli in ranked:
        if cli == default:
            break
        gain = scores[cli] - base
        rate = snapshot.stats[cli].success_rate
        if gain < settings.switch_margin:
            break  # the rest score lower still
        if base_rate - rate > settings.max_deviation_from_default:
            # cheaper or faster, but too much less successful
            held = f"{rate:.0%} success against {base_rate:.0%} is more than " + (
                f"max_deviation_from_default ({settings.max_deviation_from_default:.0%}) below"
            )
            continue
        return cli, held
    return None, held


def score(stats: dict[str, CliStats], settings: AdaptiveSettings) -> dict[str, float]:
    """Each CLI's weighted score in [0, 1]: success rate, and cost, retries and time relative to
    the most expensive, most retried and slowest of the compared CLIs (lower is better)."""
    w = settings.weights
    total = w.success + w.cost + w.retries + w.time
    if total <= 0:
        total, w = 1.0, w.model_copy(update={"success": 1.0})

    def relative(value: float, values: list[float]) -> float:
        top = max(values)
        return value / top if top > 0 else 0.0

    costs = [s.avg_cost_usd for s in stats.values()]
    tries = [s.avg_retries for s in stats.values()]
    times = [s.avg_seconds for s in stats.values()]
    out = {}
    for cli, s in stats.items():
        value = (
            w.success * s.success_rate
            + w.cost * (1 - relative(s.avg_cost_usd, costs))
            + w.retries * (1 - relative(s.avg_retries, tries))
            + w.time * (1 - relative(s.avg_seconds, times))
        )
        out[cli] = round(value / total, 4)
    return out
