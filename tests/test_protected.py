"""Protected paths, the pure part: which of a candidate's changes touch the gate harness.

Real git repositories (two commits each); no Docker, no CLI.
"""

from __future__ import annotations

import json
import subprocess
from typing import TYPE_CHECKING, Any

import pytest

from supervisor.core.config import load_settings
from supervisor.core.errors import SandboxError
from supervisor.guard import protected
from supervisor.guard.protected import Pinned, changed_protected, part_of, pin, pinned
from supervisor.guard.trust import trust
from supervisor.policy.dependency_review import dependency_diff, pending_request
from supervisor.project.project_image import dependency_files

if TYPE_CHECKING:
    from pathlib import Path

PYPROJECT = """[project]
name = "app"
dependencies = ["requests"]

[tool.pytest.ini_options]
testpaths = ["tests"]
"""
PACKAGE = {"name": "app", "scripts": {"test": "node test.js"}, "dependencies": {"a": "1"}}


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


def commit_all(repo: Path, files: dict[str, str]) -> str:
    for rel, text in files.items():
        path = repo / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "c", "--allow-empty")
    return git(repo, "rev-parse", "HEAD")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    return root


def changes(repo: Path, files: dict[str, str], allow: list[str] | None = None) -> list[str]:
    """Commit a base with pyproject.toml, package.json and a Makefile, then `files` on top;
    the protected changes the default list finds."""
    base = commit_all(
        repo,
        {
            "pyproject.toml": PYPROJECT,
            "package.json": json.dumps(PACKAGE),
            "Makefile": "test:\n\tpytest\n",
            "app.py": "x = 1\n",
        },
    )
    head = commit_all(repo, files)
    changed = git(repo, "diff", "--name-only", "--no-renames", base, head).split()
    return changed_protected(repo, pin(load_settings(None)), allow or [], base, head, changed)


def test_a_rewritten_makefile_is_protected_but_code_is_not(repo: Path) -> None:
    found = changes(repo, {"Makefile": "test:\n\t@echo all tests passed\n", "app.py": "x = 2\n"})
    assert found == ["Makefile"]


@pytest.mark.parametrize(
    "path",
    [
        "conftest.py",
        "tests/deep/conftest.py",
        "pytest.ini",
        "tox.ini",
        "setup.cfg",
        "noxfile.py",
        "sitecustomize.py",
        "build/test.mk",
        "justfile",
        "JustFile",
        ".justfile",
        ".github/workflows/ci.yml",
        ".gitlab-ci.yml",
        ".circleci/config.yml",
        ".supervisor/config.yaml",
        ".supervisor/roles/implementer.yaml",
        "repomix.config.json",
        ".repomixignore",
        "unittest/__init__.py",
        "src/pytest.py",
        ".npmrc",
        "jest.config.js",
        ".cargo/config.toml",
    ],
)
def test_every_default_harness_file_is_protected_at_any_depth(repo: Path, path: str) -> None:
    assert changes(repo, {path: "changed\n"}) == [path]


def test_a_dependency_edit_in_pyproject_passes_but_the_pytest_table_does_not(repo: Path) -> None:
    deps = PYPROJECT.replace('["requests"]', '["requests", "six"]')
    assert changes(repo, {"pyproject.toml": deps}) == []


def test_the_pytest_table_of_pyproject_is_compared_parsed(repo: Path) -> None:
    rigged = PYPROJECT.replace('testpaths = ["tests"]', 'testpaths = ["nothing"]')
    assert changes(repo, {"pyproject.toml": rigged}) == ["pyproject.toml (tool.pytest)"]


def test_a_pytest_table_added_where_there_was_none_counts(repo: Path) -> None:
    base = commit_all(repo, {"pyproject.toml": '[project]\nname = "a"\n'})
    head = commit_all(repo, {"pyproject.toml": '[project]\nname = "a"\n[tool.pytest]\nx = 1\n'})
    found = changed_protected(repo, pin(load_settings(None)), [], base, head, ["pyproject.toml"])
    assert found == ["pyproject.toml (tool.pytest)"]


def test_an_unparsable_pyproject_counts_as_a_change_to_its_pytest_table(repo: Path) -> None:
    assert changes(repo, {"pyproject.toml": "[tool.pytest\n"}) == ["pyproject.toml (tool.pytest)"]


