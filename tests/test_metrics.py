"""`supervisor metrics` judges a run by what became of its work (issue 59): a worker that exited
cleanly and whose candidate then failed its gate did not succeed, whether the gate sent the work
back for another try or the task failed there with its retries spent. Real git, a real SQLite
state written by `Store` as the engine writes it, the real command line."""

from __future__ import annotations

import json
import subprocess
from typing import TYPE_CHECKING

from cli_support import supervisor
from routing_support import record_run

from supervisor.state.records import EventSpec
from supervisor.state.store import Store

if TYPE_CHECKING:
    from pathlib import Path

PIPELINE = {
    "initial_step": "implement",
    "steps": {
        "implement": {"role": "implementer", "next": "test"},
        "test": {"gate": "test", "next": "commit", "on_fail": "implement", "max_retries": 1},
        "commit": {"action": "commit"},
    },
}


def repo_with_four_implementer_runs(tmp_path: Path) -> Path:
    """Four clean implementer exits: two candidates passed their gate; one failed it and was
    sent back (a `retry` event at `implement`); one failed it with no retry left, so the task
    failed at the gate (a `workflow_failed` event at `test`)."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "init"], check=True)
    with Store(repo / ".supervisor" / "state.db") as store:
        for fate in ("passed", "passed", "sent back", "failed the task"):
            wf = store.create_workflow(
                description=f"candidate {fate}",
                cli="claude",
                base_branch="main",
                base_sha="0" * 40,
                branch_for_id=lambda i: f"ai/{i}-candidate",
                definition=PIPELINE,
                first_step="implement",
            )
            record_run(
                store,
                role="implementer",
                cli="claude",
                task_type="implementation",
                step="implement",
                workflow_id=wf.id,
                sent_back=fate == "sent back",
            )
            gate = "failed" if fate != "passed" else "passed"
            store.add_event(wf.id, EventSpec("gate", step="test", status=gate))
            if fate == "failed the task":
                error = {"error": "Step 'test' failed 2 times (limit 1)"}
                store.add_event(
                    wf.id, EventSpec("workflow_failed", step="test", status="failed", payload=error)
                )
    return repo


def test_a_run_whose_candidate_failed_its_gate_counts_as_a_failure(tmp_path: Path) -> None:
    repo = repo_with_four_implementer_runs(tmp_path)
    data = json.loads(supervisor("metrics", "--json", "--repo", str(repo)).stdout)
    implementer = next(r for r in data["by_role"] if r["role"] == "implementer")
    assert (implementer["runs"], implementer["success_rate"]) == (4, 0.5)
    by_task = data["cli_by_task_type"]["claude"]["implementation"]
    assert (by_task["runs"], by_task["success_rate"]) == (4, 0.5)
    shown = supervisor("metrics", "--repo", str(repo))
    assert shown.returncode == 0, shown.stderr
    row = next(line for line in shown.stdout.splitlines() if line.lstrip("│ ").startswith("impl"))
    assert "50%" in row and "100%" not in row, shown.stdout
