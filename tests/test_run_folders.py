"""Run folders (prompt, output schema, login files) are private to the run, and never outlive it.

On the real engine: the container's user owns its run folder and worktree rather than the world
being given access, and a crashed run's folder is removed by the next start.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from e2e_support import IMAGE, require_sandbox

from supervisor.sandbox.docker import (
    LABEL_REPO,
    RUN_PREFIX,
    DockerSandbox,
    RunSpec,
    remove_stale_run_dirs,
)

if TYPE_CHECKING:
    from collections.abc import Iterator

pytestmark = pytest.mark.docker


@pytest.fixture
def sandbox() -> Iterator[DockerSandbox]:
    require_sandbox()
    box = DockerSandbox(IMAGE, "supervisor-egress-test")
    yield box
    box.close()


def run_dirs(label: str) -> list[Path]:
    return sorted(Path(tempfile.gettempdir()).glob(f"{RUN_PREFIX}{label}-*"))


def test_the_run_folder_is_private_to_the_container_user_and_removed_after_the_run(
    sandbox: DockerSandbox, tmp_path: Path
) -> None:
    label = f"test{os.getpid()}"
    seen: list[Path] = []

    def on_start(container_id: str) -> None:
        seen.extend(run_dirs(label))

    result = sandbox.run(
        RunSpec(
            argv=["sh", "-c", "stat -c '%a %u %n' /run/supervisor /run/supervisor/stdin; id -u"],
            worktree=tmp_path,
            stdin_text="the prompt",
            home_files={".claude/.credentials.json": b'{"token": "t"}'},
            labels={LABEL_REPO: label},
            on_start=on_start,
        )
    )
    lines = result.stdout.split("\n")
    uid = lines[2].strip()
    assert lines[0].split()[:2] == ["700", uid]
    assert lines[1].split()[:2] == ["600", uid]
    assert len(seen) == 1  # named after the repository, so a crash's leftovers can be found
    assert run_dirs(label) == []
    if os.getuid() == 0:  # worker as nobody: it owns its worktree, nobody else may write it
        mode = tmp_path.stat()
        assert mode.st_uid == 65534
        assert not mode.st_mode & stat.S_IWOTH


def test_run_folders_left_by_a_crash_are_removed_by_the_next_start(
    sandbox: DockerSandbox, tmp_path: Path
) -> None:
    label = f"crash{os.getpid()}"
    mine = Path(tempfile.mkdtemp(prefix=f"{RUN_PREFIX}{label}-"))
    (mine / "stdin").write_text("a prompt from a killed run")
    other = Path(tempfile.mkdtemp(prefix=f"{RUN_PREFIX}other{os.getpid()}-"))
    try:
        sandbox.remove_stale({LABEL_REPO: label})
        assert not mine.exists()
        assert other.exists()  # another repository's run is not ours to remove
    finally:
        remove_stale_run_dirs(f"other{os.getpid()}")
    assert not other.exists()
