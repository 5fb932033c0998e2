"""The Docker engine lost under a running container: stopped, restarted, its socket gone.

Why: the engine runs the containers, so a restart (an upgrade, `systemctl restart docker`, a
crash) ends the running ones with it (live-restore aside), and the Docker SDK raises a bare
connection error out of whichever request it was making. Read as it comes, that is a worker's
failure spending a retry, or a traceback. The sandbox notices it at once instead (a container's
wait is one open request, which the engine's end closes), waits for the engine with a bounded
back-off that says so on every try (`wait_for_engine`), and then re-runs only what was lost:

- a container the engine kept running (live-restore) is waited for again, and one that had
  exited cleanly is read as any finished run: its answer is not bought again;
- a gate's run (any run not kept for adoption) runs again in a new container;
- a worker's raises `RunLost`: its step runs afresh in a new worktree (the dead worker's half-
  written changes are not built on), spending no retry, as an adopted worker that did not
  finish does (adopt.AdoptionLost). Its CLI died mid-conversation, so what the model had
  answered so far is bought again: the proxy's record of a conversation cut short is no answer.

An engine that stays away past the wait (`SUPERVISOR_DOCKER_WAIT_S`, default 120 s) is a
`DockerUnavailableError` (supervisor/core/host_faults.py): the workflow engine fails the task with
it, resumable, its runs left as a crash leaves them for `resume` to adopt or re-run.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from supervisor.core import host_faults
from supervisor.core.errors import DockerUnavailableError, SupervisorError

if TYPE_CHECKING:
    from collections.abc import Callable


class Spec(Protocol):
    """What of a run's RunSpec (sandbox/docker.py, which imports this module) is read here."""

    argv: list[str]
    labels: dict[str, str]
    keep: bool


S = TypeVar("S", bound=Spec)
R = TypeVar("R")

WAIT_ENV = "SUPERVISOR_DOCKER_WAIT_S"
DEFAULT_WAIT_S = 120.0
"""Long enough for a restart of the engine (seconds) or a package upgrade's; a person whose
engine is down for good hears it within two minutes, with the fix."""
FIRST_DELAY_S = 1.0
MAX_DELAY_S = 15.0
RERUNS = 3
"""How many times one gate's run starts again after successive losses of the engine."""
PING_S = 5.0
"""How long one try waits for the engine's answer to a ping."""


class RunLost(SupervisorError):
    """A worker's container died with the Docker engine (or was never made while it was away);
    the engine is back. Its step counts as interrupted and runs afresh (steps/worker.py). Only
    a gate's run lost RERUNS times over reaches a person, the engine going down again and
    again."""

    default_hint = (
        "Check that the Docker engine stays up (`docker info`, its log), then `supervisor "
        "resume` the task: the step runs again."
    )


def wait_bound() -> float:
    """The longest wait for the engine, in seconds (`SUPERVISOR_DOCKER_WAIT_S`)."""
    text = os.environ.get(WAIT_ENV, "").strip()
    try:
        return max(0.0, float(text)) if text else DEFAULT_WAIT_S
    except ValueError:
        return DEFAULT_WAIT_S


def delays(total: float) -> list[float]:
    """The back-off: 1, 2, 4, 8, 15, 15... seconds, the last cut so that they add up to
    `total`."""
    out: list[float] = []
    delay, left = FIRST_DELAY_S, total
    while left > 1e-9:
        step = min(delay, left, MAX_DELAY_S)
        out.append(step)
        left -= step
        delay *= 2
    return out


def say_on_stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def lost(error: BaseException) -> bool:
    """Whether `error` is the engine gone from under a request, not yet waited for."""
    return host_faults.is_engine_lost(error) and not isinstance(error, DockerUnavailableError)


def gave_up(error: BaseException) -> bool:
    """Whether `error` is the engine still away past the wait (its runs left for `resume`)."""
    return isinstance(error, DockerUnavailableError)


def answers(client: Any) -> bool:
    """Whether the engine answers a ping now."""
    return _ping(client) is None


def _ping(client: Any) -> Exception | None:
    """None when the engine answers a ping within PING_S, else why not. The SDK's own `ping`
    waits as long as the client's timeout (minutes, for builds): an engine that accepts but
    does not answer yet (starting) must not hold the wait past its bound."""
    api = getattr(client, "api", client)
    try:
        api._raise_for_status(api._get(api._url("/_ping"), timeout=PING_S))
    except Exception as e:  # whatever the SDK raises (refused, reset, an error status): not yet
        return e
    return None


_ONE_WAIT = threading.Lock()
"""Runs in parallel (a fan-out's components, a prepared container) lose the engine together:
one of them waits and says so, the others wait for that wait."""


def wait_for_engine(
    client: Any, say: Callable[[str], None], cause: BaseException | None = None
) -> None:
    """Wait for the engine to answer again, a line said before each try; past the bound,
    DockerUnavailableError (its fix and the task's `resume` added by whoever knows the task)."""
    if not _ONE_WAIT.acquire(blocking=False):
        with _ONE_WAIT:  # another run's wait, said once
            pass
        last = _ping(client)
        if last is not None:
            raise host_faults.docker_unavailable(last, None, waited_s=sum(delays(wait_bound())))
        return
    try:
        _wait(client, say, cause)
    finally:
        _ONE_WAIT.release()


def _wait(client: Any, say: Callable[[str], None], cause: BaseException | None) -> None:
    plan = delays(wait_bound())
    where = host_faults.engine_address()
    last: BaseException | None = cause
    for k, delay in enumerate(plan, 1):
        say(f"Docker engine unreachable at {where}; retrying in {delay:g}s ({k} of {len(plan)})…")
        time.sleep(delay)
        last = _ping(client)
        if last is None:
            say(f"Docker engine at {where} answers again; re-running what it lost.")
            return
    raise host_faults.docker_unavailable(last or "no answer", None, waited_s=sum(plan))


def rerunning(run_once: Callable[[S], R], spec: S, client: Any, say: Callable[[str], None]) -> R:
    """`run_once(spec)`, run again (a gate's) or said lost (a worker's, `RunLost`) when the
    engine went away under it and came back."""
    for attempt in range(RERUNS + 1):
        try:
            return run_once(spec)
        except RunLost:
            if spec.keep or attempt == RERUNS:
                raise
        except Exception as e:
            if not lost(e):
                raise
            wait_for_engine(client, say, e)
            if spec.keep or attempt == RERUNS:
                raise RunLost(f"The worker's run was lost with the Docker engine: {e}") from e
    raise AssertionError("unreachable: the last attempt returns or raises")


def after_loss(container: Any, say: Callable[[str], None], cause: BaseException) -> str:
    """Once the engine answers again (or DockerUnavailableError), what became of `container`:
    "running" (the engine kept it: wait on), "finished" (it exited cleanly before the loss:
    read it), or "lost" (ended by the restart, or gone)."""
    wait_for_engine(container.client, say, cause)
    try:
        container.reload()
    except Exception as e:  # NotFound, or the engine gone again
        if lost(e):
            raise
        return "lost"
    state = container.attrs.get("State") or {}
    if state.get("Running"):
        return "running"
    if state.get("Status") == "exited" and state.get("ExitCode") == 0:
        return "finished"
    return "lost"


def lost_run(spec: Spec, cause: BaseException) -> RunLost:
    what = spec.labels.get("supervisor.step") or " ".join(spec.argv[:2])
    return RunLost(f"The container of '{what}' died with the Docker engine ({cause}).")
