"""The work graph: phase sequencing, cycles named, priority, file-disjoint batches, rollup."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from supervisor.core.dag import MERGING, WorkGraph, rollup, suggest_dependencies
from supervisor.core.errors import ConfigError
from supervisor.core.schemas import PlanOutput

if TYPE_CHECKING:
    from pathlib import Path


def plan(
    phases: list[dict[str, Any]], dependencies: list[dict[str, str]] | None = None
) -> PlanOutput:
    return PlanOutput.model_validate(
        {
            "status": "COMPLETE",
            "phases": phases,
            "dependencies": dependencies or [],
            "estimated_components": sum(len(p["components"]) for p in phases),
        }
    )


def comp(cid: str, files: list[str], depends_on: list[str] | None = None) -> dict[str, Any]:
    return {"id": cid, "description": cid, "files": files, "depends_on": depends_on or []}


TWO_PHASES = plan(
    [
        {
            "id": "p1",
            "description": "core",
            "components": [
                comp("models", ["app/models.py"]),
                comp("db", ["app/db.py"], ["models"]),
                comp("utils", ["app/utils.py"]),
            ],
        },
        {
            "id": "p2",
            "description": "api",
            "components": [
                comp("api", ["app/api.py"]),
                comp("cli", ["app/cli.py"]),
            ],
        },
    ]
)


def test_later_phases_wait_for_every_component_of_the_earlier_phase() -> None:
    work = WorkGraph.from_plan(TWO_PHASES)
    for later in ("api", "cli"):
        assert set(work.graph.predecessors(later)) == {"models", "db", "utils"}
    assert [c.id for c in work.ready()] == ["models", "utils"]  # models has more dependents


def test_a_dependency_cycle_is_an_error_that_names_it() -> None:
    cyclic = plan(
        [
            {
                "id": "p1",
                "description": "x",
                "components": [
                    comp("a", ["a.py"], ["c"]),
                    comp("b", ["b.py"], ["a"]),
                    comp("c", ["c.py"], ["b"]),
                ],
            }
        ]
    )
    with pytest.raises(ConfigError, match=r"cycle: (a → b → c → a|b → c → a → b|c → a → b → c)"):
        WorkGraph.from_plan(cyclic)


def test_an_undefined_dependency_is_named() -> None:
    with pytest.raises(ConfigError, match="depends on 'ghost'"):
        WorkGraph.from_plan(
            plan([{"id": "p", "description": "x", "components": [comp("a", ["a.py"], ["ghost"])]}])
        )


def test_top_level_dependencies_are_merged_into_the_graph() -> None:
    work = WorkGraph.from_plan(
        plan(
            [
                {
                    "id": "p",
                    "description": "x",
                    "components": [comp("a", ["a.py"]), comp("b", ["b.py"])],
                }
            ],
            [{"source": "b", "target": "a"}],
        )
    )
    assert [c.id for c in work.ready()] == ["a"]


def test_ready_components_sharing_a_file_never_run_together() -> None:
    work = WorkGraph.from_plan(
        plan(
            [
                {
                    "id": "p",
                    "description": "x",
                    "components": [
                        comp("a", ["shared.py", "a.py"]),
                        comp("b", ["shared.py"]),
                        comp("c", ["c.py"]),
                        comp("d", ["d.py"]),
                    ],
                }
            ]
        )
    )
    first = work.batch(limit=3)
    assert [c.id for c in first] == ["a", "c", "d"]  # b waits: it shares shared.py with a
    work.components["a"].status = "implementing"
    work.components["c"].status = "complete"
    work.components["d"].status = "complete"
    assert work.batch(limit=3) == []  # a still holds shared.py
    work.components["a"].status = "complete"
    assert [c.id for c in work.batch(limit=3)] == ["b"]


def test_the_worker_limit_counts_running_components() -> None:
    work = WorkGraph.from_plan(
        plan(
            [{"id": "p", "description": "x", "components": [comp(n, [f"{n}.py"]) for n in "abcd"]}]
        )
    )
    work.components["a"].status = "implementing"
    assert len(work.batch(limit=2)) == 1


def test_a_finished_component_awaiting_its_merge_frees_its_slot_but_holds_its_files() -> None:
    work = WorkGraph.from_plan(
        plan(
            [
                {
                    "id": "p",
                    "description": "x",
                    "components": [
                        comp("a", ["shared.py"]),
                        comp("b", ["shared.py"]),
                        comp("c", ["c.py"]),
                        comp("d", ["d.py"], depends_on=["a"]),
                    ],
                }
            ]
        )
    )
    work.components["a"].status = MERGING
    # c takes a's slot at once; b (a's file) and d (a's dependant) wait for the merge
    assert [c.id for c in work.batch(limit=1)] == ["c"]
    work.components["c"].status = "running"
    assert work.batch(limit=3) == []
    work.components["a"].status = "complete"
    assert [c.id for c in work.batch(limit=3)] == ["b", "d"]


def test_merge_order_follows_dependencies_then_plan_order() -> None:
    work = WorkGraph.from_plan(TWO_PHASES)
    order = work.merge_order()
    assert order.index("models") < order.index("db") < order.index("api")
    assert order[:3] == ["models", "db", "utils"]


def test_status_rolls_up_from_components_to_phases_to_the_feature() -> None:
    work = WorkGraph.from_plan(TWO_PHASES)
    assert work.feature_status() == "pending"
    work.components["models"].status = "implementing"
    assert work.phase_status("p1") == "in_progress" and work.phase_status("p2") == "pending"
    assert work.feature_status() == "in_progress"
    for c in work.components.values():
        c.status = "complete"
    assert work.feature_status() == "complete"
    work.components["cli"].status = "failed"
    assert work.phase_status("p2") == "failed" and work.feature_status() == "failed"
    assert rollup([]) == "pending"


def test_imports_between_unordered_components_are_suggested_as_dependencies() -> None:
    work = WorkGraph.from_plan(
        plan(
            [
                {
                    "id": "p",
                    "description": "x",
                    "components": [
                        comp("models", ["app/models.py"]),
                        comp("api", ["app/api.py"]),
                        comp("db", ["app/db.py"], ["models"]),
                    ],
                }
            ]
        )
    )
    imports = {"app/api.py": ["app/models.py", "app/db.py"], "app/db.py": ["app/models.py"]}
    assert suggest_dependencies(work, imports) == [
        ("api", "models", "app/api.py imports app/models.py"),
        ("api", "db", "app/api.py imports app/db.py"),
    ]  # db → models is declared already, so not suggested


def test_analyze_deps_reads_the_imports_on_the_task_branch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import subprocess

    from supervisor.lifecycle import tasks
    from supervisor.state.store import Store
    from supervisor.workspace.worktrees import Workspace

    monkeypatch.setenv("SUPERVISOR_USER_DIR", str(tmp_path / "user"))
    repo = tmp_path / "repo"
    (repo / "app").mkdir(parents=True)
    (repo / "app" / "__init__.py").write_text("")
    (repo / "app" / "models.py").write_text("class User: ...\n")
    (repo / "app" / "api.py").write_text("from app.models import User\n")
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(["git", "-C", str(repo), "add", "-A"], check=True)
    subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "i"],
        check=True,
    )
    ws = Workspace(repo)
    the_plan = plan(
        [
            {
                "id": "p",
                "description": "x",
                "components": [
                    comp("models", ["app/models.py"]),
                    comp("api", ["app/api.py"]),
                ],
            }
        ]
    )
    with Store(repo / ".supervisor" / "state.db") as store:
        wf = store.create_workflow(
            description="d",
            cli="claude",
            base_branch="master",
            base_sha=ws.head_commit(),
            branch_for_id=lambda i: f"ai/{i}-d",
            definition={},
            first_step="implement",
        )
        store.update_workflow(
            wf.id,
            status="running",
            current_step="implement",
            context={"plan": the_plan.model_dump()},
        )
    ws.create_task_branch(wf.id, "d")
    assert tasks.analyze_deps(wf.id, repo) == [
        ("api", "models", "app/api.py imports app/models.py")
    ]
    # read from the branch's blobs: no worktree was made, so none is left behind
    assert not ws.worktrees_dir.exists() or list(ws.worktrees_dir.iterdir()) == []


def test_status_shows_the_recorded_progress_as_a_feature_phase_component_tree() -> None:
    from rich.console import Console

    from supervisor.views.render import work_tree

    context = {
        "plan": TWO_PHASES.model_dump(),
        "components": {
            "models": {"status": "merged"},
            "db": {"status": "implemented"},
            "utils": {"status": "conflict"},
        },
    }
    work = WorkGraph.of_workflow(context)
    assert work is not None
    console = Console(record=True, width=120)
    console.print(work_tree("Build the app", work))
    lines = [line.rstrip() for line in console.export_text().splitlines()]

    assert lines[0] == "feature failed  Build the app"
    assert "phase p1 failed" in lines[1]
    assert any("models complete  app/models.py" in line for line in lines)
    assert any("db running  app/db.py  after models" in line for line in lines)
    assert any("utils failed" in line for line in lines)
    assert any("phase p2 pending" in line for line in lines)
    assert WorkGraph.of_workflow({}) is None
