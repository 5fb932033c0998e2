"""One of several processes writing to the same state database at once (tests/test_state_shared.py).

    python tests/state_writer.py DB_PATH URL WORKFLOW_ID WRITER ROUNDS APPROVAL_ID VOTES_NEEDED

Each round starts a step, then records it and moves the workflow on in one transition with an
event naming (writer, round); at the end the writer votes once on the shared approval.
"""

from __future__ import annotations

import sys
from pathlib import Path

from supervisor.state.records import StepRecord
from supervisor.state.store import EventSpec, Store


def main() -> None:
    db, url, wf, writer, rounds, approval, needed = sys.argv[1:8]
    wf_id, n = int(wf), int(rounds)
    with Store(Path(db), url=url) as store:
        for i in range(n):
            name = f"w{writer}"
            step_id = store.start_step(wf_id, name, i + 1, "implementer", None)
            done = EventSpec("step_succeeded", step=name, payload={"writer": writer, "round": i})
            store.transition(
                wf_id,
                step=name,
                next_step=name,
                context={"last": [writer, i]},
                records=[StepRecord(step_id, "succeeded", {"round": i}, None, done, None)],
                events=[EventSpec("tick", step=name, payload={"writer": writer, "round": i})],
            )
        store.vote_approval(int(approval), f"{name}@example.com", int(needed))


if __name__ == "__main__":
    main()
