"""The pure decisions of recursive decomposition (supervisor/workflow/decompose.py): what a
sub-plan may say, the depth bound, and each change of the tree the engine settles."""

from __future__ import annotations

from typing import Any

from supervisor.core.config import DecompositionLimits
from supervisor.core.dag import WorkGraph, flatten
from supervisor.core.schemas import PlanOutput
from supervisor.workflow import decompose
from supervisor.workflow.decompose import Tree, settle, validate_subplan

LIMITS = DecompositionLimits(max_depth=2)


def sub(*components: dict[str, Any], phases: int = 1) -> dict[str, Any]:
    return {
        "status": "COMPLETE",
        "phases": [
            {"id": f"p{i}", "description": "", "components": list(components)}
            for i in range(phases)
        ][:1],
        "estimated_components": len(components),
    }


def comp(cid: str, *files: str, deps: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"id": cid, "description": cid, "files": list(files), "depends_on": list(deps)}


def test_a_valid_sub_plan_is_renumbered_under_its_parent_with_its_sibling_dependencies() -> None:
    children, problem = validate_subplan(
        "c2", ["a.py", "b.py"], sub(comp("x", "a.py"), comp("y", "b.py", deps=("x",))), {"c1"}
    )
    assert problem is None
    assert [(c["id"], c["depends_on"]) for c in children] == [("c2.1", []), ("c2.2", ["c2.1"])]


def test_a_cycle_between_siblings_is_refused_with_the_cycle() -> None:
    _, problem = validate_subplan(
        "c2", [], sub(comp("x", deps=("y",)), comp("y", deps=("x",))), set()
    )
    assert problem is not None and "cycle" in problem and "x → y → x" in problem


def test_a_dependency_on_another_level_is_refused() -> None:
    _, problem = validate_subplan("c2", [], sub(comp("x", deps=("c1",)), comp("y")), {"c1"})
    assert problem is not None and "siblings only" in problem and "c1" in problem


def test_a_file_outside_the_parents_scope_is_refused() -> None:
    _, problem = validate_subplan(
        "c2", ["a.py"], sub(comp("x", "a.py"), comp("y", ".supervisor/config.yaml")), set()
    )
    assert problem is not None and ".supervisor/config.yaml" in problem and "outside" in problem


def test_without_named_files_a_sub_component_may_not_take_another_components_file() -> None:
    _, problem = validate_subplan(
        "c2", [], sub(comp("x", "mine.py"), comp("y", "c1.py")), {"c1.py"}
    )
    assert problem is not None and "c1.py" in problem


def test_a_sub_plan_of_one_component_is_no_split() -> None:
    _, problem = validate_subplan("c2", [], sub(comp("x")), set())
    assert problem is not None and "at least two" in problem


def test_scope_over_the_limits_asks_for_a_split_but_not_at_the_depth_bound() -> None:
    files = [f"f{i}.py" for i in range(13)]
    assert "max_files" in (decompose.over_scope(files, 0, 0, LIMITS) or "")
    assert "max_estimated_lines" in (decompose.over_scope([], 900, 1, LIMITS) or "")
    assert decompose.over_scope(files, 900, 2, LIMITS) is None  # depth 2 = max_depth
    assert decompose.over_scope(["a.py"], 10, 0, LIMITS) is None


def test_a_context_pack_over_the_roles_token_budget_asks_for_a_split() -> None:
    over = decompose.PackFact("implementer", 30_001, 30_000)
    why = decompose.over_scope(["a.py"], 10, 0, LIMITS, over)
    assert why is not None and "30001 tokens" in why and "implementer" in why
    assert "context.token_budget" in why  # the setting a person would change
    fits = decompose.PackFact("implementer", 30_000, 30_000)
    assert decompose.over_scope(["a.py"], 10, 0, LIMITS, fits) is None
    assert decompose.over_scope(["a.py"], 10, 2, LIMITS, over) is None  # at the depth bound


def installed(tree: Tree, parent: str, n: int = 2) -> dict[str, dict[str, Any]]:
    components: dict[str, dict[str, Any]] = {parent: {"status": "expanding", "attempts": 2}}
    decompose.request(tree, parent, "too_large", "big", "claude")
    settle(tree, components, "implement", LIMITS, [])
    tree.nodes[parent].status = "proposed"
    tree.nodes[parent].proposal = [comp(f"{parent}.{i + 1}") for i in range(n)]
    settle(tree, components, "implement", LIMITS, [])
    return components


def test_each_change_of_the_tree_is_one_settlement_with_its_event() -> None:
    tree = Tree()
    components = {"c2": {"status": "expanding", "attempts": 2}}
    decompose.request(tree, "c2", "failed", "gate test failed", "claude")
    done = settle(tree, components, "implement", LIMITS, [])
    assert [e.type for e in done.events] == ["component_expanding"]
    assert tree.nodes["c2"].status == "planning" and not done.human

    tree.nodes["c2"].status, tree.nodes["c2"].proposal = "proposed", [comp("c2.1"), comp("c2.2")]
    done = settle(tree, components, "implement", LIMITS, [])
    assert [e.type for e in done.events] == ["component_expanded"]
    assert components["c2"] == {"status": "pending", "attempts": 0}
    assert components["c2.1"]["status"] == components["c2.2"]["status"] == "pending"
    assert tree.depth_of("c2.1") == 1 and tree.lineage("c2.1") == ["c2.1", "c2"]


