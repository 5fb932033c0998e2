"""Plans that know the projects of a monorepo, and the gates a candidate runs in each project:
what the planner is told, which plans are sent back and why, the order components are built
in across projects, what a worker may change, and which projects' gates a change runs."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from supervisor.context import prompts
from supervisor.core.config import Settings
from supervisor.core.dag import WorkGraph
from supervisor.core.errors import ConfigError
from supervisor.core.projects import ProjectMap
from supervisor.core.schemas import ComponentDefinition, PlanOutput
from supervisor.gates import per_project as project_gates
from supervisor.gates import reuse as gate_reuse
from supervisor.workflow import ownership, plan_projects


def monorepo(**extra: Any) -> ProjectMap:
    return Settings.model_validate(
        {
            "projects": [
                {"name": "types", "path": "packages/types"},
                {"name": "ui", "path": "packages/ui", "gates": {"test": "pnpm vitest run"}},
                {
                    "name": "web",
                    "path": "apps/web",
                    "sandbox": {"image": "web-image:1"},
                    "roles": ["frontend"],
                },
                {"name": "docs", "path": "apps/docs", "gates": {"lint": "pnpm lint"}},
            ],
            "cross_project_dependencies": {
                "ui": {"depends_on": ["types"]},
                "web": {"depends_on": ["ui"]},
                "docs": {"depends_on": ["types"]},
            },
            **extra,
        }
    ).project_map()


def comp(cid: str, project: str | None, files: list[str], deps: list[str] | None = None) -> Any:
    return {
        "id": cid,
        "description": cid,
        "files": files,
        "depends_on": deps or [],
        "estimated_lines": 10,
        "project": project,
    }


def plan(*components: dict[str, Any], phases: int = 1) -> dict[str, Any]:
    listed = list(components)
    return {
        "status": "COMPLETE",
        "summary": "",
        "phases": [
            {"id": f"p{i}", "description": "", "components": listed[i::phases]}
            for i in range(phases)
        ],
        "dependencies": [],
        "estimated_components": len(listed),
        "risks": [],
    }


# -- the plan ---------------------------------------------------------------------------------


def test_a_component_names_its_project_and_null_means_a_single_project_repository() -> None:
    assert ComponentDefinition.model_validate(comp("a", "web", [])).project == "web"
    assert ComponentDefinition.model_validate(comp("a", None, [])).project is None
    schema = ComponentDefinition.model_json_schema()
    assert "project" in schema["properties"]


def test_the_plan_schema_with_projects_is_one_every_vendor_accepts() -> None:
    from supervisor.fakeapi import schema_rules
    from supervisor.workers.structured_output import for_cli

    strict = for_cli(PlanOutput, "codex")
    assert schema_rules.openai_refusal("plan", strict) is None
    component = strict["$defs"]["ComponentDefinition"]
    assert "project" in component["required"]  # strict: every property required, null allowed
    assert {"type": "null"} in component["properties"]["project"]["anyOf"]
    assert schema_rules.anthropic_refusal("output_format", for_cli(PlanOutput, "claude")) is None


def test_a_plan_that_fits_the_projects_passes() -> None:
    good = plan(
        comp("t", "types", ["packages/types/src/index.ts"]),
        comp("w", "web", ["apps/web/src/main.ts"]),
    )
    assert plan_projects.problem(good, monorepo()) is None


def test_a_component_naming_an_unknown_project_is_sent_back_with_the_projects() -> None:
    why = plan_projects.problem(plan(comp("w", "website", ["apps/web/a.ts"])), monorepo())
    assert why is not None
    assert "'website'" in why and "types, ui, web, docs" in why


def test_a_component_of_a_monorepo_without_a_project_is_sent_back() -> None:
    why = plan_projects.problem(plan(comp("w", None, ["apps/web/a.ts"])), monorepo())
    assert why is not None and "names no project" in why and "set `project`" in why


def test_a_component_whose_files_are_in_another_project_is_sent_back() -> None:
    why = plan_projects.problem(
        plan(comp("w", "web", ["apps/web/a.ts", "packages/types/src/index.ts"])), monorepo()
    )
    assert why is not None
    assert "packages/types/src/index.ts" in why and "outside its project" in why
    assert "apps/web/a.ts" not in why.split("names", 1)[1]


def test_a_shared_path_may_be_named_by_any_component() -> None:
    shared = monorepo(shared_paths=["pnpm-lock.yaml"])
    good = plan(comp("w", "web", ["apps/web/a.ts", "pnpm-lock.yaml"]))
    assert plan_projects.problem(good, shared) is None


def test_a_project_named_in_a_single_project_repository_is_sent_back() -> None:
    why = plan_projects.problem(plan(comp("a", "web", ["a.py"])), ProjectMap())
    assert why is not None and "has no projects" in why
    assert plan_projects.problem(plan(comp("a", None, ["a.py"])), ProjectMap()) is None


def test_the_planner_prompt_shows_the_project_map_producers_first() -> None:
    from supervisor.context.roles import load_role

    role = load_role("planner", None)
    text = prompts.render(
        role.template,
        None,
        role.schema,
        role=role,
        task="add a field",
        feedback=[],
        plan="",
        run_id="x",
        degrade="",
        research="",
        context_pack="",
        projects=plan_projects.for_prompt(monorepo()),
    )
    assert "PROJECTS" in text
    assert "- types: packages/types/" in text
    assert "- web: apps/web/, depends on ui, roles frontend" in text
    assert text.index("- types:") < text.index("- ui:") < text.index("- web:")


def test_the_planner_prompt_of_a_single_project_repository_has_no_project_map() -> None:
    from supervisor.context.roles import load_role

    role = load_role("planner", None)
    text = prompts.render(
        role.template,
        None,
        role.schema,
        role=role,
        task="t",
        feedback=[],
        plan="",
        run_id="x",
        degrade="",
        research="",
        context_pack="",
        projects=[],
    )
    assert "PROJECTS" not in text


# -- the work graph ---------------------------------------------------------------------------


def graph(data: dict[str, Any], projects: ProjectMap | None = None) -> WorkGraph:
    return WorkGraph.from_plan(PlanOutput.model_validate(data), projects or monorepo())


def test_a_consumer_component_waits_for_every_component_of_the_projects_it_builds_on() -> None:
    work = graph(
        plan(
            comp("web-page", "web", ["apps/web/page.ts"]),
            comp("types-field", "types", ["packages/types/index.ts"]),
            comp("ui-widget", "ui", ["packages/ui/w.ts"]),
            comp("docs-page", "docs", ["apps/docs/x.md"]),
        )
    )
    assert work.merge_order() == ["types-field", "ui-widget", "web-page", "docs-page"]
    assert [c.id for c in work.ready()] == ["types-field"]
    work.components["types-field"].status = "complete"
    assert {c.id for c in work.ready()} == {"ui-widget", "docs-page"}
    edge = work.graph.edges["types-field", "web-page"]
    assert edge["kind"] == "project"  # transitively: web builds on ui, which builds on types


def test_components_of_independent_projects_run_side_by_side() -> None:
    work = graph(plan(comp("w", "web", ["apps/web/a.ts"]), comp("d", "docs", ["apps/docs/a.md"])))
    assert {c.id for c in work.batch(3)} == {"w", "d"}


def test_a_producer_planned_after_its_consumer_is_a_cycle_named_with_the_reason() -> None:
    bad = plan(
        comp("w", "web", ["apps/web/a.ts"]),
        comp("t", "types", ["packages/types/a.ts"], deps=["w"]),
    )
    with pytest.raises(ConfigError) as caught:
        graph(bad)
    assert "cycle" in caught.value.message
    assert "projects its project depends on" in caught.value.hint


def test_without_projects_the_graph_is_as_before() -> None:
    work = WorkGraph.from_plan(
        PlanOutput.model_validate(plan(comp("a", None, ["a.py"]), comp("b", None, ["b.py"])))
    )
    assert {c.id for c in work.ready()} == {"a", "b"}


def test_a_cycle_between_projects_is_refused_before_anything_runs() -> None:
    with pytest.raises(ConfigError) as caught:
        Settings.model_validate(
            {
                "projects": [{"name": "a", "path": "a"}, {"name": "b", "path": "b"}],
                "cross_project_dependencies": {
                    "a": {"depends_on": ["b"]},
                    "b": {"depends_on": ["a"]},
                },
            }
        ).project_map()
    message = caught.value.message
    assert "cycle" in message and ("a -> b -> a" in message or "b -> a -> b" in message)


# -- what a worker may change -----------------------------------------------------------------


def test_a_worker_writing_into_another_project_is_out_of_scope_named_by_that_project() -> None:
    work = graph(plan(comp("w", "web", ["apps/web/a.ts"])))
    strays, new = ownership.check(
        "w", ["apps/web/a.ts", "packages/types/index.ts", "README.md"], work, {}, monorepo()
    )
    assert strays == {
        "packages/types/index.ts": ["project types"],
        "README.md": ["no project (outside every project)"],
    }
    assert new == []
    text = ownership.scope_feedback("w", strays, ["apps/web/a.ts"])
    assert "packages/types/index.ts (belongs to project types)" in text


def test_an_undeclared_file_of_its_own_project_is_claimed_as_before() -> None:
    work = graph(plan(comp("w", "web", ["apps/web/a.ts"])))
    strays, new = ownership.check("w", ["apps/web/b.ts"], work, {}, monorepo())
    assert strays == {} and new == ["apps/web/b.ts"]


# -- which gates a change runs ----------------------------------------------------------------


def test_a_change_to_one_app_runs_that_apps_gate_only_in_its_directory_and_image() -> None:
    chosen = project_gates.choose(monorepo(), "test", "pnpm test", ["apps/web/src/main.ts"])
    assert chosen is not None
    assert [(g.project, g.reason, g.command, g.image) for g in chosen] == [
        ("web", "changed (apps/web/src/main.ts)", "pnpm test", "web-image:1")
    ]
    assert chosen[0].script == "cd apps/web && pnpm test"


def test_a_change_to_shared_types_runs_the_gates_of_every_project_building_on_them() -> None:
    chosen = project_gates.choose(monorepo(), "test", "pnpm test", ["packages/types/a.ts"])
    assert chosen is not None
    assert [(g.project, g.reason, g.command, g.defined) for g in chosen] == [
        ("types", "changed (packages/types/a.ts)", "pnpm test", True),
        ("ui", "depends on types", "pnpm vitest run", True),  # its own gate
        ("web", "depends on types, ui", "pnpm test", True),
        ("docs", "depends on types", "", False),  # it has gates, and not this one
    ]


def test_a_change_outside_every_project_runs_the_repositorys_gate_as_before() -> None:
    assert project_gates.choose(monorepo(), "test", "pnpm test", ["README.md"]) is None
    assert project_gates.choose(monorepo(), "test", "t", ["apps/web/a", "Makefile"]) is None
    assert project_gates.choose(ProjectMap(), "test", "pnpm test", ["apps/web/a.ts"]) is None
    assert project_gates.choose(monorepo(), "test", "pnpm test", []) is None


def test_a_project_directory_with_a_space_is_quoted_for_the_shell() -> None:
    odd = Settings.model_validate(
        {"projects": [{"name": "a", "path": "apps/my app"}]}
    ).project_map()
    chosen = project_gates.choose(odd, "test", "make test", ["apps/my app/x"])
    assert chosen is not None and chosen[0].script == "cd 'apps/my app' && make test"


def test_the_same_command_on_the_same_tree_in_another_project_is_another_run() -> None:
    one = gate_reuse.key_of("tree", "pnpm test", "img", {}, "apps/web")
    other = gate_reuse.key_of("tree", "pnpm test", "img", {}, "apps/docs")
    assert one != other
    assert gate_reuse.key_of("tree", "pnpm test", "img", {}) == gate_reuse.key_of(
        "tree", "pnpm test", "img", {}, ""
    )


# -- what `status` and the TUI show -----------------------------------------------------------


def gated_context() -> dict[str, Any]:
    run = {
        "gate": "test",
        "at": 2.0,
        "projects": [
            {"project": "types", "reason": "changed (packages/types/a.ts)", "passed": True},
            {"project": "web", "reason": "depends on types, ui", "passed": False},
        ],
    }
    return {
        "plan": plan(
            comp("t", "types", ["packages/types/a.ts"]),
            comp("w", "web", ["apps/web/a.ts"]),
            phases=2,
        ),
        "components": {
            "t": {"status": "implemented", "projects_gated": {"implement/t/test": run}},
            "w": {"status": "pending"},
        },
    }


def test_status_shows_which_projects_were_gated_and_why() -> None:
    from supervisor.views.detail import _gated_lines, projects_gated

    gated = projects_gated(gated_context())
    assert [(g.step, g.project, g.passed) for g in gated] == [
        ("implement/t/test", "types", True),
        ("implement/t/test", "web", False),
    ]
    assert _gated_lines(gated) == (
        "implement/t/test: types passed (changed (packages/types/a.ts)); "
        "web FAILED (depends on types, ui)"
    )


def test_the_tree_is_feature_then_project_then_phase_then_component() -> None:
    from supervisor.cli.status_plain import tree_lines
    from supervisor.views.detail import projects_gated, verdicts

    context = gated_context()
    work = WorkGraph.of_workflow(context)
    assert work is not None
    lines = tree_lines("add a field", work, verdicts(projects_gated(context)))
    assert lines == [
        "feature in_progress  add a field",
        "  project types in_progress  gates passed",
        "    phase p0 in_progress",
        "      t running  packages/types/a.ts",
        "  project web pending  gate test failed",
        "    phase p1 pending",
        "      w pending  apps/web/a.ts",
    ]


def test_the_terminal_and_tui_tree_groups_components_by_project() -> None:
    from rich.console import Console

    from supervisor.views.render import work_tree

    work = WorkGraph.of_workflow(gated_context())
    assert work is not None
    console = Console(width=100, record=True, color_system=None)
    console.print(work_tree("add a field", work, {"web": "gate test failed"}))
    text = console.export_text()
    assert text.index("project types") < text.index("phase p0") < text.index("project web")
    assert "gate test failed" in text


def test_the_tasks_final_gate_runs_every_project_once_saying_which_the_change_reached() -> None:
    chosen = project_gates.choose(
        monorepo(), "test", "pnpm test", ["apps/web/a.ts"], everything=True
    )
    assert chosen is not None
    final = "the task's final gate runs every project"
    assert [(g.project, g.reason) for g in chosen] == [
        ("types", final),
        ("ui", final),
        ("web", "changed (apps/web/a.ts)"),
        ("docs", final),
    ]
    assert project_gates.choose(monorepo(), "test", "t", ["README.md"], everything=True) is None


def test_one_failing_project_fails_the_gate_and_its_feedback_names_the_project() -> None:
    from supervisor.workflow.steps.base import Outcome
    from supervisor.workflow.steps.project_gate import _combined

    chosen = project_gates.choose(monorepo(), "test", "pnpm test", ["packages/types/a.ts"])
    assert chosen is not None
    running = [g for g in chosen if g.defined]
    run = {"key": "k-types", "gate": "test"}
    outcomes = [
        Outcome("passed", context={"gate_runs": [run], "gates_passed": {"tree": ["test"]}}),
        Outcome("failed", feedback="2 tests failed", context={"gate_failure": {"tree": "t1"}}),
        Outcome("passed", context={"gate_runs": [{"key": "k-web"}]}),
    ]

    wf: Any = SimpleNamespace(context={"gate_runs": [{"key": "older"}]})
    failed = _combined(wf, "implement/x/test", "test", "abc", running, outcomes, False)
    assert failed.result == "failed"
    assert failed.feedback == (
        "Project 'ui' (packages/ui/, gated because: depends on types): 2 tests failed"
    )
    assert failed.context["gate_failure"]["tree"] == "t1"
    assert [r["key"] for r in failed.context["gate_runs"]] == ["older", "k-types", "k-web"]
    assert "gates_passed" not in failed.context  # no tree is recorded as passing
    passed = _combined(wf, "s", "test", "abc", running[:1], outcomes[:1], True)
    assert passed.result == "passed" and passed.context["gates_passed"] == {"tree": ["test"]}


def test_the_projects_gates_are_pinned_when_the_task_starts_and_the_pins_win() -> None:
    from supervisor.guard import protected

    settings = Settings.model_validate(
        {
            "gates": {"test": "make test"},
            "projects": [{"name": "web", "path": "apps/web", "gates": {"test": "pnpm test"}}],
        }
    )
    started = protected.pinned_start(settings, None)
    pins = protected.Pinned.model_validate(started["context"][protected.PINNED_KEY])
    assert pins.project_gates == {"web": {"test": "pnpm test"}}
    assert started["events"][0].payload["project_gates"] == {"web": {"test": "pnpm test"}}
    # the configuration changed afterwards: the task keeps running what it started with
    later = Settings.model_validate(
        {
            "gates": {"test": "make test"},
            "projects": [{"name": "web", "path": "apps/web", "gates": {"test": "true"}}],
        }
    ).project_map()
    chosen = project_gates.choose(
        later, "test", "make test", ["apps/web/a.ts"], pinned=pins.project_gates
    )
    assert chosen is not None and [g.command for g in chosen] == ["pnpm test"]


def test_a_project_whose_path_is_not_a_directory_stops_the_task_before_it_starts(
    tmp_path: Path, api_keys: None
) -> None:
    from e2e_support import new_repo

    from supervisor.lifecycle import tasks

    config = "projects:\n  - {name: web, path: apps/web}\n  - {name: api, path: apps/api}\n"
    repo = new_repo(tmp_path, "http://127.0.0.1:9", config)
    (repo / "apps" / "web").mkdir(parents=True)
    with pytest.raises(ConfigError) as caught:
        tasks.start_task("anything", repo)
    assert "Project 'api'" in caught.value.message and "'apps/api'" in caught.value.message
    assert "Fix `path:`" in caught.value.hint
    assert tasks.workflows(repo) == []  # nothing ran