def test_package_json_scripts_are_protected_its_dependencies_are_not(repo: Path) -> None:
    more_deps = {**PACKAGE, "dependencies": {"a": "1", "b": "2"}}
    assert changes(repo, {"package.json": json.dumps(more_deps, indent=4)}) == []
    rigged = {**PACKAGE, "scripts": {"test": "echo ok"}}
    assert changes(repo, {"package.json": json.dumps(rigged)}) == ["package.json (scripts)"]


def test_a_role_allowance_opens_only_its_paths(repo: Path) -> None:
    found = changes(repo, {"tests/conftest.py": "x\n", "conftest.py": "y\n"}, allow=["tests/**"])
    assert found == ["conftest.py"]


def test_a_task_allowance_is_part_of_the_pinned_checks(repo: Path) -> None:
    base = commit_all(repo, {"Makefile": "a\n"})
    head = commit_all(repo, {"Makefile": "b\n"})
    pins = pin(load_settings(None), ["Makefile"])
    assert changed_protected(repo, pins, [], base, head, ["Makefile"]) == []


def test_project_config_adds_and_removes_entries(tmp_path: Path) -> None:
    (tmp_path / ".supervisor").mkdir()
    (tmp_path / ".supervisor" / "config.yaml").write_text(
        "protected_paths:\n  add: ['ci/**']\n  remove: ['tox.ini']\n"
        "sandbox:\n  dependency_changes: allow\n"
    )
    untrusted = pin(load_settings(tmp_path))  # removing and allowing weaken: ignored until trusted
    assert "ci/**" in untrusted.protected
    assert "tox.ini" in untrusted.protected
    assert untrusted.dependency_changes == "approve"
    trust(tmp_path)
    pins = pin(load_settings(tmp_path))
    assert "ci/**" in pins.protected
    assert "tox.ini" not in pins.protected
    assert "Makefile" in pins.protected
    assert pins.dependency_changes == "allow"


def test_pinned_checks_win_over_todays_configuration() -> None:
    settings = load_settings(None)
    context = {protected.PINNED_KEY: Pinned(gates={"test": "make test"}).model_dump()}
    rigged = settings.model_copy(update={"gates": {"test": "true"}})
    assert pinned(context, rigged).gates == {"test": "make test"}
    assert pinned({}, rigged).gates == {"test": "true"}  # a workflow from before pinning


def test_part_of_reads_dotted_keys_and_missing_ones() -> None:
    assert part_of("pyproject.toml", PYPROJECT, "tool.pytest") == {
        "ini_options": {"testpaths": ["tests"]}
    }
    assert part_of("package.json", json.dumps(PACKAGE), "scripts.test") == "node test.js"
    assert part_of("package.json", "{}", "scripts") is None


def test_a_symlinked_dependency_file_is_refused_by_name(tmp_path: Path) -> None:
    (tmp_path / "requirements.txt").symlink_to("/etc/passwd")
    with pytest.raises(SandboxError) as info:
        dependency_files(tmp_path)
    assert "requirements.txt" in info.value.message
    assert "/etc/passwd" in info.value.message


def test_the_dependency_diff_shows_each_changed_file() -> None:
    diff = dependency_diff(
        {"requirements.txt": "a==1\n", "package.json": "{}\n"},
        {"requirements.txt": "a==1\nevil==6.6.6\n", "package.json": "{}\n"},
    )
    assert "+evil==6.6.6" in diff
    assert "a/requirements.txt" in diff
    assert "package.json" not in diff


def _waiting(context: dict[str, Any], current_step: str, approval_step: str) -> tuple[Any, Any]:
    from datetime import UTC, datetime

    from supervisor.state.store import Approval, Workflow

    stamp = datetime.now(UTC)
    wf = Workflow(1, "t", "awaiting_approval", current_step, "claude", "main", "0" * 40,
                  "ai/1-t", {}, context, None, stamp, stamp)  # fmt: skip
    return wf, Approval(1, 1, approval_step, "pending", None)


def test_a_pending_dependency_approval_is_told_apart_from_a_step_approval() -> None:
    request = {"step": "test", "producer": "implement", "diff": "+six\n", "files": [], "hash": "h"}
    assert pending_request(*_waiting({"dependency_request": request}, "test", "implement"))
    # A later human_approval step of the same workflow is not about the old dependency change.
    assert pending_request(*_waiting({"dependency_request": request}, "review", "plan")) is None
    assert pending_request(*_waiting({}, "test", "implement")) is None
