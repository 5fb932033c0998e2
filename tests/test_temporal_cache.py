"""A `supervisor worker` reads the repository's configuration once, not at every step, yet an
edited configuration takes effect at the next step, as a new `supervisor resume` would."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from supervisor.demo import make_demo_repo, write_project_config
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
