"""What a prompt leaves out is said, and a component's prompt does not grow with the plan.

A component's implementer gets its own component, its dependencies' interfaces and one line about
the rest of the plan (supervisor.context.plan_view), so its prompt is the same size at 20
components and
at 40; and a file tree cut at TREE_LINES says so in the prompt and in the pack's record (the
`context_packed` event carries `Pack.summary()`).
"""

from __future__ import annotations

import subprocess
from typing import TYPE_CHECKING, Any

import pytest

from supervisor.context import prompts
from supervisor.context.assemble import TREE_LINES, build_pack
from supervisor.context.plan_view import plan_for_prompt
from supervisor.context.roles import load_role
from supervisor.core.dag import WorkGraph
from supervisor.core.schemas import PlanOutput

if TYPE_CHECKING:
    from pathlib import Path


def git_repo(root: Path, files: dict[str, str]) -> Path:
    root.mkdir(parents=True)
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "init"], check=True)
    return root


def synthetic_plan(n: int) -> dict[str, Any]:
    """N components in three phases; each depends on the one before it (a chain), with
    plan-like descriptions and two files each."""
    phases: list[dict[str, Any]] = [
        {"id": f"phase{p}", "description": f"Phase {p}", "components": []} for p in range(3)
    ]
    for i in range(n):
        phases[i * 3 // n]["components"].append(
            {
                "id": f"component_{i:02d}",
                "description": f"Implements part {i} of the service: its data model, the "
                "validation of its inputs and the HTTP handlers that expose it, with tests.",
                "files": [f"app/part_{i:02d}.py", f"tests/test_part_{i:02d}.py"],
                "depends_on": [f"component_{i - 1:02d}"] if i else [],
            }
        )
    return PlanOutput.model_validate(
        {
            "status": "COMPLETE",
            "summary": "Build the service in parts, each with its tests.",
            "phases": phases,
            "estimated_components": n,
            "risks": ["The parts share a database schema."],
        }
    ).model_dump()


@pytest.fixture
def small_repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SUPERVISOR_USER_DIR", str(tmp_path / "user"))
    return git_repo(tmp_path / "repo", {"README.md": "# service\n", "app/__init__.py": ""})


def largest_component_prompt(repo: Path, plan: dict[str, Any]) -> int:
    """Bytes of the prompt of the component whose view of the plan is longest (the rest of its
    prompt, template and context, is the same for every component here)."""
    work = WorkGraph.from_plan(PlanOutput.model_validate(plan))
    views = {c.id: plan_for_prompt(plan, c) for c in work.components.values()}
    largest = max(views, key=lambda cid: len(views[cid]))
    prompt, _ = prompts.compose(
        load_role("implementer", repo),
        repo,
        repo,
        task=f"Build the service. Your part: {largest}",
        feedback=[],
        plan=views[largest],
        targets=work.components[largest].files,
        diff="",
    )
    return len(prompt.encode())


def test_a_component_prompt_is_the_same_size_at_20_and_40_components(small_repo: Path) -> None:
    at_20 = largest_component_prompt(small_repo, synthetic_plan(20))
    at_40 = largest_component_prompt(small_repo, synthetic_plan(40))
    assert abs(at_40 - at_20) <= 16  # a digit or two of the counts


def test_a_component_sees_its_dependencies_interfaces_and_one_line_about_the_rest() -> None:
    plan = synthetic_plan(40)
    work = WorkGraph.from_plan(PlanOutput.model_validate(plan))
    view = plan_for_prompt(plan, work.components["component_10"])
    assert "component_09" in view and "app/part_09.py" in view  # what it builds on
    assert "38 other component(s) across 3 phase(s)" in view
    assert "component_11" not in view and "component_30" not in view
    assert "Build the service in parts" in view
    # A step on the whole task (a single implementer, a reviewer) still gets the whole plan.
    whole = plan_for_prompt(plan, None)
    assert all(f"component_{i:02d}" in whole for i in range(40))
    assert plan_for_prompt(None, None) == ""


def test_a_file_tree_cut_short_says_so_in_the_prompt_and_the_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SUPERVISOR_USER_DIR", str(tmp_path / "user"))
    extra = 37
    files = {f"pkg/m{i:04d}.py": "" for i in range(TREE_LINES + extra)}
    repo = git_repo(tmp_path / "big", files)
    role = load_role("implementer", repo)
    pack = build_pack(repo, role, repo=repo, prompt_tokens=100, targets=[])
    assert pack.pruned == []
    assert "pkg/m1499.py" in pack.text and "pkg/m1500.py" not in pack.text
    marker = f"[file tree truncated: {extra} more file(s) not listed; the first {TREE_LINES}"
    assert marker in pack.text
    assert pack.summary()["truncated"] == [
        {"section": "tree", "shown_lines": TREE_LINES, "omitted_lines": extra}
    ]


def test_a_whole_file_tree_has_no_marker_and_no_record(small_repo: Path) -> None:
    pack = build_pack(
        small_repo, load_role("implementer", small_repo), repo=small_repo, prompt_tokens=100
    )
    assert "<file_tree>" in pack.text and "truncated" not in pack.text
    assert pack.summary()["truncated"] == []
