"""Workflow templates: inheritance, a project's adjustments, and validation before anything runs."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from supervisor.context.roles import load_role
from supervisor.core.config import load_settings
from supervisor.core.errors import ConfigError
from supervisor.guard.trust import trust
from supervisor.workflow.history import required_gates
from supervisor.workflow.loading import load_workflow

if TYPE_CHECKING:
    from pathlib import Path

TEMPLATES = ["_base", "mvp", "open_source", "enterprise", "security_critical"]


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SUPERVISOR_USER_DIR", str(tmp_path / "user"))
    root = tmp_path / "repo"
    (root / ".supervisor").mkdir(parents=True)
    return root


def configure(repo: Path, text: str) -> None:
    (repo / ".supervisor" / "config.yaml").write_text("gates: {test: t, lint: l}\n" + text)


def order(definition: object) -> list[str]:
    """The happy path: from the start, following `next`."""
    steps = definition.steps  # type: ignore[attr-defined]
    name, seen = definition.initial_step, []  # type: ignore[attr-defined]
    while name is not None:
        seen.append(name)
        name = steps[name].next
    return seen


@pytest.mark.parametrize("template", TEMPLATES)
def test_every_shipped_template_is_valid(repo: Path, template: str) -> None:
    configure(repo, f"workflow: {{template: {template}}}\n")
    definition = load_workflow(repo, load_settings(repo))
    assert order(definition)[-1] == "commit"


@pytest.mark.parametrize("template", TEMPLATES)
def test_every_step_that_changes_code_is_followed_by_every_gate_before_the_commit(
    repo: Path, template: str
) -> None:
    """The commit takes only a tree that passed every gate as it is: on the happy path, each
    implementing step (planners and reviewers change nothing) has every gate after it."""
    configure(repo, f"workflow: {{template: {template}}}\n")
    definition = load_workflow(repo, load_settings(repo))
    path = order(definition)
    required = set(required_gates(definition))
    assert required, "every shipped template gates its work"
    for i, name in enumerate(path):
        step = definition.steps[name]
        if step.role and load_role(step.role, repo).output == "implementation":
            later = {definition.steps[n].gate for n in path[i + 1 :] if definition.steps[n].gate}
            assert required <= later, f"{template}: '{name}' is not followed by {required - later}"


def test_templates_inherit_through_extends(repo: Path) -> None:
    configure(repo, "workflow: {template: security_critical}\n")
    definition = load_workflow(repo, load_settings(repo))
    assert order(definition) == [
        "plan",
        "interfaces",
        "implement",
        "test",
        "tests_review",
        "tests_test",
        "lint",
        "security_review",
        "second_security_review",
        "review",
        "commit",
    ]
    assert definition.steps["plan"].human_approval  # from enterprise
    assert definition.steps["implement"].retry_policy == "conservative"  # its own
    assert definition.steps["test"].on_fail == "implement"  # from _base


def test_a_project_adds_overrides_and_disables_steps(repo: Path) -> None:
    configure(
        repo,
        "workflow:\n  template: _base\n"
        "  overrides: {implement: {max_retries: 7}}\n"
        "  add: {lint: {gate: lint, position: after test, on_fail: implement}}\n"
        "  disable: [review]\n",
    )
    assert "review" in load_workflow(repo, load_settings(repo)).steps  # disabling needs trust
    trust(repo)
    definition = load_workflow(repo, load_settings(repo))
    assert order(definition) == ["plan", "implement", "test", "lint", "commit"]
    assert definition.steps["implement"].max_retries == 7
    assert "review" not in definition.steps


def test_an_added_step_needs_a_position(repo: Path) -> None:
    configure(repo, "workflow:\n  add: {lint: {gate: lint}}\n")
    with pytest.raises(ConfigError, match="position: after <step>"):
        load_workflow(repo, load_settings(repo))


def test_an_unknown_template_lists_the_known_ones(repo: Path) -> None:
    configure(repo, "workflow: {template: waterfall}\n")
    with pytest.raises(ConfigError, match="Unknown workflow template 'waterfall'") as info:
        load_workflow(repo, load_settings(repo))
    assert "enterprise" in info.value.hint


def test_templates_extending_in_a_loop_are_named(repo: Path) -> None:
    custom = repo / ".supervisor" / "workflow_templates"
    custom.mkdir()
    (custom / "a.yaml").write_text("extends: b\n")
    (custom / "b.yaml").write_text("extends: a\n")
    configure(repo, "workflow: {template: a}\n")
    with pytest.raises(ConfigError, match="a → b → a"):
        load_workflow(repo, load_settings(repo))


def test_an_unreachable_step_is_refused(repo: Path) -> None:
    (repo / ".supervisor" / "workflow.yaml").write_text(
        "workflow:\n  initial_step: a\n  steps:\n"
        "    a: {role: planner, next: c}\n    b: {role: implementer, next: c}\n"
        "    c: {action: commit}\n"
    )
    configure(repo, "")
    with pytest.raises(ConfigError, match="step\\(s\\) b can never run"):
        load_workflow(repo, load_settings(repo))


def test_a_loop_without_a_retry_bound_is_refused(repo: Path) -> None:
    (repo / ".supervisor" / "workflow.yaml").write_text(
        "workflow:\n  initial_step: a\n  steps:\n"
        "    a: {role: implementer, next: b}\n    b: {gate: test, next: a}\n"
    )
    configure(repo, "")
    with pytest.raises(
        ConfigError, match=r"loop through `next` with no retry bound: (a → b → a|b → a → b)"
    ):
        load_workflow(repo, load_settings(repo))


def test_a_gate_the_project_has_no_command_for_is_refused(repo: Path) -> None:
    (repo / ".supervisor" / "config.yaml").write_text(
        "workflow: {template: open_source}\ngates: {test: t}\n"
    )
    with pytest.raises(ConfigError, match="gate 'lint'"):
        load_workflow(repo, load_settings(repo))
