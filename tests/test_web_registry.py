"""The user's registry of repositories (supervisor/state/registry.py): every repository a task was
created in, for `supervisor web` to list, kept in the user's own directory.

It is a memory, never a condition: writing it never stops a task, a file that is not its own reads
as empty, and only repositories whose state database still exists are listed.
"""

from __future__ import annotations

import errno
import json
import multiprocessing
import os
import stat
from typing import TYPE_CHECKING

import pytest

from supervisor.lifecycle import starting
from supervisor.lifecycle.demo import make_demo_repo
from supervisor.lifecycle.opening import open_project, task_definition
from supervisor.state import registry

if TYPE_CHECKING:
    from pathlib import Path


@pytest.fixture(autouse=True)
def own_registry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    user = tmp_path / "user"
    monkeypatch.setenv("SUPERVISOR_USER_DIR", str(user))
    return user


def with_state(path: Path) -> Path:
    """A folder that looks like a repository with tasks: its state database exists."""
    (path / ".supervisor").mkdir(parents=True)
    (path / ".supervisor" / "state.db").touch()
    return path


def test_a_repository_a_task_is_created_in_is_remembered(tmp_path: Path) -> None:
    repo = make_demo_repo(tmp_path / "repo")
    project = open_project(repo)
    definition, _ = task_definition(project, None, True)
    task = starting.Prepared(project, "Add multiply", definition, [], [], True)
    with project.store() as store:
        starting.create(task, store)
    assert registry.repositories() == [repo.resolve()]


def test_the_most_recent_comes_first_and_each_repository_once(tmp_path: Path) -> None:
    a, b, c = (with_state(tmp_path / name) for name in "abc")
    for repo in (a, b, c, a, a / "." / "..", b):  # the parent of `a` has no state: not listed
        registry.remember(repo)
    assert registry.repositories() == [b, a, c]


def test_a_path_is_remembered_as_its_resolved_root(tmp_path: Path) -> None:
    repo = with_state(tmp_path / "repo")
    (tmp_path / "link").symlink_to(repo)
    registry.remember(tmp_path / "link")
    registry.remember(repo / "." / ".." / "repo")
    assert registry.repositories() == [repo.resolve()]


def test_the_list_keeps_the_newest_entries_up_to_its_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(registry, "LIMIT", 3)
    repos = [with_state(tmp_path / f"r{i}") for i in range(5)]
    for repo in repos:
        registry.remember(repo)
    assert registry.repositories() == [repos[4], repos[3], repos[2]]
    written = json.loads(registry.registry_file().read_text())
    assert len(written["repositories"]) == 3


def test_a_repository_whose_state_database_is_gone_is_not_listed(tmp_path: Path) -> None:
    kept, gone = with_state(tmp_path / "kept"), with_state(tmp_path / "gone")
    registry.remember(kept)
    registry.remember(gone)
    (gone / ".supervisor" / "state.db").unlink()
    assert registry.repositories() == [kept]


@pytest.mark.parametrize(
    "content",
    [
        b"not json {",
        b"[1, 2, 3]",
        b'{"version": 1, "repositories": "/etc"}',
        b'{"version": 2, "repositories": ["/somewhere"]}',
        b"[" * 100_000 + b"]" * 100_000,
        b'{"version": 1, "repositories": ["' + b"a" * 2_000_000 + b'"]}',
        b"\xff\xfe\x00garbage",
    ],
    ids=["not-json", "wrong-shape", "not-a-list", "unknown-version", "deep", "huge", "binary"],
)
def test_a_file_it_did_not_write_reads_as_empty_and_is_replaced(
    tmp_path: Path, own_registry: Path, content: bytes
) -> None:
    own_registry.mkdir()
    registry.registry_file().write_bytes(content)
    assert registry.repositories() == []
    repo = with_state(tmp_path / "repo")
    registry.remember(repo)
    assert registry.repositories() == [repo]


def test_items_that_are_not_absolute_paths_are_ignored(tmp_path: Path, own_registry: Path) -> None:
    repo = with_state(tmp_path / "repo")
    own_registry.mkdir()
    items = [str(repo), 7, None, {"a": 1}, "relative/path", f"{repo}\nx", ""]
    registry.registry_file().write_text(json.dumps({"version": 1, "repositories": items}))
    assert registry.repositories() == [repo]


def _remember_many(root: str, worker: int) -> None:
    from pathlib import Path

    for i in range(10):
        registry.remember(Path(root) / f"w{worker}-{i}")


def test_writers_at_the_same_time_lose_nothing(tmp_path: Path) -> None:
    workers = 6
    for w in range(workers):
        for i in range(10):
            with_state(tmp_path / f"w{w}-{i}")
    context = multiprocessing.get_context("spawn")  # the environment (SUPERVISOR_USER_DIR) is kept
    processes = [
        context.Process(target=_remember_many, args=(str(tmp_path), w)) for w in range(workers)
    ]
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout=120)
        assert process.exitcode == 0
    listed = set(registry.repositories())
    assert listed == {tmp_path / f"w{w}-{i}" for w in range(workers) for i in range(10)}


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes through permissions")
def test_a_home_that_cannot_be_written_does_not_raise(tmp_path: Path, own_registry: Path) -> None:
    own_registry.mkdir()
    own_registry.chmod(stat.S_IRUSR | stat.S_IXUSR)
    try:
        registry.remember(with_state(tmp_path / "repo"))
        assert registry.repositories() == []
    finally:
        own_registry.chmod(stat.S_IRWXU)


def test_a_home_that_is_a_file_does_not_raise(tmp_path: Path, own_registry: Path) -> None:
    own_registry.write_text("not a directory")
    registry.remember(with_state(tmp_path / "repo"))
    assert registry.repositories() == []


def test_a_full_disk_does_not_raise_and_keeps_the_list_it_had(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kept = with_state(tmp_path / "kept")
    registry.remember(kept)

    def full(path: Path, roots: list[str]) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(registry, "_write", full)
    registry.remember(with_state(tmp_path / "new"))
    assert registry.repositories() == [kept]
