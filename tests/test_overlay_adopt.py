"""A copy-on-write view (supervisor/workspace/overlay.py) outlives the supervisor that made it: a
resume
rebuilds it from what its worker's container labels name (the step's commit and its base's) and
reads the worker's changes as the dead process would have, keeps the base while the view uses it
and leaves nothing behind afterwards. Host side only (real git, a real killed process); the
adoption through the real sandbox is in test_adopt_e2e.py."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from supervisor.workspace import overlay
from supervisor.workspace.worktrees import Workspace, wait_for_deletions


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
        check=True,
        capture_output=True,
        text=True,
    ).stdout


@pytest.fixture
def repo(tmp_path: Path) -> tuple[Path, str, str]:
    """A repository with two commits: the second deletes a directory and changes a file."""
    root = tmp_path / "repo"
    (root / "pkg" / "old").mkdir(parents=True)
    git(root, "init", "-q")
    for i in range(20):
        (root / "pkg" / f"m{i}.py").write_text(f"x = {i}\n")
    (root / "pkg" / "old" / "gone.py").write_text("gone\n")
    (root / "docs").mkdir()
    (root / "docs" / "a.md").write_text("a\n")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "one")
    first = git(root, "rev-parse", "HEAD").strip()
    git(root, "rm", "-rq", "pkg/old")
    (root / "pkg" / "m1.py").write_text("x = 'one'\n")
    git(root, "commit", "-qam", "two")
    return root, first, git(root, "rev-parse", "HEAD").strip()


KILLED_RUN = """
import os, sys
from pathlib import Path
from supervisor.workspace.worktrees import Workspace
repo, first, second = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
ws = Workspace(repo)
ws.use_overlay(owner="wf3")
earlier = ws.add_worktree("wf3-plan-planner-1", first)   # makes the base of `first`
view = ws.add_worktree("wf3-implement-implementer-1", second)  # seeded over it
ws.remove_worktree(earlier)
print(view, flush=True)
os._exit(0)  # killed: no clean-up of any kind
"""


def killed_run(repo: Path, first: str, second: str) -> Path:
    """A supervisor process that made a view of `second` over the base of `first`, then died."""
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(KILLED_RUN), str(repo), first, second],
        check=True,
        capture_output=True,
        text=True,
        cwd=Path(__file__).parent.parent,
    ).stdout
    return Path(out.strip())


def work_as_the_worker(upper: Path) -> None:
    """What a worker leaves in its upper layer through the mount: a changed file, a new one,
    and names the host uses for its own folders, planted as symlinks (inside the repository)."""
    (upper / "pkg" / "m2.py").write_text("x = 'changed'\n")
    (upper / "new.py").write_text("new = 1\n")
    (upper / "upper").symlink_to("docs")
    (upper / "dot-git").symlink_to("pkg/m3.py")
    (upper / "work").mkdir()
    (upper / "work" / "odd,name:\n").write_text("odd\n")


def test_a_resume_reads_a_killed_run_s_view_exactly_and_then_leaves_no_base_behind(
    repo: tuple[Path, str, str],
) -> None:
    root, first, second = repo
    view = killed_run(root, first, second)
    work_as_the_worker(view / "upper")
    bases = root / ".supervisor" / "bases" / "wf3"
    assert [p.name for p in bases.iterdir()] == [first]

    ws = Workspace(root)
    ws.use_overlay(owner="wf3", enabled=False)
    assert ws.overlays is not None
    assert ws.overlays.adopt(view, second, first)
    ws.remove_stale_worktrees(prefix="wf3-", keep=frozenset({view.name}))  # what resume does
    assert (bases / first / "pkg" / "m0.py").is_file()  # the adopted view's base stays

    sha = ws.snapshot(view, "adopted")
    assert sha is not None
    assert git(root, "rev-parse", f"{sha}^") == f"{second}\n"
    changed = git(root, "diff", "--name-status", "--no-renames", second, sha).split("\n")
    assert sorted(filter(None, changed)) == [
        'A\t"work/odd,name:\\n"',
        "A\tdot-git",
        "A\tnew.py",
        "A\tupper",
        "M\tpkg/m2.py",
    ]
    # recorded as links, never followed; the seeded commit (m1 changed, pkg/old gone) intact
    assert git(root, "ls-tree", sha, "upper", "dot-git").split()[0::4] == ["120000", "120000"]
    assert git(root, "show", f"{sha}:pkg/m1.py") == "x = 'one'\n"
    assert git(root, "ls-tree", "-r", "--name-only", sha, "pkg/old") == ""

    ws.remove_worktree(view)
    ws.overlays.close()  # the end of the resumed run
    wait_for_deletions()
    assert not (root / ".supervisor" / "bases").exists()
    assert git(root, "status", "--porcelain") == ""


@pytest.mark.parametrize("where", ["upper", "dot-git", "base"])
def test_a_view_whose_host_folders_are_not_as_the_host_left_them_is_not_adopted(
    repo: tuple[Path, str, str], tmp_path: Path, where: str
) -> None:
    root, first, second = repo
    view = killed_run(root, first, second)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "keep.txt").write_text("keep\n")
    target = root / ".supervisor" / "bases" / "wf3" / first if where == "base" else view / where
    target.rename(tmp_path / "moved")
    target.symlink_to(elsewhere)  # the same name, a link: never followed

    ws = Workspace(root)
    ws.use_overlay(owner="wf3", enabled=False)
    assert ws.overlays is not None
    assert not ws.overlays.adopt(view, second, first)
    assert overlay.view_for(view) is None  # the step runs again
    ws.remove_stale_worktrees(prefix="wf3-")
    wait_for_deletions()
    assert (elsewhere / "keep.txt").read_text() == "keep\n"
    assert not (root / ".supervisor" / "bases").exists()


def test_another_task_s_start_leaves_a_killed_task_s_bases_for_its_resume(
    repo: tuple[Path, str, str],
) -> None:
    root, first, second = repo
    killed_run(root, first, second)
    Workspace(root).remove_stale_worktrees(prefix="wf4-")  # task 4 starts meanwhile
    assert (root / ".supervisor" / "bases" / "wf3" / first).is_dir()
    Workspace(root).remove_stale_worktrees(prefix="wf3-")  # task 3 resumes, nothing adopted
    wait_for_deletions()
    assert not (root / ".supervisor" / "bases").exists()
