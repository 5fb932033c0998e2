"""A preparation made for the step after next, brought to the commit that step starts from.

While a step that commits runs, the worker step after its gate is prepared from the commit the
running step started from (workflow/lookahead.py `beyond`): its container started, its CLI
started up and waiting for a prompt, its workspace a mounted copy-on-write view. Once the
running step's result is the candidate, the difference is written into that running container's
workspace (workspace/overlay_advance.py) while the gate runs, and the preparation stands for the
candidate from then on: `take` and the fingerprint check see it as if it had been made there.
Anything that does not advance exactly is discarded, and a fresh preparation is made, as before.

Its container keeps the label of the commit it was made from; the advance is recorded in the
state (`prepared_run_advanced`, with the container) before any step can take it, and a `resume`
after a crash adopts the container by that record (sandbox/adopt.py `advanced`).
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from supervisor.sandbox.docker import WORKSPACE
from supervisor.state.store import EventSpec
from supervisor.workspace import overlay, overlay_advance

if TYPE_CHECKING:
    from supervisor.workflow.steps.base import StepContext
    from supervisor.workflow.steps.preparation import Prepared


class ArchiveRefused(RuntimeError):
    """The container engine did not unpack the archive into the workspace."""


def advance(c: StepContext, made: Prepared, commit: str) -> bool:
    """Bring `made` (unclaimed, its container waiting) to `commit`; False when it cannot be
    brought exactly, and then it is the caller's to discard."""
    if made.base == commit:  # the running step changed nothing: made for this commit already
        return True
    ready = made.warm
    view = overlay.view_for(made.worktree)
    if ready is None or ready.spec is None or view is None:
        return False
    container = ready.container

    def put(data: bytes) -> None:
        if not container.put_archive(WORKSPACE, data):
            raise ArchiveRefused(f"the archive for {commit[:12]} was refused")

    try:
        done = overlay_advance.advance(c.ws.git_dir, view, commit, put)
    except Exception:  # a preparation never fails a step: the step makes its own
        done = False
    if not done:
        return False
    before, made.base = made.base, commit
    ready.rebased(commit)
    with contextlib.suppress(Exception):  # an event never fails the step
        c.store.add_event(
            made.wf_id,
            EventSpec(
                "prepared_run_advanced",
                role=made.role,
                # The container too: a `resume` adopting it reads its base from here
                # (sandbox/adopt.py `advanced`), its label still says `before`.
                payload={
                    "cli": made.cli,
                    "from": before,
                    "to": commit,
                    "container": str(container.id),
                },
            ),
        )
    return True
