"""Preparing the next worker step while the current one runs (issue 30: pipelined steps).

The engine names what the next step will need when its inputs are already known
(supervisor/workflow/lookahead.py: a role and the commit its worktree starts from); this module
makes it in a background thread: the worktree, the credentials and the proxy route, the context
pack gathered (supervisor/context/ahead.py), and for the likeliest the container started with
its CLI waiting for a prompt (supervisor/sandbox/warm.py; lookahead.plan says which). The next
worker step takes a preparation only when it wants the same role, CLI, base and key, and uses its
container only when the container is exactly the one it would have made (`warm.fingerprint` of
its own RunSpec); anything else is discarded (behind the engine, off the wait for the next
step), as is every preparation the step after it did not take. A pack that follows from the
running step's answer (a fan-out's, from the plan) is gathered once the answer is in. Nothing
of it is workflow progress: a used or discarded preparation is an event, and a crash leaves only
things named for the task (worktree `wf<id>-prep-...`, labelled container, run folder, proxy
route), which the task's clean-up on `resume` removes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from supervisor import dag
from supervisor.context.ahead import KEEP, Ahead
from supervisor.sandbox import adopt, model_paths, warm
from supervisor.sandbox.docker import RunSpec, run_dir_label
from supervisor.state.store import EventSpec
from supervisor.workflow import lookahead
from supervisor.workflow.steps import advance, machine
from supervisor.workflow.steps.pack_ahead import pack_ahead
from supervisor.workflow.steps.worker_spec import container_spec, invocation_for

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from supervisor.guard.credentials import Credentials
    from supervisor.sandbox.docker import RunResult
    from supervisor.sandbox.egress import Route
    from supervisor.sandbox.warm import Warm
    from supervisor.state.store import Workflow
    from supervisor.workflow.lookahead import Expected
    from supervisor.workflow.steps.base import StepContext

PREFIX = "prep-"
"""Prepared worktrees are `wf<id>-prep-<role>-<token>`: the task's clean-up takes them too."""


@dataclass
class Prepared:
    """What one expected worker step will need, made ahead."""

    wf_id: int
    role: str
    cli: str
    base: str
    worktree: Path
    creds: Credentials
    route: Route
    record_dir: Path
    warm: warm.Warm | None
    later: Callable[[], Warm | None] | None = None
    """Starts its container: a successor not started at once (lookahead.plan), started by the
    pipeline once cores are idle while the step before still runs."""
    claimed: bool = False
    """Taken by its step or discarded: nothing is attached to it any more."""


def prepare_worker(c: StepContext, wf: Workflow, expected: Expected) -> Prepared | None:
    """Make what `expected` will need, or None when it cannot be made ahead (a CLI that reads
    its prompt first, a role that continues sessions, an image still to build, no Docker)."""
    from supervisor.context.roles import load_role
    from supervisor.guard import credentials
    from supervisor.project import project_image
    from supervisor.routing.select import cli_for
    from supervisor.workers import adapter_for, continuation
    from supervisor.workspace.treedata import CommitFiles

    role = load_role(expected.role, c.repo)
    if continuation.enabled(c.settings, role):
        return None
    cli = cli_for(role, wf.cli, wf.context, preferred=expected.cli)
    cli_settings = c.settings.clis.get(cli)
    if cli_settings is None:
        return None
    adapter = adapter_for(cli)
    if not adapter.late_prompt_flags:
        return None
    creds = credentials.collect(cli, cli_settings)
    files = CommitFiles(c.ws.git_dir, expected.base)
    wanted = project_image.image_for(c.repo, files, c.sandbox.base_image_id())
    if wanted is not None and not project_image.exists(c.sandbox.client, wanted.tag):
        return None  # the step builds it (or asks a person first): not done ahead
    image = wanted.tag if wanted is not None else None
    token = warm.new_token()
    labels = c.labels(wf.id, expected.step)
    task = run_dir_label(labels)
    worktree = c.ws.add_worktree(f"wf{wf.id}-{PREFIX}{role.name}-{token}", expected.base)
    record_dir = warm.record_dir(labels, token)
    route: Route | None = None
    try:
        record_dir.mkdir(mode=0o700)
        route = c.sandbox.route(
            cli_settings.base_url,
            creds.injection,
            placeholder=creds.placeholder,
            vendor=model_paths.VENDOR_OF_CLI.get(cli),
            record_dir=record_dir,
            task=task,
        )
        _, invocation = invocation_for(
            c, wf, expected.step, role, cli, cli_settings, creds, route.url
        )
        spec = container_spec(
            c,
            role,
            invocation,
            cli_settings,
            creds,
            route,
            worktree,
            image,
            cli,
        )
        # What an adoption checks (sandbox/adopt.py): the base, and the route to re-attach.
        spec.labels = adopt.prepared_labels(labels, expected.base, route)
        late_flags = adapter.late_prompt_flags

        def start(shares: int = warm.BACKGROUND_SHARES) -> warm.Warm | None:
            return warm.prepare(c.sandbox, spec, expected.base, late_flags, token, shares)  # type: ignore[arg-type]

        prepared = None  # a sandbox without containers (the stand-in): worktree and route only
        containers = hasattr(c.sandbox, "finish_prepared")
        if expected.container and containers:
            prepared = start(
                warm.FOREGROUND_SHARES if expected.foreground else warm.BACKGROUND_SHARES
            )
    except BaseException:
        _undo(c, worktree, route, record_dir)
        raise
    base = expected.base
    made = Prepared(wf.id, role.name, cli, base, worktree, creds, route, record_dir, prepared)
    if containers and not expected.container:
        made.later = start
    return made


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
        _event(c, prepared, "discarded", "the step's container differs from the prepared one")
        return None
    try:
        result = warm.run(c.sandbox, ready, spec, stdin)  # type: ignore[arg-type]
    except BaseException:
        _close_step_route(c, step_id)
        raise
    if result is None:
        _event(c, prepared, "discarded", "the prepared CLI had stopped waiting")
        return None  # the route stays for the step's own run, which closes it
    _close_step_route(c, step_id)
    return result


