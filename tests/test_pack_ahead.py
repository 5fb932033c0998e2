"""Context packs gathered ahead (supervisor/context/ahead.py), through the real Repomix and real
git: a pack gathered while the step before ran is the very pack the step would have made, for
any prompt around it, and is used only for exactly the inputs it was gathered from. Compiled
templates are reused only for the very source they were compiled from."""

from __future__ import annotations

import subprocess
import threading
from typing import TYPE_CHECKING

import pytest

from supervisor.context import prompts
from supervisor.context.ahead import Ahead, key
from supervisor.context.assemble import DirFiles, Pack, build_pack, strategy_for
from supervisor.context.roles import Role, RoleContext, load_role
from supervisor.guard.trust import trust
from supervisor.workspace.treedata import CommitFiles

if TYPE_CHECKING:
    from pathlib import Path

TARGETS = ["app/main.py"]
DIFF = "+x = 1\n"


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
        check=True,
        capture_output=True,
        text=True,
    )
    return done.stdout.strip()


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SUPERVISOR_USER_DIR", str(tmp_path / "user"))
    root = tmp_path / "repo"
    (root / "app").mkdir(parents=True)
    (root / "tests").mkdir()
    (root / "app" / "main.py").write_text("from app.util import helper\n\nprint(helper())\n")
    (root / "app" / "util.py").write_text("def helper():\n    return 42\n" * 20)
    (root / "tests" / "test_main.py").write_text("def test_main():\n    assert True\n" * 10)
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "init")
    return root


def role(budget: int = 50_000) -> Role:
    return Role(
        name="implementer",
        output="implementation",
        template="implement.j2",
        context=RoleContext(token_budget=budget),
    )


def files(repo: Path, rev: str = "HEAD") -> CommitFiles:
    return CommitFiles(repo / ".git", git(repo, "rev-parse", rev))


def gathered(repo: Path, the_role: Role, rev: str = "HEAD") -> Ahead:
    ahead = Ahead()
    source = files(repo, rev)
    assert ahead.gather(source, the_role, strategy_for(the_role, repo), TARGETS, DIFF)
    return ahead


def pack(repo: Path, the_role: Role, prompt_tokens: int, ahead: Ahead | None) -> Pack:
    return build_pack(
        files(repo),
        the_role,
        repo=repo,
        prompt_tokens=prompt_tokens,
        targets=TARGETS,
        diff=DIFF,
        ahead=ahead,
    )


def same(a: Pack, b: Pack) -> bool:
    fields = ("text", "tokens", "files", "pruned", "redactions", "truncated", "strategy")
    return all(getattr(a, f) == getattr(b, f) for f in fields)


def test_a_pack_gathered_ahead_is_the_pack_the_step_would_make(repo: Path) -> None:
    ahead = gathered(repo, role())
    used = pack(repo, role(), 100, ahead)
    assert used.ahead and ahead.hits == 1
    assert same(used, pack(repo, role(), 100, None))


def test_a_prompt_that_leaves_less_room_prunes_what_was_gathered_as_it_would_have(
    repo: Path,
) -> None:
    """The feedback of a failed gate, unknown while the gate ran, only makes the prompt longer:
    the gathered pack is fitted to what is left, exactly as a pack made then would be."""
    full = pack(repo, role(), 100, None)
    tight = full.tokens + 100 - 150
    fitted = pack(repo, role(tight), 100, gathered(repo, role(tight)))
    assert fitted.ahead and fitted.pruned
    assert same(fitted, pack(repo, role(tight), 100, None))


def test_a_pack_gathered_from_other_inputs_is_not_used(repo: Path) -> None:
    ahead = gathered(repo, role())
    other_targets = build_pack(
        files(repo), role(), repo=repo, prompt_tokens=100, targets=[], diff=DIFF, ahead=ahead
    )
    other_diff = build_pack(
        files(repo), role(), repo=repo, prompt_tokens=100, targets=TARGETS, diff="", ahead=ahead
    )
    narrower = role().model_copy(update={"context": RoleContext(exclude=["tests/**"])})
    other_role = pack(repo, narrower, 100, ahead)
    assert not other_targets.ahead and not other_diff.ahead and not other_role.ahead
    assert "tests/test_main.py" not in other_role.files


def test_another_commit_with_other_files_is_not_served_what_was_gathered_for_the_first(
    repo: Path,
) -> None:
    ahead = gathered(repo, role())
    (repo / "app" / "util.py").write_text("def helper():\n    return 7\n")
    git(repo, "commit", "-qam", "change")
    now = pack(repo, role(), 100, ahead)
    assert not now.ahead and "return 7" in now.text


def test_the_same_files_under_another_commit_use_what_was_gathered(repo: Path) -> None:
    """The key is the tree the pack reads, not how its commit is named."""
    ahead = gathered(repo, role())
    git(repo, "commit", "-q", "--allow-empty", "-m", "empty")
    assert pack(repo, role(), 100, ahead).ahead


def test_a_directory_and_a_projects_scope_are_never_gathered_ahead(repo: Path) -> None:
    the_role = role()
    strategy = strategy_for(the_role, repo)
    assert key(DirFiles(repo), the_role, strategy, TARGETS, DIFF, None) is None
    assert not Ahead().gather(DirFiles(repo), the_role, strategy, TARGETS, DIFF)
    scope = object()  # any scope: a monorepo component's pack is the fan-out's to make
    assert key(files(repo), the_role, strategy, TARGETS, DIFF, scope) is None  # type: ignore[arg-type]


def test_a_pack_gathered_in_the_preparations_thread_serves_the_steps(repo: Path) -> None:
    ahead = Ahead()
    the_role = role()
    strategy = strategy_for(the_role, repo)
    worker = threading.Thread(
        target=ahead.gather, args=(files(repo), the_role, strategy, TARGETS, DIFF)
    )
    worker.start()
    worker.join()
    assert pack(repo, the_role, 100, ahead).ahead


def test_only_the_latest_few_packs_are_kept(repo: Path) -> None:
    ahead = Ahead(keep=1)
    the_role = role()
    strategy = strategy_for(the_role, repo)
    ahead.gather(files(repo), the_role, strategy, TARGETS, DIFF)
    ahead.gather(files(repo), the_role, strategy, [], DIFF)
    assert not pack(repo, the_role, 100, ahead).ahead


def test_a_trusted_template_changed_and_trusted_again_renders_its_new_text(repo: Path) -> None:
    """Compiled templates are kept by name and by the checksum of the source just read."""
    template = repo / ".supervisor" / "templates" / "planning.j2"
    template.parent.mkdir(parents=True)
    planner = load_role("planner", repo)
    rendered = []
    for text in ("Plan {{ task }} carefully.\n", "Plan {{ task }} twice.\n"):
        template.write_text(text)
        trust(repo)
        prompt, _ = prompts.compose(
            planner, repo, repo, task="T1", feedback=[], plan="", targets=[], diff=""
        )
        rendered.append(prompt)
    assert rendered[0].startswith("Plan T1 carefully.")
    assert rendered[1].startswith("Plan T1 twice.")
    built_in, _ = prompts.compose(
        planner, None, repo, task="T1", feedback=[], plan="", targets=[], diff=""
    )
    assert "twice" not in built_in  # the same name, the package's own template
