"""Preparing the next worker step while the current one runs (issue 30: pipelined steps).

The engine names what the next step will need when its inputs are already known
(supervisor/workflow/lookahead.py: a role and the commit its worktree starts from); this module
makes it in background threads (steps/preparation.py makes each one): the worktree, the
credentials and the proxy route, the context pack gathered (supervisor/context/ahead.py), and
for the likeliest the container started with its CLI waiting for a prompt
(supervisor/sandbox/warm.py; lookahead.plan says which). The next worker step takes a
preparation only when it wants the same role, CLI, base and key, and uses its container only
when the container is exactly the one it would have made (`warm.fingerprint` of its own
RunSpec); anything else is discarded (behind the engine, off the wait for the next step), as is
every preparation the step after it did not take. A pack that follows from the running step's
answer (a fan-out's, from the plan) is gathered once the answer is in. Even the guess is made in
the background (it asks git, the routing and the gate's history): the step starting meanwhile is
the one its user waits for. Nothing of it is workflow progress: a used or discarded preparation
is an event, and a crash leaves only things named for the task (worktree `wf<id>-prep-...`,
labelled container, run folder, proxy route), which the task's clean-up on `resume` removes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from supervisor.context.ahead import KEEP, Ahead
from supervisor.core import dag
from supervisor.core.errors import DockerUnavailableError, Terminated
from supervisor.sandbox import adopt, warm
from supervisor.sandbox.docker import RunSpec
from supervisor.workflow import lookahead
from supervisor.workflow.steps import advance, machine
from supervisor.workflow.steps.pack_ahead import pack_ahead
from supervisor.workflow.steps.preparation import (
    Prepared,
    discard,
    prepare_worker,
    record_event,
    used,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from supervisor.guard.credentials import Credentials
    from supervisor.sandbox.docker import RunResult
    from supervisor.state.store import Workflow
    from supervisor.workflow.lookahead import Expected
    from supervisor.workflow.steps.base import StepContext


def packs(c: StepContext) -> Ahead | None:
    """The context packs gathered ahead in this engine run, if any."""
    pipeline = c.pipeline
    return pipeline.promised_packs() if isinstance(pipeline, Pipeline) else None


def run(
    c: StepContext,
    step_id: int,
    prepared: Prepared | None,
    spec: RunSpec,
    base: str,
    stdin: str,
) -> RunResult | None:
    """The step's run in its prepared container when that is exactly the container `spec`
    makes; None (the container discarded) otherwise: the step then runs `spec` as before."""
    ready = prepared.warm if prepared is not None else None
    if prepared is None or ready is None:
        return None
    prepared.warm = None
    if warm.fingerprint(spec, base) != ready.fingerprint:
        warm.discard(ready)
        record_event(c, prepared, "discarded", "the step's container differs from the prepared one")
        return None
    try:
        result = warm.run(c.sandbox, ready, spec, stdin)  # type: ignore[arg-type]
    except BaseException as e:  # a stop leaves its worker running: its route stays open
        stopped = isinstance(e, Terminated | DockerUnavailableError)  # as adopt.run
        adopt.end_route(c.sandbox, step_id, left=stopped and spec.keep)
        raise
    if result is None:
        record_event(c, prepared, "discarded", "the prepared CLI had stopped waiting")
        return None  # the route stays for the step's own run, which closes it
    _close_step_route(c, step_id)
    return result


def _close_step_route(c: StepContext, step_id: int) -> None:
    opened = c.sandbox.__dict__.get("step_routes", {}).pop(step_id, None)
    if opened is not None and hasattr(c.sandbox, "close_route"):
        c.sandbox.close_route(opened)


Pending = tuple[int, "Expected", Future[Prepared | None]]
"""A preparation being made: its generation (the step that started it), what for, and it."""
PROMPT_WAIT_S = 10.0
"""How long a preparation for the step after next waits for the running step's worker to get
its prompt before it starts anyway (a step whose worker never starts: a failed set-up)."""
SAMPLE_SECONDS = 0.25
CALM_SAMPLES = 4
IDLE_CORES = 0.9
"""A later container starts once this much of a core stayed idle for CALM_SAMPLES samples (a
second: a step shorter than that ends before a CLI started then could be ready anyway)."""


class Pipeline:
    """The preparations of one engine run: made in the background, taken by the next step,
    the rest discarded after it (and all of them when the engine stops, however it stops)."""

    def __init__(
        self,
        c: StepContext,
        limit: int,
        make: Callable[[StepContext, Workflow, Expected], Prepared | None] | None = None,
    ) -> None:
        self.c = c
        self.limit = limit
        self.make = make or prepare_worker
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=max(limit, 1), thread_name_prefix="prepare")
        self._pending: list[Pending] = []
        self.generation = 0
        self.packs = Ahead()
        self._stop = threading.Event()
        self._later: list[threading.Thread] = []
        # Discards run behind the engine, one at a time: removing a container and a worktree
        # (0.1-0.3 s on a loaded host) is no part of the wait for the next step.
        self._discards = ThreadPoolExecutor(max_workers=1, thread_name_prefix="discard")
        self._discarding: list[Future[None]] = []
        self._promising: list[threading.Event] = []
        # Packs gathered once an answer is in: never queued behind a container being made.
        self._gathers = ThreadPoolExecutor(max_workers=1, thread_name_prefix="gather")
        # The generation whose step's worker last got its prompt: what is made for the step
        # after next waits for that, so that its container's start is no part of that wait.
        self._turn = threading.Condition()
        self._prompted_in = 0
        # The guesses, one at a time and in order (`ahead`), by generation.
        self._planner = ThreadPoolExecutor(max_workers=1, thread_name_prefix="guess")
        self._plans: list[tuple[int, Future[None]]] = []

    def ahead(
        self,
        wf: Workflow,
        expected: list[Expected] | Callable[[], list[Expected]],
        worker: bool = False,
    ) -> None:
        """Start preparing for the step after the one starting now: the likeliest with its
        container only, unless cores are idle (lookahead.containers). `expected`, or the guess
        that makes it (run in the background, off the starting step's set-up). `worker`: the
        step starting now runs a worker, whose set-up is the wait for its first request; what
        is not needed at once (the step after next, an unlikely successor) waits for its
        prompt."""
        with self._lock:
            self.generation += 1
            generation = self.generation
            self._plans = [(g, f) for g, f in self._plans if not f.done()]
            planned = self._planner.submit(self._plan, wf, expected, generation, worker)
            self._plans.append((generation, planned))
        with self._turn:  # what still waits for the step before's prompt waits no more
            self._turn.notify_all()

    def _plan(
        self,
        wf: Workflow,
        expected: list[Expected] | Callable[[], list[Expected]],
        generation: int,
        worker: bool,
    ) -> None:
        if self._stop.is_set():
            return
        if callable(expected):
            try:
                expected = expected()
            except Exception:  # a guess that cannot be made is no guess
                expected = []
        if not (hasattr(self.c.sandbox, "finish_prepared") and self.c.ws.copy_on_write):
            # What is made for the step after next is made for its container's start-up, and
            # brought to its commit through a copy-on-write view's mount: neither is here.
            expected = [item for item in expected if not item.advance]
        with self._lock:
            # Made during the step before for the step after it, to be brought to its result.
            early = [p for p in self._pending if p[1].advance and p[0] == generation - 1]
        fixed = self.c.settings.limits.prepare_containers
        likely = lookahead.leading_likely(expected)
        cpus = os.cpu_count() or 1
        started = lookahead.containers(self.limit, fixed, cpus, machine.load(), likely)
        for item in lookahead.plan(expected, self.limit, started):
            made_early = self._early_for(early, item)
            if made_early is not None:
                future = self._pool.submit(
                    self._advance, wf, item, made_early, generation, fixed is None
                )
            else:
                wait = item.advance or (worker and not item.likely)
                future = self._pool.submit(self._prepare, wf, item, generation, fixed is None, wait)
            with self._lock:
                self._pending.append((generation, item, future))

    def _planned(self, up_to: int) -> None:
        """Wait until the guesses of the generations up to `up_to` are made (a few hundredths
        of a second after their step began)."""
        with self._lock:
            waiting = [f for g, f in self._plans if g <= up_to]
        for future in waiting:
            with contextlib.suppress(Exception):
                future.result()

    def _early_for(self, early: list[Pending], item: Expected) -> Future[Prepared | None] | None:
        """The preparation made early for `item`'s role and CLI from another commit, taken out
        of the pending ones (it is `item`'s now, advanced or discarded)."""
        if item.advance:
            return None
        for entry in early:
            if entry[1].role == item.role and entry[1].cli == item.cli:
                with self._lock:
                    if entry not in self._pending:
                        continue
                    self._pending.remove(entry)
                early.remove(entry)
                return entry[2]
        return None

    def _advance(
        self,
        wf: Workflow,
        item: Expected,
        early: Future[Prepared | None],
        generation: int,
        adapt: bool,
    ) -> Prepared | None:
        """`item` from the preparation made early (its container's CLI started up already),
        brought to `item`'s base; else discarded, and `item` prepared afresh."""
        try:
            made = early.result()
        except Exception:
            made = None
        if made is not None and made.warm is not None:
            with self._lock:
                unclaimed = not made.claimed and not self._stop.is_set()
            if unclaimed and advance.advance(self.c, made, item.base):
                with contextlib.suppress(Exception):  # the step gathers its own
                    pack_ahead(self.c, wf, item, self.packs)
                return made
        if made is not None:
            self._claim(made)
            discard(self.c, made, "it could not be brought to the commit its step starts from")
        return self._prepare(wf, item, generation, adapt)

    def _prepare(
        self, wf: Workflow, item: Expected, generation: int, adapt: bool, wait: bool = False
    ) -> Prepared | None:
        made = None
        if wait and not self._await_prompt(generation):
            return None
        try:
            made = self.make(self.c, wf, item)  # the container first: its CLI starts up longest
            pack_ahead(self.c, wf, item, self.packs)
        except Exception as e:  # a preparation never fails a step: the step makes its own
            self.c.reporter.info(f"preparing '{item.step}' ahead failed: {e}")
        dag.import_ahead()  # a plan's graph needs it: imported before any plan comes
        if made is not None and made.later is not None and adapt:
            later = threading.Thread(
                target=self._start_later, args=(made, generation), name="prepare-later"
            )
            with self._lock:
                self._later = [*(t for t in self._later if t.is_alive()), later]
            later.start()
        return made

    def prompted(self) -> None:
        """The running step's worker has its prompt (steps/worker.py)."""
        with self._turn:
            self._prompted_in = self.generation
            self._turn.notify_all()

    def _await_prompt(self, generation: int) -> bool:
        """Wait until the step of `generation` has given its worker its prompt (at most
        PROMPT_WAIT_S: a worker that never starts); False when that step ended first (what was
        to be made during it is of no use now) or the pipeline stopped."""
        self._until(lambda: self.generation != generation or self._prompted_in >= generation)
        return not self._stop.is_set() and self.generation == generation

    def _until(self, turned: Callable[[], bool]) -> None:
        """Wait for a worker's prompt as `turned` reads it (at most PROMPT_WAIT_S), or the stop."""
        with self._turn:
            self._turn.wait_for(lambda: self._stop.is_set() or turned(), timeout=PROMPT_WAIT_S)

    def answered(self, wf: Workflow, context: dict[str, Any]) -> None:
        """The running step answered with what its successors' packs follow from (a plan: the
        fan-out's targets): gathered now, while the engine records the answer, instead of in the
        next step's set-up (before the plan, only the way the step would go without it was)."""
        if not context.get("plan"):
            return
        self._planned(self.generation)
        batch = lookahead.first_batch(
            context["plan"], self.c.settings.limits.max_parallel_components
        )
        with self._lock:
            mine = [entry for entry in self._pending if entry[0] == self.generation]
            surplus = lookahead.surplus([item for _, item, _ in mine], batch)
            for index in surplus:  # made for a component the plan does not start at once
                self._pending.remove(mine[index])
                self._discarding.append(
                    self._discards.submit(self._discard_surplus, mine[index][2], self.generation)
                )
            current = [item for i, (_, item, _) in enumerate(mine) if i not in surplus]
        known = dataclasses.replace(wf, context={**wf.context, **context})
        for item in current:
            promised = threading.Event()
            with self._lock:
                self._promising.append(promised)
            self._gathers.submit(self._gather, known, item, promised)

    def _gather(self, wf: Workflow, item: Expected, promised: threading.Event) -> None:
        try:
            pack_ahead(self.c, wf, item, self.packs, KEEP // 2, promised.set)
        except Exception as e:  # the step gathers its own
            self.c.reporter.info(f"gathering the context of '{item.step}' ahead failed: {e}")
        finally:
            promised.set()

    def promised_packs(self) -> Ahead:
        """The packs, once those `answered` started are promised (their keys known: a step
        asking for one then waits for it, not makes its own; a few hundredths of a second after
        the answer, long before the next step's set-up asks)."""
        with self._lock:
            waiting, self._promising = self._promising, []
        for promised in waiting:
            promised.wait()
        return self.packs

    def _start_later(self, made: Prepared, generation: int) -> None:
        """Start `made`'s container once a core has stayed idle (lookahead.idle_cores), unless
        its step begins first: on a busy machine never, on an idle one while a long gate runs."""
        before, calm = machine.cpu_times(), 0
        while calm < CALM_SAMPLES:
            if self._stop.wait(SAMPLE_SECONDS) or self.generation != generation:
                return
            after = machine.cpu_times()
            if before is None or after is None:
                return  # not measurable here: only the likeliest is started
            idle = lookahead.idle_cores(before, after, os.cpu_count() or 1)
            calm = calm + 1 if idle >= IDLE_CORES else 0
            before = after
        with self._lock:
            start, made.later = made.later, None
            if made.claimed or start is None or self.generation != generation:
                return
        ready = start()
        if ready is None:
            return
        with self._lock:
            if not made.claimed and self.generation == generation and not self._stop.is_set():
                made.warm = ready
                return
        warm.discard(ready)
        record_event(self.c, made, "discarded", "its step began before its container was ready")

    def take(
        self, wf_id: int, role: str, cli: str, base: str, creds: Credentials
    ) -> Prepared | None:
        """A preparation for exactly this run (waiting for one still being made), or None.
        Best its role's with a started container; else another role's started one (the same
        container when its fingerprint says so: `run` checks, and a wrong one is only
        discarded, as it would have gone unused: a review's, say, when the gate failed and the
        fix-up runs); else its role's without a container."""
        self._planned(self.generation - 1)
        with self._lock:
            earlier = [p for p in self._pending if p[1].base == base and p[0] < self.generation]

        def fitting(entries: list[Pending]) -> list[tuple[Pending, Prepared]]:
            found = [(entry, entry[2].result()) for entry in entries]
            return [
                (entry, made)
                for entry, made in found
                if made is not None
                and made.wf_id == wf_id
                and made.cli == cli
                and same_key(made.creds, creds)
            ]

        own = fitting([p for p in earlier if p[1].role == role])
        fits = [fit for fit in own if fit[1].warm is not None]
        if not fits:  # another role's, made with its container
            others = fitting([p for p in earlier if p[1].role != role and p[1].container])
            fits = [fit for fit in others if fit[1].warm is not None] + own
        for entry, made in fits:
            with self._lock:
                if entry not in self._pending or made.claimed:
                    continue
                self._pending.remove(entry)
                made.claimed = True
            made.role = role  # its worktree, route and container serve this step now
            return made
        return None

    def settle(self) -> None:
        """After a step ran: what was prepared for it and not taken goes, in the background
        (`settled` waits for it; `close` does)."""
        with self._lock:
            stale = [p for p in self._pending if p[0] < self.generation]
            self._pending = [p for p in self._pending if p[0] >= self.generation]
            self._discarding = [f for f in self._discarding if not f.done()]
            for _, _, future in stale:
                self._discarding.append(self._discards.submit(self._discard_unused, future))

    def _discard_surplus(self, future: Future[Prepared | None], generation: int) -> None:
        """Once the fan-out's first worker has its prompt (a removal's Docker calls beside the
        engine's move to it would lengthen the gap before it), or the pipeline stops."""
        self._until(lambda: self._prompted_in > generation)
        self._discard_unused(future, "its plan starts fewer components")

    def _discard_unused(
        self, future: Future[Prepared | None], why: str = "the next step did not use it"
    ) -> None:
        made = future.result()
        if made is not None:
            self._claim(made)
            discard(self.c, made, why)

    def settled(self) -> None:
        """Wait until what `settle` let go is gone."""
        with self._lock:
            waiting = list(self._discarding)
        for future in waiting:
            with contextlib.suppress(Exception):
                future.result()

    def _claim(self, made: Prepared) -> None:
        with self._lock:
            made.claimed = True

    def close(self) -> None:
        """Everything still prepared goes (the engine stops: done, waiting, failed, killed)."""
        self._stop.set()
        with self._turn:  # nothing waits for a prompt any more
            self._turn.notify_all()
        self._planner.shutdown(wait=True)  # no guess adds to what is pending after this
        for later in list(self._later):
            later.join()
        with self._lock:
            left, self._pending = self._pending, []
        for _, _, future in left:
            with contextlib.suppress(Exception):
                made = future.result()
                if made is not None:
                    self._claim(made)
                    discard(self.c, made, "the task stopped")
        self._pool.shutdown(wait=True)
        for later in list(self._later):  # started by a preparation finishing just now
            later.join()
        self._discards.shutdown(wait=True)
        self._gathers.shutdown(wait=True, cancel_futures=True)
        with self._lock:
            for promised in self._promising:  # cancelled before it began: nothing to wait for
                promised.set()
        self.packs.clear()


def prompted(c: StepContext) -> None:
    """The running step's worker has its prompt: what waits for that may start."""
    if isinstance(c.pipeline, Pipeline):
        c.pipeline.prompted()


def take(
    c: StepContext, wf_id: int, role: str, cli: str, base: str, creds: Credentials
) -> Prepared | None:
    """The worker step's question: anything prepared for exactly this run?"""
    pipeline = c.pipeline
    return pipeline.take(wf_id, role, cli, base, creds) if isinstance(pipeline, Pipeline) else None


def same_key(a: Credentials, b: Credentials) -> bool:
    """The same real credential (the placeholders differ by design: one per run)."""
    return a.injection == b.injection and a.home_files == b.home_files and a.source == b.source


__all__ = ["Prepared", "discard", "prepare_worker", "used"]