def _close_step_route(c: StepContext, step_id: int) -> None:
    opened = c.sandbox.__dict__.get("step_routes", {}).pop(step_id, None)
    if opened is not None and hasattr(c.sandbox, "close_route"):
        c.sandbox.close_route(opened)


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
        self._pending: list[tuple[int, Expected, Future[Prepared | None]]] = []
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
        # Set once the running step's worker has its prompt: what is made for the step after
        # next waits for it, so that its container's start is no part of that wait.
        self._prompted = threading.Event()
        self._worker = False

    def ahead(self, wf: Workflow, expected: list[Expected], worker: bool = False) -> None:
        """Start preparing for the step after the one starting now: the likeliest with its
        container only, unless cores are idle (lookahead.containers). `worker`: the step
        starting now runs a worker, whose set-up is the wait for its first request; what is
        not needed at once (the step after next, an unlikely successor) waits for its prompt."""
        self._prompted.clear()
        self._worker = worker
        with self._lock:
            self.generation += 1
            generation = self.generation
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
                future = self._pool.submit(self._prepare, wf, item, generation, fixed is None)
            with self._lock:
                self._pending.append((generation, item, future))

    def _early_for(
        self, early: list[tuple[int, Expected, Future[Prepared | None]]], item: Expected
    ) -> Future[Prepared | None] | None:
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
        if made is not None and made.warm is not None and made.base != item.base:
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
        self, wf: Workflow, item: Expected, generation: int, adapt: bool
    ) -> Prepared | None:
        made = None
        if item.advance and not hasattr(self.c.sandbox, "finish_prepared"):
            return None  # made early only for its container's start-up: none here
        if item.advance or (self._worker and not item.likely):
            self._prompted.wait(PROMPT_WAIT_S)
            if self._stop.is_set():
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
        self._prompted.set()

    def answered(self, wf: Workflow, context: dict[str, Any]) -> None:
        """The running step answered with what its successors' packs follow from (a plan: the
        fan-out's targets): gathered now, while the engine records the answer, instead of in the
        next step's set-up (before the plan, only the way the step would go without it was)."""
        if not context.get("plan"):
            return
        with self._lock:
            current = [item for made, item, _ in self._pending if made == self.generation]
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
        _event(self.c, made, "discarded", "its step began before its container was ready")

    def take(
        self, wf_id: int, role: str, cli: str, base: str, creds: Credentials
    ) -> Prepared | None:
        """A preparation for exactly this run (waiting for one still being made), or None."""
        with self._lock:
            matching = [
                p
                for p in self._pending
                if p[1].role == role and p[1].base == base and p[0] < self.generation
            ]
        for entry in matching:
            made = entry[2].result()
            if made is None or made.wf_id != wf_id or made.cli != cli:
                continue
            if not same_key(made.creds, creds):
                continue
            with self._lock:
                if entry not in self._pending:
                    continue
                self._pending.remove(entry)
                made.claimed = True
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

    def _discard_unused(self, future: Future[Prepared | None]) -> None:
        made = future.result()
        if made is not None:
            self._claim(made)
            discard(self.c, made, "the next step did not use it")

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
        self._prompted.set()  # nothing waits for a prompt any more
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


def discard(c: StepContext, made: Prepared, why: str) -> None:
    started = made.warm is not None
    if made.warm is not None:
        warm.discard(made.warm)
        made.warm = None
    _undo(c, made.worktree, made.route, made.record_dir)
    _event(c, made, "discarded", why, container=started)


def used(c: StepContext, made: Prepared, step: str, step_id: int) -> None:
    """The step took the preparation: its route is the step's, closed with its run as any
    step's (adopt.run)."""
    routes: dict[int, Route] = c.sandbox.__dict__.setdefault("step_routes", {})
    routes[step_id] = made.route
    c.store.add_event(
        made.wf_id,
        EventSpec(
            "prepared_run_used",
            step=step,
            role=made.role,
            payload={"cli": made.cli, "base": made.base, "container": made.warm is not None},
        ),
    )


def _event(c: StepContext, made: Prepared, what: str, why: str, container: bool = True) -> None:
    """`container`: whether a started container (a CLI's start-up) went with it."""
    with contextlib.suppress(Exception):  # an event never fails the step
        c.store.add_event(
            made.wf_id,
            EventSpec(
                f"prepared_run_{what}",
                role=made.role,
                payload={"cli": made.cli, "base": made.base, "reason": why, "container": container},
            ),
        )


def _undo(c: StepContext, worktree: Path, route: Route | None, record_dir: Path) -> None:
    import shutil

    if route is not None and hasattr(c.sandbox, "close_route"):
        with contextlib.suppress(Exception):
            c.sandbox.close_route(route)
    with contextlib.suppress(Exception):
        c.ws.remove_worktree(worktree)
    shutil.rmtree(record_dir, ignore_errors=True)
