"""Which worker steps may come next, and from which commit, while the current step runs.

Part of the engine's deciding (the preparing is steps/prepare.py's): a guess that is never
committed and never trusted. The next worker's inputs are known before the current step ends
when the current step cannot move the tree the next one starts from: a gate, a reviewer, a
planner or analyzer leave the candidate as it is, so each of their possible successors (`next`,
`on_fail`, `on_reject`) that runs one worker role starts from the same commit as now. A step
that may commit (an implementer, a fan-out) cannot know its successor's base, its own result;
for it, the likeliest worker step after the gate that checks the result is made from the commit
it starts from instead, and brought to the result once it is known (`beyond`). A wrong guess
costs only the preparation (discarded when the next step does not take it); the next step
checks everything it uses against its own inputs anyway.

What a wrong guess costs decides how much is made ahead (`containers`, `plan`): a worktree, a
route and a context pack are a tenth of a second each, made for every successor; a started
container is its CLI's start-up, 1-5 s of CPU on the 2-core host (and a Docker start of most of
a second there), slowing the running step and whatever else the machine runs when it is thrown
away. So only the likeliest successor gets its container started at once (a fan-out's, one for
each component its first batch is expected to run, `fan_out_width`): the step's pass
(`next`; a reviewer's pass leads to no worker), or a gate's way back (`on_fail`) when the gate's
own history says it fails more often than not (`fail_odds`: a first test run after an
implementation, in a repository where first runs fail). Another one at once only when the load
leaves a core idle for it, else later, once a core has stayed idle while the step before still
runs (steps/prepare.py): on a busy machine never, on an idle one during a long gate. (Both of a
gate's ways started at once were measured on the loaded 2-core host, benchmarks/step_gap.py: the
two Docker starts and start-ups beside the gate made the gate slower and left the one that was
used still starting up when it ended, so gate and gap together were no shorter.)

The likeliest successor's CLI starts up at the running step's CPU weight (`foreground`): it is
the next thing on the task's critical path, so its start-up CPU, spent anyway before the next
step can go, is better spent while the step before still runs than after it (on a loaded host,
the eighth of a share a background start-up gets left the CLI still booting when its prompt
came, 5-8 s later). The others start at a background weight: they are likely thrown away.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from supervisor.core.config import StepDef, WorkflowDef


@dataclass(frozen=True)
class Expected:
    """A worker step that may come next: its step, its role, the commit its worktree starts
    from, and the CLI the engine would choose for it (None: the role's own order)."""

    step: str
    role: str
    base: str
    cli: str | None = None
    likely: bool = True
    """Reached when the step passes (`next`), or a gate's way back (`on_fail`) instead when the
    gate fails more often than not; not the other ways."""
    container: bool = True
    """Its container started ahead too, or only its worktree, route and context pack."""
    foreground: bool = False
    """Its CLI starts up at the running step's CPU weight (the likeliest successor's, started
    at once), else at the background weight (warm.BACKGROUND_SHARES)."""
    advance: bool = False
    """For the step after next: made from the commit the running step (one that commits)
    starts from, and brought to that step's result once it is known (steps/advance.py)."""


HISTORY = 20
"""The gate's runs the odds are read from (the latest, at the same attempt)."""


def fail_odds(failed: list[bool]) -> float:
    """The odds that a gate fails, from its earlier runs (True: failed), with one imagined
    failure and one pass beside them (Laplace): 1/2 with no history (the pass stays the likelier
    then), and a history of a few runs moves it only so far."""
    return (sum(failed) + 1) / (len(failed) + 2)


def base_now(context: dict[str, Any], tip: str) -> str:
    """Where a worker step starts (steps/worker.py): the candidate, else the locked
    interfaces, else the task branch's tip."""
    return str(context.get("candidate") or context.get("locked_sha") or tip)


def fan_out_width(context: dict[str, Any], slots: int) -> int:
    """How many components a fan-out that follows now starts at once, as far as is known before
    its plan is: the analyzer's recommended count when there is one, else every slot
    (`limits.max_parallel_components`). One when a plan is in already: a fan-out after a gate or
    a review runs one fix-up worker, or the components left."""
    if context.get("plan"):
        return 1
    verdict = context.get("analysis")
    recommended = verdict.get("recommended_components") if isinstance(verdict, dict) else None
    if isinstance(recommended, int) and recommended >= 1:
        return min(slots, recommended)
    return slots


def first_batch(plan: dict[str, Any], slots: int) -> int:
    """How many components a plan starts at once, at most: its first phase's (a later phase
    waits for the earlier ones), up to every slot."""
    phases = plan.get("phases") or [{}]
    return max(1, min(slots, len(phases[0].get("components") or [])))


def surplus(expected: list[Expected], batch: int) -> set[int]:
    """The indexes of a fan-out's copies (`fan_out_width`) beyond the `batch` its plan starts
    at once: of no use now that the plan is known."""
    seen: dict[str, int] = {}
    found: set[int] = set()
    for index, item in enumerate(expected):
        seen[item.step] = seen.get(item.step, 0) + 1
        if seen[item.step] > batch:
            found.add(index)
    return found


def after(
    definition: WorkflowDef,
    step: StepDef,
    context: dict[str, Any],
    tip: str,
    commits: Callable[[str], bool],
    odds: float = 0.0,
    width: int = 1,
) -> list[Expected]:
    """The worker steps that may follow `step` and start from the commit known now, most
    likely first (`next`, then the way back); `commits(role)`: whether a role's answer is a
    commit (its output is an implementation); `odds`: a gate's odds of failing (`fail_odds`):
    above even, its way back is the likely one, first, and its pass is not. A likely fan-out
    comes `width` times (`fan_out_width`): one for each component of its first batch."""
    if step.action is not None or step.for_each is not None:
        return []
    if step.role is not None and commits(step.role):
        return []
    base = base_now(context, tip)
    found: list[Expected] = []
    for successor in (step.next, step.on_fail, step.on_reject):
        if successor is None or successor not in definition.steps:
            continue
        role = definition.steps[successor].role
        if role is None or any(e.role == role for e in found):
            continue
        back = step.gate is not None and odds > 1 / 2  # fails more often than not
        likely = successor == (step.on_fail if back else step.next)
        copies = width if likely and definition.steps[successor].for_each is not None else 1
        found += [Expected(successor, role, base, likely=likely)] * copies
    found.sort(key=lambda e: not e.likely)  # the likely ones first
    return found


def beyond(
    definition: WorkflowDef,
    step: StepDef,
    context: dict[str, Any],
    tip: str,
    commits: Callable[[str], bool],
    odds: Callable[[str], float],
) -> list[Expected]:
    """For a step that commits (an implementer, a fan-out), whose successor's base is its own
    result: the likeliest worker step after the gate that checks that result (or right after
    it), made now from the commit the step starts from, to be advanced to its result while the
    gate runs. Its CLI's start-up (the longest part of a container's preparation) then falls in
    the implementation, not in a gate of a second or two. `odds(gate)`: that gate's odds of
    failing (`fail_odds`)."""
    if step.action is not None or step.next is None:
        return []
    if step.for_each is None and (step.role is None or not commits(step.role)):
        return []
    following = definition.steps.get(step.next)
    if following is None or following.action is not None or following.for_each is not None:
        return []
    if following.gate is not None and following.role is None:
        found = after(definition, following, context, tip, commits, odds(step.next))
    elif following.role is not None and following.gate is None:
        found = [Expected(step.next, following.role, base_now(context, tip))]
    else:
        return []
    return [dataclasses.replace(e, advance=True) for e in found if e.likely][:1]


def containers(limit: int, fixed: int | None, cpus: int, load: float, likely: int) -> int:
    """How many of the successors, in order, get their container started at once: `fixed` when
    the configuration says so; else the `likely` ones (the first few), and others only for the
    cores the load leaves idle (`cpus` less the 1-minute `load`, which holds the running step's
    own share; the first preparation takes one of them)."""
    if fixed is not None:
        return max(0, min(limit, fixed))
    idle = math.floor(cpus - load)
    return max(0, min(limit, max(int(likely), idle)))


def leading_likely(expected: list[Expected]) -> int:
    """How many successors, from the first, are likely."""
    count = 0
    for item in expected:
        if not item.likely:
            break
        count += 1
    return count


def idle_cores(before: tuple[float, float], after: tuple[float, float], cpus: int) -> float:
    """Cores idle between two readings of the machine's (idle, total) CPU time."""
    total = after[1] - before[1]
    return cpus * (after[0] - before[0]) / total if total > 0 else 0.0


def plan(expected: list[Expected], limit: int, started: int) -> list[Expected]:
    """The `limit` likeliest successors, the first `started` with their container, the first of
    all in the foreground when it is likely (one more started on an idle core is likely thrown
    away: it starts up in the background)."""
    return [
        dataclasses.replace(
            item,
            container=i < started,
            # One made for the step after next has a whole step to start up in.
            foreground=i == 0 and item.likely and i < started and not item.advance,
        )
        for i, item in enumerate(expected[:limit])
    ]
