"""Attacks on the host through the TUI's resume (`r`, or "yes" after a decision): the repository is
someone else's project, and the resume runs in it. Its own `supervisor` package must not be what
runs, and a symlink planted at the resume's log must not carry the output into another file.

The real `supervisor resume` is started, as the TUI starts it; the markers the attacks would
create live outside the repository, so they only appear if the host ran the repository's code or
wrote through its link.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

import pytest
from test_tui import git, make_repo, opened, tui

from supervisor.core.errors import StateError
from supervisor.tui.resume import log_path, start

if TYPE_CHECKING:
    from pathlib import Path


def test_a_supervisor_package_in_the_repository_is_not_what_the_resume_runs(
    tmp_path: Path,
) -> None:
    root, wf_id = make_repo(tmp_path / "repo")
    marker = tmp_path / "ran-the-repository's-code"
    package = root / "supervisor"
    package.mkdir()
    planted = f"open({str(marker)!r}, 'w').write('pwned')\n"
    (package / "__init__.py").write_text(planted)
    (package / "__main__.py").write_text(planted)
    git(root, "add", "-A")
    git(root, "commit", "-qm", "a package named like the tool")

    async def scenario() -> int | None:
        app = tui(root)
        async with opened(app) as pilot:
            await pilot.press("o", "a", "y")
            started = app.resuming[wf_id]
            deadline = time.monotonic() + 120
            while started.ended() is None and time.monotonic() < deadline:
                await pilot.pause(0.2)
            return started.ended()

    code = asyncio.run(scenario())
    assert code is not None
    assert not marker.exists()
    said = log_path(root / ".supervisor", wf_id).read_text()
    assert "pwned" not in said and said.strip()  # our CLI spoke, whatever it had to say


def test_a_symlink_planted_at_the_resume_log_is_refused_and_its_target_untouched(
    tmp_path: Path,
) -> None:
    root, wf_id = make_repo(tmp_path / "repo")
    target = tmp_path / "victim.txt"
    target.write_text("keep me\n")
    log_path(root / ".supervisor", wf_id).symlink_to(target)

    with pytest.raises(StateError) as refused:
        start(root, root / ".supervisor", wf_id)

    assert "Cannot write the resume's log" in refused.value.message
    assert refused.value.hint and "plain file" in refused.value.hint
    assert target.read_text() == "keep me\n"