def test_an_invalid_sub_plan_goes_back_to_its_planner_then_to_a_person() -> None:
    tree = Tree()
    decompose.request(tree, "c2", "too_large", "big", None)
    settle(tree, {}, "implement", LIMITS, [])
    tree.nodes["c2"].status, tree.nodes["c2"].problem = "invalid", "a cycle"
    assert [e.type for e in settle(tree, {}, "implement", LIMITS, []).events] == [
        "subplan_rejected"
    ]
    assert tree.nodes["c2"].status == "planning"
    tree.nodes["c2"].status = "invalid"
    done = settle(tree, {}, "implement", LIMITS, [])
    assert done.human and tree.nodes["c2"].status == "blocked"
    assert "a cycle" in done.events[0].payload["why"]


def test_past_the_depth_bound_the_next_cli_first_then_a_person() -> None:
    tree = Tree()
    components = installed(tree, "c2")
    installed(tree, "c2.1")  # depth 2: c2.1.1 and c2.1.2
    components["c2.1.1"] = {"status": "expanding", "attempts": 2}
    decompose.request(tree, "c2.1.1", "too_large", "still big", "claude")
    done = settle(tree, components, "implement", LIMITS, ["claude", "codex"])
    assert [e.type for e in done.events] == ["component_retry_cli"]
    assert tree.nodes["c2.1.1"].retry_cli == "codex" and not done.human
    assert components["c2.1.1"] == {"status": "pending", "attempts": 0}

    decompose.request(tree, "c2.1.1", "too_large", "still big on codex", "codex")
    done = settle(tree, components, "implement", LIMITS, ["claude", "codex"])
    assert done.human and [e.type for e in done.events] == ["decomposition_blocked"]
    assert "max_depth 2" in done.events[0].payload["why"]
    assert tree.nodes["c2.1.1"].failures == [
        "too_large: still big",
        "too_large: still big on codex",
    ]


def test_a_failing_qa_pass_retries_its_fix_on_another_cli_then_waits_for_a_person() -> None:
    tree = Tree()
    components = installed(tree, "c2")
    decompose.request(tree, "c2", "qa_failed", "gate test failed", "claude")
    done = settle(tree, components, "implement", LIMITS, ["claude", "gemini"])
    assert tree.nodes["c2"].status == "expanded" and tree.nodes["c2"].retry_cli == "gemini"
    decompose.request(tree, "c2", "qa_failed", "gate test failed again", "gemini")
    done = settle(tree, components, "implement", LIMITS, ["claude", "gemini"])
    assert done.human and "QA pass" in done.events[0].payload["why"]


def test_a_person_letting_the_task_go_on_unblocks_each_component_where_it_stood() -> None:
    tree = Tree()
    components = installed(tree, "c2")
    tree.nodes["c2"].status = "blocked"
    decompose.unblock(tree, components, LIMITS.max_depth)
    assert tree.nodes["c2"].status == "expanded" and components["c2"]["status"] == "pending"


def test_the_flattened_tree_is_a_valid_work_graph_with_the_parent_after_its_parts() -> None:
    plan = {
        "status": "COMPLETE",
        "phases": [
            {
                "id": "p1",
                "description": "",
                "components": [comp("c1", "a.py"), comp("c2", "b.py", "c.py", deps=("c1",))],
            },
            {"id": "p2", "description": "", "components": [comp("c3", "d.py")]},
        ],
        "estimated_components": 3,
    }
    tree = Tree()
    installed(tree, "c2")
    work = WorkGraph.from_plan(PlanOutput.model_validate(flatten(plan, tree.children())))
    order = work.merge_order()
    assert order.index("c1") < order.index("c2.1") < order.index("c2") < order.index("c3")
    assert order.index("c2.2") < order.index("c2")
    assert decompose.describe(tree, plan) == [
        (0, "c1"),
        (0, "c2"),
        (1, "c2.1"),
        (1, "c2.2"),
        (0, "c3"),
    ]


def test_status_shows_sub_components_under_their_parent_with_their_depth() -> None:
    from rich.console import Console

    from supervisor.cli.status_view import components_json
    from supervisor.views.render import work_tree

    tree = Tree()
    installed(tree, "c2")
    context = {
        "plan": {
            "status": "COMPLETE",
            "phases": [{"id": "p1", "description": "", "components": [comp("c2", "b.py")]}],
            "estimated_components": 1,
        },
        "decomposition": tree.model_dump(mode="json"),
        "components": {"c2": {"status": "pending"}, "c2.1": {"status": "merged"}},
    }
    work = WorkGraph.of_workflow(context)
    assert work is not None
    console = Console(record=True, width=100)
    console.print(work_tree("the task", work))
    lines = console.export_text().splitlines()
    (parent,) = [line for line in lines if " c2 " in f"{line} "]
    (child,) = [line for line in lines if "sub-component c2.1" in line]
    assert child.index("sub-component") > parent.index("c2")  # indented under its parent
    assert "after" not in parent  # its own parts are shown under it, not as dependencies
    shown = {c["id"]: (c["depth"], c["parent"], c["status"]) for c in components_json(context)}
    assert shown == {
        "c2": (0, None, "pending"),
        "c2.1": (1, "c2", "complete"),
        "c2.2": (1, "c2", "pending"),
    }
