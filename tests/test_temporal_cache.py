"""A `supervisor worker` reads the repository's configuration once, not at every step, yet an
edited configuration takes effect at the next step, as a new `supervisor resume` would."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from supervisor.lifecycle.demo import make_demo_repo, write_project_config
from supervisor.temporal.cache import ProjectCache

if TYPE_CHECKING:
    from pathlib import Path


def test_a_worker_keeps_the_settings_until_the_config_file_changes(
    tmp_path: Path, api_keys: None
) -> None:
    repo = make_demo_repo(tmp_path / "repo")
    write_project_config(repo, "http://127.0.0.1:9")
    cache = ProjectCache()

    first, notifier = cache.open(repo)
    again, _ = cache.open(repo)
    assert again.settings is first.settings  # not read again
    assert again.workspace is not first.workspace  # each step its own (overlay views)

    config = repo / ".supervisor" / "config.yaml"
    config.write_text(config.read_text() + "limits: {max_files_added: 7}\n")
    os.utime(config, ns=(0, 0))  # a new fingerprint even within the clock's resolution
    edited, _ = cache.open(repo)
    assert edited.settings is not first.settings
    assert edited.settings.limits.max_files_added == 7
    assert notifier.events == list(first.settings.notifications.events)


def test_a_worker_skips_the_clean_up_only_when_nothing_ran_of_the_task_since_its_own_step(
    tmp_path: Path,
) -> None:
    """A worker's next step of a task finds nothing to clean up when the task is as its own
    last step left it; a step started anywhere else since (another host, a killed attempt)
    or any change of the task's row changes the mark, and the clean-up runs as `resume`'s."""
    from supervisor.lifecycle.tasks import Kept, _mark
    from supervisor.state.store import Store

    with Store(tmp_path / "state.db") as store:
        wf = store.create_workflow(
            description="Shapes",
            cli="claude",
            base_branch="main",
            base_sha="a" * 40,
            branch_for_id=lambda i: f"ai/{i}-shapes",
            definition={"initial_step": "implement", "steps": {}},
            first_step="implement",
        )
        left = _mark(store, wf.id)
        assert _mark(store, wf.id) == left  # read again: the same

        store.start_step(wf.id, "implement", 2, "implementer", "/tmp/elsewhere")
        assert _mark(store, wf.id) != left  # another host's step: clean up before this one

        after = _mark(store, wf.id)
        store.interrupt_running_steps(wf.id)
        assert _mark(store, wf.id) != after  # its step's status moved

    kept = Kept(mark=left)
    kept.close()  # a step that failed, or a task that left the worker: nothing kept
    assert kept.sandbox is None and kept.mark is None
